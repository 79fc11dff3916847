"""The run's own settings as a table and as JSON (``rlvitals metrics RUN --config``)."""

from __future__ import annotations

from typing import IO

from .. import safe
from ..jsonio import dumps
from ..settings import FIELD_HELP, RunSettings

__all__ = ["settings_json", "settings_text"]


def settings_json(s: RunSettings) -> str:
    """Every setting with its value (null: not said), key and file; the files read and the
    ones that could not be."""
    return safe.json_for_terminal(dumps(s.to_dict()))


def _value(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def settings_text(s: RunSettings, file: IO[str]) -> None:
    """The settings said, grouped by the file that said them (value, key, and a note), then
    the settings no file said and the files that could not be read."""
    said = [f for f in FIELD_HELP if getattr(s, f) is not None]
    width = max(len(f) for f in FIELD_HELP)
    if not said:
        file.write("no settings found: the run left no config rlvitals reads beside its logs\n")
    by_source: dict[str, list[str]] = {}
    for f in said:
        o = s.origin.get(f)
        by_source.setdefault(o.source if o else "?", []).append(f)
    for source, names in by_source.items():
        file.write(safe.line(f"from {source}:") + "\n")
        for f in names:
            o = s.origin.get(f)
            key = f"  {o.key}" if o is not None and not o.key.startswith("(") else ""
            note = f"  ({o.note})" if o is not None and o.note else ""
            file.write(safe.line(f"  {f:<{width}}  {_value(getattr(s, f))}{key}{note}") + "\n")
    missing = s.missing()
    if missing:
        file.write(safe.line(f"not said ({len(missing)}): {', '.join(missing)}") + "\n")
    for p in s.problems:
        file.write(safe.line(f"not read: {p}") + "\n")
