"""The run as a Ray actor on a real local Ray cluster: sampler actors write concurrently,
every attempt is recorded once, the metrics are those of a single-process run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from rlvitals import Run  # noqa: E402
from test_writer_shards import (  # noqa: E402
    STEPS,
    WORKERS,
    _attempts,
    _steps,
    attempts_of,
    cfg,
    trainer_logprobs,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    # Ray's workers import this module's helpers by name: give them the tests folder.
    here = str(Path(__file__).parent)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, old) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


@ray.remote(num_cpus=0)
class Sampler:
    def __init__(self, worker, run):
        self.worker, self.run = worker, run

    def sample(self, step):
        batch = attempts_of(self.worker, step)
        half = len(batch) // 2
        ids = ray.get(self.run.log_attempts.remote(batch[:half]))  # a batch ...
        ids += [ray.get(self.run.log_attempt.remote(**a)) for a in batch[half:]]  # ... and singles
        return ids


def test_sampler_actors_write_one_run(cluster, tmp_path):
    from rlvitals.ray import RunActor

    run = RunActor.options(num_cpus=0).remote(cfg(tmp_path, "ray"))
    samplers = [Sampler.remote(w, run) for w in range(WORKERS)]
    for step in range(STEPS):
        ids = ray.get([s.sample.remote(step) for s in samplers], timeout=60)
        assert len({i for some in ids for i in some}) == sum(len(x) for x in ids)
        rec = ray.get(
            run.log_step.remote(
                step, trainer_logprobs=trainer_logprobs(step), metrics={"train/loss": 0.5}
            ),
            timeout=60,
        )
        assert rec["step"] == step
    info = ray.get(run.close.remote(), timeout=60)
    assert info["status"] == "finished"
    with Run(cfg(tmp_path, "single")) as single:
        for step in range(STEPS):
            for w in range(WORKERS):
                for a in attempts_of(w, step):
                    single.log_attempt(**a)
            single.log_step(
                step, trainer_logprobs=trainer_logprobs(step), metrics={"train/loss": 0.5}
            )
    got, want = tmp_path / "ray", tmp_path / "single"
    lines = (got / "rollouts.jsonl").read_text().splitlines()
    assert len(lines) == len({json.loads(x)["attempt_id"] for x in lines})
    assert _attempts(got) == _attempts(want)
    for x, y in zip(_steps(got), _steps(want), strict=True):
        assert x.keys() == y.keys()
        for k in x:
            assert x[k] == pytest.approx(y[k], rel=1e-9, abs=1e-12), k


def test_misuse_comes_back_as_the_usage_error(cluster, tmp_path):
    from rlvitals.errors import UsageError
    from rlvitals.ray import RunActor

    run = RunActor.options(num_cpus=0).remote(cfg(tmp_path, "misuse"))
    ray.get(run.log_step.remote(3))
    with pytest.raises(ray.exceptions.RayTaskError) as err:
        ray.get(run.log_step.remote(2))
    assert isinstance(err.value.as_instanceof_cause(), UsageError)
    ray.get(run.close.remote())
