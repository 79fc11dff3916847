#!/usr/bin/env python3
"""Train the demo's warm starts (the default settings, seed 0) and ship them with the package.

    python scripts/make_warmstart.py [--seed N]

Writes ``src/rlvitals/grpo/warmstarts/<key>.pt``: the supervised warm start the reference
trainer would train for these settings, trained here from scratch (never from a shipped or a
cached file), with what it did (steps, pass rate, target reached); and the same for each fault
that stops its warm start elsewhere (``grader_exploit``, at its own target pass rate), so
``rlvitals demo --fault grader_exploit`` starts GRPO at once too. The key is the cache key
without the torch version and the thread count, so the file loads under any; run this again
after changing the model, the tasks or the warm-start settings (a test fails until then).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

from rlvitals.grpo.config import ModelConfig, OptimConfig, TaskConfig
from rlvitals.grpo.faults import warm_targets
from rlvitals.grpo.loop import MAX_LEN
from rlvitals.grpo.model import GPT
from rlvitals.grpo.tasks import VOCAB, TaskPool
from rlvitals.grpo.warmstart import SHIPPED, shipped_path, warm_start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    mcfg, tcfg, default = ModelConfig(), TaskConfig(), OptimConfig(seed=args.seed)
    for target in sorted(warm_targets(default.warm_target_pass_rate), reverse=True):
        ocfg = replace(default, warm_target_pass_rate=target)
        torch.set_num_threads(ocfg.threads)
        torch.manual_seed(ocfg.seed)  # as the trainer seeds before it builds the model
        pool = TaskPool(tcfg.digits, tcfg.tool_fraction, tcfg.heldout_fraction)
        model = GPT(len(VOCAB), mcfg.n_layer, mcfg.n_head, mcfg.d_model, max_len=MAX_LEN)
        with tempfile.TemporaryDirectory() as tmp:
            ws = warm_start(model, pool, mcfg, tcfg, ocfg, directory=Path(tmp), shipped=False)
            if ws.cached or not ws.reached_target:
                print(f"make_warmstart: not shipped: {ws}", file=sys.stderr)
                return 1
            SHIPPED.mkdir(exist_ok=True)
            out = shipped_path(mcfg, tcfg, ocfg)
            shutil.copyfile(Path(tmp) / "warmstart" / f"{ws.key}.pt", out)
        print(
            f"wrote {out} ({out.stat().st_size:,} bytes): target {target:g}, {ws.steps} steps, "
            f"pass rate {ws.pass_rate:.2f}, {ws.seconds:.0f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
