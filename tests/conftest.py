"""Shared test setup."""

import os

# torch's OpenMP threads spin while waiting unless told otherwise, which makes the trainer's
# tests 10-100x slower when another process holds a core. It must be set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


# -- reference-trainer runs shared by every test module of the session -----------------------
# A warm start costs tens of seconds; a run of 40 updates about ten. Test modules that need
# real runs ask for them through ``trainer_run`` so each (fault, seed, steps) is trained once
# per session whichever modules ask.

import pytest


@pytest.fixture(scope="session")
def trainer_cache(tmp_path_factory):
    """One warm-start cache for the session (``RLVITALS_TEST_CACHE`` keeps it between
    sessions, for development)."""
    from pathlib import Path

    kept = os.environ.get("RLVITALS_TEST_CACHE")
    return Path(kept) if kept else tmp_path_factory.mktemp("warmstart-cache")


@pytest.fixture(scope="session")
def trainer_run(tmp_path_factory, trainer_cache):
    """``trainer_run(fault=None, seed=0, steps=40, **demo_run_kwargs) -> run dir``, trained once
    per session for each distinct set of arguments."""
    pytest.importorskip("torch")
    from rlvitals.grpo import demo_run

    out = tmp_path_factory.mktemp("trainer-runs")
    made: dict[str, object] = {}

    def get(fault=None, seed=0, steps=40, **kw):
        key = repr((fault, seed, steps, sorted(kw.items())))
        if key not in made:
            name = f"{fault or 'healthy'}-s{seed}-n{steps}-{len(made)}"
            made[key] = demo_run(
                out, name=name, fault=fault, seed=seed, steps=steps, cache=trainer_cache, **kw
            )
        return made[key]

    return get


# Faults whose run need not go on long past its onset (update 5): 14 updates cover the onset,
# the checks' slack and a live check over updates 5-10. The others run the demo's 40 updates
# (a guard stops some sooner). The demo's full runs of every fault, over three seeds, are
# benchmarks/detect.py's.
FAULT_STEPS = dict.fromkeys(("too_easy", "grader_crash", "rollout_crash", "out_of_room", "nan"), 14)


@pytest.fixture(scope="session")
def fault_run(trainer_run):
    """``fault_run(fault) -> run dir``: the session's run of ``fault`` at seed 0, the default
    batch and its length here (``FAULT_STEPS``), one run for every module that asks."""

    def get(fault):
        return trainer_run(fault, steps=FAULT_STEPS.get(fault, 40))

    return get
