"""Runs in object storage, against a real S3 API: moto's server on 127.0.0.1, reached by
s3fs through the standard AWS_ENDPOINT_URL."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

from rlvitals.cli import main  # noqa: E402
from synth import synth_run  # noqa: E402
from transcripts_synth import transcript_run  # noqa: E402


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A local S3 server and a bucket holding two runs (one with transcripts) and a log."""
    import os

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "RLVITALS_CACHE": str(tmp_path_factory.mktemp("cache")),
    }
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import boto3
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    boto3.client("s3").create_bucket(Bucket="runs")
    local = tmp_path_factory.mktemp("local")
    transcript_run(local, "healthy", steps=24)
    synth_run(local, "nan", nan_loss_from=12, lr=0.04, steps=24)
    fs = s3fs.S3FileSystem()
    for d in ("healthy", "nan"):
        fs.put(str(local / d), f"runs/team/{d}", recursive=True)
    yield {"fs": fs, "local": local}
    server.stop()
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _check_json(capsys, *args):
    code = main(["check", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)["runs"]


def test_a_run_in_a_bucket_is_judged_as_the_same_run_on_disk(s3, capsys):
    _, remote = _check_json(capsys, "s3://runs/team/nan")
    _, local = _check_json(capsys, str(s3["local"] / "nan"))
    assert remote[0]["path"] == "s3://runs/team/nan"
    assert remote[0]["verdict"] == local[0]["verdict"] == "non_finite"
    assert [f["title"] for f in remote[0]["findings"]] == [f["title"] for f in local[0]["findings"]]


def test_a_folder_of_runs_in_a_bucket(s3, capsys):
    code, runs = _check_json(capsys, "s3://runs/team", "--fail-on", "fail")
    assert code == 1
    assert sorted(r["path"] for r in runs) == ["s3://runs/team/healthy", "s3://runs/team/nan"]


def test_transcripts_are_fetched_when_read_not_up_front(s3):
    from rlvitals.readers import open_reader

    reader = open_reader("s3://runs/team/healthy")
    reader.poll()
    mirror = reader.mirror
    cached = mirror.local / "transcripts"
    assert reader.run.transcripts.steps()  # listed from the bucket
    assert not cached.exists() or not any(cached.iterdir())  # nothing fetched yet
    got = list(reader.run.transcripts.iter_step(3))
    assert got and got[0].generations[0].completion is not None
    assert sorted(p.name for p in cached.iterdir()) == ["step-000003.json"]


def test_a_growing_remote_log_is_followed_by_its_new_bytes(s3, tmp_path):
    from rlvitals.readers import open_reader

    fs = s3["fs"]
    lines = [
        f"step:{i} - critic/score/mean:{0.2 + 0.01 * i:.3f} - actor/pg_loss:0.1\n"
        for i in range(1, 41)
    ]
    fs.pipe("runs/logs/train.log", "".join(lines[:20]).encode())
    reader = open_reader("s3://runs/logs/train.log")
    reader.poll()
    assert len(reader.run.series("reward/mean")) == 20
    before = reader.mirror.requests
    fs.pipe("runs/logs/train.log", "".join(lines).encode())  # "appended": re-uploaded longer
    assert reader.poll()
    assert len(reader.run.series("reward/mean")) == 40
    assert reader.mirror.requests == before + 1  # one range: the new bytes only
    assert not reader.poll()  # nothing new: nothing fetched
    assert reader.mirror.requests == before + 1


def test_a_missing_object_is_one_clear_line(s3, capsys):
    assert main(["check", "s3://runs/nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "s3://runs/nope" in err and "Traceback" not in err


def test_metrics_reads_a_url(s3, capsys):
    assert main(["metrics", "s3://runs/team/healthy", "--json", "-m", "reward/mean"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out


def test_transcripts_command_reads_a_url(s3, capsys):
    assert main(["transcripts", "s3://runs/team/healthy", "--step", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out


def test_object_keys_with_dot_dot_never_land_outside_the_mirror(s3, tmp_path, capsys):
    """N01: a key ``run/../../<absolute path>`` is refused with a warning, not written there."""
    import boto3

    victim = tmp_path / "victim.txt"
    victim.write_text("original content")
    client = boto3.client("s3")
    for name in ("run.json", "steps.jsonl"):
        client.put_object(
            Bucket="runs", Key=f"trav/ok/{name}", Body=(s3["local"] / "nan" / name).read_bytes()
        )
    evil = "trav/ok/" + "../" * 40 + str(victim).lstrip("/")
    client.put_object(Bucket="runs", Key=evil, Body=b"overwritten by a bucket object")
    client.put_object(Bucket="runs", Key="trav/ok/./dot.txt", Body=b"dot")
    code = main(["check", "s3://runs/trav/ok"])
    cap = capsys.readouterr()
    assert victim.read_text() == "original content"
    assert code == 0 and "NON-FINITE" in cap.out
    assert "outside the run's folder" in cap.err
