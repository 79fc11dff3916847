"""AReaL console: ``Epoch e/E Step s/S Train step g/G done.``, ``Stats (i/n):`` and a
tabulate ``fancy_grid`` table with four key/value pairs per row, values in ``.4e``.

Steps are AReaL's 0-based global step (``g - 1``, as its W&B and TensorBoard sinks log it),
plus ``i - 1`` for the i-th stats table of one commit.
"""

from __future__ import annotations

import re
from pathlib import Path

from ._format import Format, register
from .base import FileState
from .mapping import MappingTable, Rule
from .printed import parse_number
from .textlog import TextLogReader, head, sniff_files

__all__ = ["AREAL", "ArealReader"]

AREAL = MappingTable(
    "areal",
    (
        Rule("ppo_actor/task_reward/avg", "reward/mean"),
        Rule("ppo_actor/no_eos_ratios/avg", "response/truncated_rate", "no EOS = cut by the limit"),
        Rule("ppo_actor/update/entropy/avg", "train/entropy"),
        Rule(
            "ppo_actor/update/compute_logp/kl_div_dual/avg",
            "train/mismatch_kl",
            "k3, current vs behaviour logp",
        ),
        Rule(
            "ppo_actor/update/compute_logp/kl_div_direct/avg",
            "train/mismatch_k1",
            "k1, current vs behaviour logp",
        ),
        Rule("ppo_actor/update/approx_kl/avg", "train/ppo_kl"),
        Rule("ppo_actor/update/clip_ratio/avg", "train/clip_frac"),
        Rule("ppo_actor/update/grad_norm", "train/grad_norm"),
        Rule("ppo_actor/update/lr", "train/lr"),
        Rule(
            "ppo_actor/update/version_stats/sample_staleness_theta_avg",
            "freshness/lag_mean",
        ),
        Rule(
            "ppo_actor/update/version_stats/sample_staleness_theta_max",
            "freshness/lag_max",
        ),
    ),
    (
        ("ppo_actor/kl_rewards/*", "the KL reward term, not the KL"),
        ("ppo_actor/update/compute_logp/kl_div_taylor/*", "k2"),
        ("ppo_actor/seq_len/*", "prompt and response together"),
    ),
    (
        "AReaL logs no group std and no zero-variance groups.",
        "Steps are AReaL's 0-based global step (printed 'Train step g/G' is step g - 1).",
    ),
)

DONE = re.compile(r"Train step (\d+)/\d+ done")
STATS = re.compile(r"Stats \((\d+)/\d+\):")


class ArealReader(TextLogReader):
    name = "areal"
    table = AREAL

    def accept(self, p: Path) -> bool:
        return bool(DONE.search(head(p)))

    def feed(self, st: FileState, text: str, p: Path, lineno: int) -> None:
        m = DONE.search(text)
        if m:
            st.extra["base"] = int(m.group(1)) - 1
            st.extra["step"] = st.extra["base"]
            return
        m = STATS.search(text)
        if m and "base" in st.extra:
            st.extra["step"] = st.extra["base"] + int(m.group(1)) - 1
            return
        t = text.strip()
        if not t.startswith("│") or "step" not in st.extra:
            return
        cells = [c.strip() for c in t.strip("│").split("│")]
        values = {}
        for key, raw in zip(cells[0::2], cells[1::2]):
            v = parse_number(raw)
            if key and v is not None:
                values[key] = v
        self.emit(st.extra["step"], values)


register(
    Format(
        "areal",
        "AReaL console log (Train step g/G done, then a fancy_grid stats table)",
        lambda p: sniff_files(p, ArealReader.patterns, lambda f: DONE.search(head(f))),
        ArealReader,
        priority=35,
        table=AREAL,
        kind="console log",
    )
)
