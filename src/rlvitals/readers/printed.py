"""Values as programs print them, parsed leniently and never with ``eval``.

Python's repr of numbers (``np.float64(0.25)``, ``nan``, ``inf``, ``tensor(0.5,
device='cuda:0')``), percentages, and printed dicts (Python repr or JSON) whose records may
span lines: what every console reader (``textlog``) and the reading by shape (``shapes``)
take values with.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = [
    "NUM",
    "PAIR",
    "SEG_WORDS",
    "UNIT",
    "VALUE",
    "brace_balance",
    "clean_key",
    "number",
    "parse_number",
    "parse_pairs",
]

_WRAPPER = re.compile(
    r"^(?:np|numpy|torch|jnp)\.\w+\((.*)\)$|^(?:tensor|array|float|int|Decimal)\((.*)\)$", re.S
)
_NONFINITE = {
    "nan": math.nan,
    "-nan": math.nan,
    "inf": math.inf,
    "+inf": math.inf,
    "-inf": -math.inf,
    "infinity": math.inf,
    "-infinity": -math.inf,
}
_CONSTS = {"true": 1.0, "false": 0.0}


def parse_number(token: str) -> float | None:
    """A number from a printed value: ``0.25``, ``'0.2500'``, ``np.float64(0.25)``, ``nan``,
    ``tensor(0.5, device='cuda:0')``, ``True``; None for anything else."""
    t = token.strip()
    quoted = False
    for _ in range(3):
        if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
            t = t[1:-1].strip()
            quoted = True
            continue
        m = _WRAPPER.match(t)
        if m:
            inner = m.group(1) if m.group(1) is not None else m.group(2)
            t = _first_arg(inner).strip()
            continue
        break
    if not t:
        return None
    low = t.lower()
    if low in _NONFINITE:
        return _NONFINITE[low]
    if low in _CONSTS:
        # A bare True/False is a flag; the string 'true' is a label ({'A': 'true'}).
        return None if quoted else _CONSTS[low]
    if t.endswith("%"):
        v = _float(t[:-1])
        return None if v is None else v / 100.0
    return _float(t)


def _float(t: str) -> float | None:
    try:
        return float(t.replace("_", "")) if t[0] not in "_" else None
    except (ValueError, IndexError):
        return None


def _first_arg(inner: str) -> str:
    depth = 0
    quote = ""
    for i, ch in enumerate(inner):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            return inner[:i]
    return inner


def parse_pairs(text: str, *, complete: bool = True) -> dict[str, Any]:
    """The top-level ``'key': value`` pairs of a printed dict (Python repr or JSON), leniently.

    Values are numbers (see ``parse_number``) or, where not numeric, the raw text; nested
    containers are skipped. With ``complete=False`` the last pair is dropped, since a record
    still being written may end in the middle of it.
    """
    out: dict[str, Any] = {}
    n = len(text)
    i = text.find("{")
    i = 0 if i < 0 else i + 1
    while i < n:
        # Find the next key: a quoted string at depth 0.
        ch = text[i]
        if ch in "'\"":
            key, j = _read_string(text, i)
            if j < 0:
                break
            k = j
            while k < n and text[k] in " \t\n":
                k += 1
            if k >= n or text[k] != ":":
                i = j
                continue
            k += 1
            start = k
            depth = 0
            quote = ""
            while k < n:
                c = text[k]
                if quote:
                    if c == "\\":
                        k += 2
                        continue
                    if c == quote:
                        quote = ""
                elif c in "'\"":
                    quote = c
                elif c in "([{":
                    depth += 1
                elif c in ")]}":
                    if depth == 0:
                        break
                    depth -= 1
                elif c == "," and depth == 0:
                    break
                k += 1
            raw = text[start:k].strip()
            if k >= n and not complete:
                break  # the value may be cut off
            if raw and raw[0] not in "{[":
                v = parse_number(raw)
                if v is None and len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
                    raw = raw[1:-1]
                out[key] = v if v is not None else raw
            if k < n and text[k] == "}":
                break
            i = k + 1
        else:
            i += 1
    return out


def _read_string(text: str, i: int) -> tuple[str, int]:
    q = text[i]
    j = i + 1
    n = len(text)
    buf = []
    while j < n:
        c = text[j]
        if c == "\\" and j + 1 < n:
            buf.append(text[j + 1])
            j += 2
            continue
        if c == q:
            return "".join(buf), j + 1
        buf.append(c)
        j += 1
    return "", -1


def brace_balance(text: str) -> int:
    """Open minus closed braces outside quotes (> 0: the record goes on)."""
    depth = 0
    quote = ""
    prev = ""
    for c in text:
        if quote:
            if c == quote and prev != "\\":
                quote = ""
        elif c in "'\"":
            # An apostrophe inside a word (it's) is not a quote.
            if not (c == "'" and prev.isalnum()):
                quote = c
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        prev = c
    return depth


# -- numbers and pairs as printed (every reading of printed text shares these) ----------------

NUM = r"[-+]?(?:\d[\d_]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf(?:inity)?)"
UNIT = r"(?:\s?(?:%|s|ms|us|min|h|GB|GiB|MB|MiB|KB|tokens?/s|tok/s|it/s|s/it|samples/s|toks?))?"
_WRAPPED = rf"(?:(?:np|numpy|torch|jnp)\.\w+|tensor|array|float)\((?:{NUM})[^()]*\)"
VALUE = rf"(?:{_WRAPPED}|'{NUM}'|\"{NUM}\"|{NUM})"
# One ``key: value`` / ``key=value`` with a key of one token (for runs of pairs on a line).
PAIR = re.compile(
    rf"(?<![\w./@-])([A-Za-z_@][\w./@\[\]-]*)\s*[:=]\s*({VALUE}){UNIT}(?![\w.])", re.I
)
# ``Train loss 0.000`` / ``Peak mem 32.940 GB``: words then a number (after a step marker).
SEG_WORDS = re.compile(rf"^([A-Za-z][\w./ -]*?[A-Za-z)\]])\s+({VALUE}){UNIT}\.?$", re.I)
_WITH_UNIT = re.compile(rf"^\s*({NUM}){UNIT}\s*(?:\([^)]*\))?\s*$", re.I)


def number(text: str) -> float | None:
    """A printed number: ``0.25``, ``'0.25'``, ``np.float64(0.25)``, ``nan``, ``85%``,
    ``12.3s``, ``4.1 GB``; None for anything else."""
    try:
        return float(text)  # the common case, fast
    except ValueError:
        pass
    v = parse_number(text)
    if v is not None:
        return v
    m = _WITH_UNIT.match(text)
    return parse_number(m.group(1)) if m else None


def clean_key(key: str) -> str:
    """A printed key as the framework named it: quotes, bullets and extra spaces removed."""
    k = key.strip().strip("'\"`*").strip()
    if " " not in k and "\t" not in k:
        return k
    if "/" in k:
        k = re.sub(r"\s*/\s*", "/", k)
    return " ".join(k.split())
