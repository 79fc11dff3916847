"""Lines between a framework's step records (errors, 503s, tracebacks) become events in the
run's model, whatever console reader reads the log, and the liveness check judges them."""

from __future__ import annotations

import pytest

import rlvitals
from rlvitals.checks import run_checks

VERL = """\
(TaskRunner pid=123) step:1 - critic/score/mean:0.20 - actor/pg_loss:0.1
2026-11-30 10:00:05,123 ERROR Server error '503 Service Unavailable' for url 'http://127.0.0.1:30000/generate'
(TaskRunner pid=123) step:2 - critic/score/mean:0.21 - actor/pg_loss:0.1
Traceback (most recent call last):
  File "/x/main_ppo.py", line 12, in <module>
    main()
RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB
"""


@pytest.fixture
def verl_log(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(VERL)
    return p


def test_a_framework_readers_log_keeps_its_errors_as_events(verl_log):
    data = rlvitals.read(verl_log)
    assert data.format == "verl"
    kinds = [(e.kind, e.step, e.line) for e in data.events]
    assert kinds == [("http_5xx", 1, 2), ("traceback", 2, 4)]
    tb = data.events[1]
    assert "CUDA out of memory" in tb.text and tb.time is not None  # the stamp before it


def test_a_traceback_after_the_last_step_is_a_crash(verl_log):
    report = run_checks(rlvitals.read(verl_log))
    assert report.verdict == "crashed"
    live = next(f for f in report.findings if f.check == "liveness")
    assert "after step 2" in live.title and "CUDA out of memory" in live.title


def test_a_clean_log_has_no_events_and_no_crash(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(
        "".join(
            f"step:{i} - critic/score/mean:{0.2 + 0.01 * i:.3f} - actor/pg_loss:0.1\n"
            for i in range(1, 12)
        )
    )
    data = rlvitals.read(p)
    assert data.events == []
    assert run_checks(data).verdict != "crashed"


def test_events_are_read_live_as_the_log_grows(tmp_path):
    from rlvitals.readers import open_reader

    p = tmp_path / "train.log"
    p.write_text(VERL.split("Traceback")[0])
    reader = open_reader(p)
    reader.poll()
    assert [e.kind for e in reader.run.events] == ["http_5xx"]
    with open(p, "a") as f:
        f.write("Traceback" + VERL.split("Traceback")[1])
    reader.poll()
    reader.finish()
    assert [e.kind for e in reader.run.events] == ["http_5xx", "traceback"]


def test_engine_dead_seconds_is_a_threshold_set_reaches():
    # 503s every 30 s for 90 s after the last step: a burst under the default 120 s line (a
    # healthy engine has those), an engine that died with `--set engine_dead_seconds=60`.
    from rlvitals.checks import Thresholds, run_checks
    from rlvitals.model import Event, RunData

    d = RunData(source="<memory>", format="test")
    for step in range(6):
        d.metrics.add(step, "time", 1000.0 + step)
    d.events = [
        Event(1010.0 + 30 * i, "http_5xx", "HTTP 503 Service Unavailable", 5, "train.log", 10 + i)
        for i in range(4)
    ]
    now = 1100.0

    def engine(th=None):
        rep = run_checks(d, now=now, thresholds=th)
        return [f for f in rep.findings if f.check == "liveness" and "engine" in f.title]

    assert engine() == []
    (f,) = engine(Thresholds().with_overrides({"engine_dead_seconds": "60"}))
    assert f.severity == "fail" and f.evidence["seconds"] == 90 and f.evidence["line"] == 60
