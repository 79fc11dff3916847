"""Transcript text: flattening messages to text, escaping it for display, reading answers, and
measuring repetition.

Transcript text is untrusted: a policy can write terminal escape sequences, bidirectional
overrides or rich markup. It is never executed or evaluated anywhere in rlvitals, and
``escape`` makes it inert for display: control characters and invisible direction marks become
visible escapes (``\\x1b``, ``\\u202e``). Views print the result as plain text.
"""

from __future__ import annotations

import math
import re
import zlib
from typing import Any

from .. import safe as _safe

__all__ = [
    "TERMINAL_UNSAFE",
    "distinct_ngram_ratio",
    "escape",
    "excerpt",
    "flatten",
    "normalize_answer",
    "repeated_line_ratio",
    "zlib_ratio",
]

# The one rule for unsafe characters lives in ``safe.py`` (C0/C1 controls, bidi marks,
# embeddings, overrides and isolates (CVE-2021-42574), separators, zero-width characters).
TERMINAL_UNSAFE = _safe.UNSAFE


def escape(text: str, *, multiline: bool = True, tabs: bool = True) -> str:
    """``text`` with every control character made visible (``\\x1b``), newlines kept when
    ``multiline`` (else shown as ``⏎``). Safe to print as plain text in any terminal."""
    if not multiline:
        text = text.replace("\r\n", "\n").replace("\n", "⏎")
    return _safe.block(text, tabs=tabs)


def excerpt(text: str, span: tuple[int, int] | None = None, width: int = 160) -> str:
    """A one-line escaped excerpt of ``text`` of at most ``width`` characters, centred on
    ``span`` (a match) when given."""
    if span is None:
        lo, hi = 0, min(len(text), width)
    else:
        a, b = span
        pad = max(0, (width - (b - a)) // 2)
        lo = max(0, a - pad)
        hi = min(len(text), max(b, lo + width))
        if hi - lo > width:
            hi = lo + width
    body = escape(text[lo:hi], multiline=False)
    return ("…" if lo > 0 else "") + body + ("…" if hi < len(text) else "")


def flatten(value: Any, limit: int = 1 << 20) -> str:
    """The text of a prompt or completion: a string as is; chat messages as their contents
    (``role: content``), tool calls and their arguments included; at most ``limit`` chars."""
    parts: list[str] = []
    size = 0

    def add(s: str) -> None:
        nonlocal size
        if size < limit:
            parts.append(s[: limit - size])
            size += len(parts[-1])

    def walk(v: Any, key: str | None = None, depth: int = 0) -> None:
        if size >= limit or depth > 20:
            return
        if isinstance(v, str):
            add(f"{key}: {v}" if key not in (None, "content", "text") else v)
        elif isinstance(v, dict):
            role = v.get("role")
            if isinstance(role, str) and "content" in v:
                add(f"{role}:")
            for k, x in v.items():
                if k == "role" and isinstance(role, str) and "content" in v:
                    continue
                walk(x, str(k), depth + 1)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x, key, depth + 1)
        elif v is not None and not isinstance(v, bool) and key not in (None, "content", "text"):
            add(f"{key}: {v}")

    walk(value)
    return "\n".join(parts)


_NUM = re.compile(r"^[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?$")
_FRAC = re.compile(r"^([-+]?\d+)\s*/\s*(\d+)$")
_LATEX = re.compile(r"\\(?:text|mathrm|textbf|mathbf)\{([^{}]*)\}")


def normalize_answer(answer: str) -> str:
    """An answer in a form where equal answers compare equal: case and spaces ignored,
    surrounding ``$``/punctuation and ``\\text{}`` dropped, numbers (``1,000``, ``1000.0``,
    ``1/2``) written one way."""
    a = _LATEX.sub(r"\1", answer).strip().strip("$").strip()
    a = a.rstrip(".;,:!").strip()
    a = re.sub(r"\s+", " ", a).lower()
    if a and _NUM.match(a) and any(ch.isdigit() for ch in a):
        try:
            x = float(a.replace(",", ""))
        except ValueError:
            return a
        if math.isfinite(x):
            return repr(int(x)) if x == int(x) and abs(x) < 1e15 else repr(x)
    m = _FRAC.match(a)
    if m and int(m.group(2)):
        x = int(m.group(1)) / int(m.group(2))
        return repr(int(x)) if x == int(x) else repr(round(x, 12))
    return a


# -- repetition ---------------------------------------------------------------------------

_WORD = re.compile(r"\w+|[^\w\s]")


def tokens(text: str, limit: int = 20000) -> list[str]:
    """Words and punctuation marks of ``text`` (its first ``limit``); characters when the
    text has almost no word boundaries (digit strings, code golf)."""
    words = _WORD.findall(text[: limit * 8])[:limit]
    if len(words) * 4 < min(len(text), limit):
        return list(text[:limit])
    return words


def distinct_ngram_ratio(toks: list[str], n: int = 3) -> float:
    """Distinct n-grams / n-grams (1 = no repeat; NaN for fewer than n tokens)."""
    if len(toks) < n:
        return math.nan
    total = len(toks) - n + 1
    return len(set(zip(*(toks[i:] for i in range(n))))) / total


def zlib_ratio(text: str, limit: int = 1 << 16) -> float:
    """zlib (level 1) compressed size / size of the UTF-8 text (its first ``limit`` bytes). Prose is
    about 0.4-0.6 at a few kB; a reply looping on itself falls under 0.1."""
    raw = text.encode("utf-8", "replace")[:limit]
    if not raw:
        return math.nan
    return len(zlib.compress(raw, 1)) / len(raw)


def repeated_line_ratio(text: str, min_lines: int = 4) -> float:
    """Share of non-empty lines that repeat an earlier line (NaN under ``min_lines``)."""
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    if len(lines) < min_lines:
        return math.nan
    return 1.0 - len(set(lines)) / len(lines)
