"""Regenerate ``grpo.db`` with the real trackio (local, no Space, no network).

    pip install trackio==0.43.0 && python tests/data/trackio/make_fixture.py

One run of a project, logged the way verl's trackio backend does (``verl/utils/tracking.py``:
``trackio.log(data, step=step)`` with verl's keys): ``ppo-a`` 10 steps, with a NaN policy loss
at step 4 and an infinite max score at step 6 (stored as "NaN"/"Infinity" strings). A project
of several runs (``--run NAME``) is made by ``tests/test_readers_trackio.py`` with the real
trackio. The database is vacuumed to keep it small.
"""

from __future__ import annotations

import math
import os
import shutil
import sqlite3
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    tmp = tempfile.mkdtemp()
    os.environ.update(TRACKIO_DIR=tmp, HF_HUB_OFFLINE="1")
    import trackio

    for name, steps in (("ppo-a", 10),):
        trackio.init(project="grpo", name=name, config={"actor_lr": 1e-6, "rollout_n": 5})
        for s in range(1, steps + 1):
            trackio.log(
                {
                    "critic/score/mean": round(0.1 * s, 6),
                    "critic/score/max": math.inf if s == 6 else 1.0,
                    "actor/entropy": round(1.0 - 0.05 * s, 6),
                    "actor/kl_loss": round(0.001 * s, 6),
                    "actor/ppo_kl": round(0.0001 * s, 6),
                    "actor/pg_loss": math.nan if s == 4 else round(-0.01 * s, 6),
                    "actor/pg_clipfrac": 0.002,
                    "response_length/mean": 300.0 + s,
                    "timing_s/step": 12.5,
                },
                step=s,
            )
        trackio.finish()
    out = os.path.join(HERE, "grpo.db")
    if os.path.exists(out):
        os.remove(out)
    conn = sqlite3.connect(os.path.join(tmp, "grpo.db"))
    conn.execute(f"VACUUM INTO '{out}'")
    conn.close()
    conn = sqlite3.connect(out)  # a single file, no -wal beside it
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
