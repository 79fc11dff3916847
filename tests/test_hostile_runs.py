"""Hostile input to one run (report, transcripts, watch, readers): the findings of the
2026-12-03 attack report (../shared/research/adversarial-2026-12-03.md), each as the user met
it."""

from __future__ import annotations

from rlvitals.cli import main
from test_hostile_fleet import _deny
from transcripts_synth import transcript_run


def test_unreadable_transcripts_folder_is_a_warning_not_a_traceback(tmp_path, monkeypatch, capsys):
    """N15: ``report`` on a run whose transcripts/ cannot be listed writes the page with a
    warning; ``transcripts`` says the folder cannot be read, not "set trace = full"."""
    run = transcript_run(tmp_path, "r", steps=6)
    _deny(monkeypatch, run / "transcripts")
    out = tmp_path / "r.html"
    assert main(["report", str(run), "-o", str(out)]) == 0
    assert out.is_file()
    capsys.readouterr()
    main(["transcripts", str(run)])
    text = " ".join(capsys.readouterr().out.split())
    assert "cannot read the folder (Permission denied)" in text
    assert "Set [output]" not in text
