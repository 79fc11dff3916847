"""SkyRL console: a ``Step N:`` line, then ``pprint.pformat`` of the metrics on the next lines,
keys sorted and every float a quoted string with 4 decimals."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from ._format import Format, register
from .base import FileState
from .mapping import MappingTable, Rule, synonym
from .textlog import TextLogReader, head, sniff_files

__all__ = ["SKYRL", "SkyRLReader"]

SKYRL = MappingTable(
    "skyrl",
    (
        synonym("reward/avg_raw_reward"),
        synonym("generate/avg_num_tokens"),
        Rule("policy/policy_entropy", "train/entropy"),
        Rule("policy/policy_kl", "train/ref_kl", "estimator k1/abs/k2/k3"),
        Rule(
            "policy/rollout_train_logprobs_abs_diff_mean",
            "train/logprob_abs_diff",
            "trainer pi_old vs rollout",
        ),
        Rule("policy/loss_metrics/clip_ratio", "train/clip_frac"),
        Rule("policy/policy_loss", "train/loss"),
        Rule("policy/grad_norm", "train/grad_norm"),
        Rule("policy/policy_lr", "train/lr"),
        Rule("async/staleness_mean", "freshness/lag_mean", "fully async"),
        Rule("async/staleness_max", "freshness/lag_max", "fully async"),
        Rule("timing/step", "perf/step_seconds"),
    ),
    (
        ("loss/avg_final_rewards", "may include the KL penalty"),
        ("reward/num_zero_variance_filtered", "only with the filter on; a count of prompts"),
        ("policy/loss_metrics/is_ratio_*", "IS weights, not an ESS"),
    ),
    ("SkyRL logs no truncation rate: response/truncated_rate is absent.",),
)

HEADER = re.compile(r"(?:^|\s)Step (\d+):\s*$", re.M)


class SkyRLReader(TextLogReader):
    name = "skyrl"
    table = SKYRL

    def accept(self, p: Path) -> bool:
        return _looks_like(p)

    def feed(self, st: FileState, text: str, p: Path, lineno: int) -> None:
        m = HEADER.search(text)
        if m:
            self.end_pending(st, p)
            st.extra["step"] = int(m.group(1))
            return
        if self.continue_dict(st, text, p):
            return
        step = st.extra.pop("step", None)
        if step is not None and text.lstrip().startswith("{"):
            self.start_dict(st, step, text.lstrip(), p, lineno)


def _looks_like(p: Path) -> bool:
    lines = head(p).splitlines()
    return any(
        HEADER.search(a) and b.lstrip().startswith("{'") for a, b in itertools.pairwise(lines)
    )


register(
    Format(
        "skyrl",
        "SkyRL console log (Step N: then a pformat dict of quoted 4-decimal values)",
        lambda p: sniff_files(p, SkyRLReader.patterns, _looks_like),
        SkyRLReader,
        priority=34,
        table=SKYRL,
        kind="console log",
    )
)
