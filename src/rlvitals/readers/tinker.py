"""tinker-cookbook: ``<log_path>/metrics.jsonl``, one row ``{"step": i, ...}`` per iteration."""

from __future__ import annotations

from pathlib import Path

from ._format import Format, register
from .generic import JsonlMetricsReader, sniff_glob
from .mapping import MappingTable, Rule, synonym
from .textlog import head

__all__ = ["TINKER", "TinkerReader"]

TINKER = MappingTable(
    "tinker",
    (
        synonym("env/all/reward/total"),
        Rule(
            "env/all/by_group/frac_mixed", "groups/signal_fraction", "groups whose rewards differ"
        ),
        Rule(
            "optim/entropy",
            "sampling/entropy_estimate",
            "-mean sampled logp: a negative log-likelihood, not the full entropy",
        ),
        Rule(
            "optim/kl_sample_train_v1",
            "train/mismatch_k1",
            "mean(lp_sample - lp_train); later minibatches include policy drift",
        ),
        Rule("optim/lr", "train/lr"),
        Rule("time/total", "perf/step_seconds"),
    ),
    (
        ("optim/kl_sample_train_v2", "k2 = ½·mean(Δ²), neither k1 nor k3"),
        ("env/all/by_group/frac_all_good", "a fraction, and 'good' is reward >= 0.5, not the top"),
        ("env/all/stop/*", "averaged over transitions that carry the key: reads ≈1, not a rate"),
        ("env/all/ac_tokens_per_turn", "per turn, not per attempt"),
        ("sampling_client/step_*", "sampler step numbers, not lags"),
    ),
    ("Grad norm and loss names come from the Tinker service and are kept as logged.",),
)

_MARKERS = ('"env/all/', '"optim/kl_sample_train', '"progress/done_frac"', '"optim/entropy"')


def _is_tinker(p: Path) -> bool:
    t = head(p, 64 << 10)
    return t.lstrip().startswith("{") and any(m in t for m in _MARKERS)


class TinkerReader(JsonlMetricsReader):
    name = "tinker"
    table = TINKER
    glob = ("metrics.jsonl", "*.jsonl")

    def accept(self, p: Path) -> bool:
        return _is_tinker(p)


register(
    Format(
        "tinker",
        "tinker-cookbook metrics.jsonl",
        lambda p: sniff_glob(p, "*.jsonl", _is_tinker),
        TinkerReader,
        priority=21,
        table=TINKER,
        kind="JSONL",
    )
)
