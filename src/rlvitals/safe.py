"""The one sanitiser for untrusted text (run names, stop reasons, metric names, titles that quote
model output, transcripts) wherever rlvitals shows it.

A policy, a log line or a crafted ``run.json`` can hold terminal escape sequences (ESC, CSI,
OSC: clear the screen, retitle the window, write the clipboard), C1 controls (U+009B is a
one-character CSI), bidirectional overrides and isolates that reorder what follows them
(CVE-2021-42574: ``safe\\u202etxt.exe`` reads as ``safeexe.txt``), zero-width and line
separator characters. Every view passes such text through one of these functions, so there is
one rule for the terminal, the Markdown summary, the HTML pages and the webhook:

- ``line(text)``: one terminal line; newlines and tabs become spaces, every other unsafe
  character its visible escape (``\\x1b``, ``\\u202e``).
- ``block(text)``: many lines; newlines and tabs kept, the rest made visible.
- ``markdown(text)``: ``line`` plus Markdown/HTML escaping (PR comments, CI summaries).
- ``slack(text)``: chat-webhook text: controls removed, Slack's ``&``, ``<``, ``>`` escaped
  (so ``<!channel>`` or ``<url|label>`` in model output is shown, never acted on).
- ``json_for_terminal(json_text)``: JSON printed to a terminal or log (``--json``): the same
  values, with every unsafe character that sits raw in it written as a JSON ``\\uXXXX``.
- ``json_for_html(json_text)``: JSON text headed for a page, with every bidi, C1 and separator
  character turned into a visible ``\\u202e`` (the page then shows it as text).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "UNSAFE",
    "block",
    "fs_text",
    "json_for_html",
    "json_for_terminal",
    "line",
    "markdown",
    "slack",
    "unicode_text",
    "unsurrogate",
    "visible",
]

# C0 controls but tab/newline (ESC starts CSI/OSC sequences), DEL and C1 (U+009B is a CSI on
# its own), the Arabic letter mark, zero-width characters and direction marks (U+200B-U+200F),
# line/paragraph separators, embeddings and overrides (U+202A-U+202E), word joiner and invisible
# operators, isolates (U+2066-U+2069), the BOM and interlinear annotations.
UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069"
    "\ufeff\ufff9-\ufffb\ud800-\udfff]"
)
_UNSAFE_ALL = re.compile(UNSAFE.pattern[:1] + "\t\n" + UNSAFE.pattern[1:])


def _esc(m: re.Match[str]) -> str:
    o = ord(m.group())
    if 0xDC80 <= o <= 0xDCFF:  # a byte of a file name that is not UTF-8 (surrogateescape)
        return f"\\x{o - 0xDC00:02x}"
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def unicode_text(text: Any) -> str:
    """``text`` as valid Unicode, for a file or a table: each byte of a file name that was not
    UTF-8 (Python's lone surrogates) written as ``\\xNN``; every other character kept."""
    s = str(text)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape" if _only_escapes(s) else "surrogatepass").decode(
            "utf-8", "backslashreplace"
        )
    return s


def _only_escapes(s: str) -> bool:
    return all(not (0xD800 <= ord(c) <= 0xDFFF) or 0xDC80 <= ord(c) <= 0xDCFF for c in s)


def visible(text: Any) -> str:
    """Every unsafe character of ``text`` (tab and newline included) as its visible escape."""
    return _UNSAFE_ALL.sub(_esc, str(text))


def line(text: Any) -> str:
    """``text`` as one safe terminal line: CR/LF and tabs as spaces, the rest made visible."""
    s = str(text).replace("\r\n", " ").replace("\n", " ").replace("\t", " ")
    return UNSAFE.sub(_esc, s)


def block(text: Any, *, tabs: bool = True) -> str:
    """``text`` for a terminal, its lines kept (``\\r\\n`` read as a newline); a lone CR and
    every other unsafe character made visible. ``tabs=False`` turns tabs into spaces."""
    s = str(text).replace("\r\n", "\n")
    if not tabs:
        s = s.replace("\t", " ")
    return UNSAFE.sub(_esc, s)


# Inline markup a table cell or heading would act on: the escape character itself, code spans,
# emphasis and strikethrough, link and image brackets and the cell separator. ``_`` is left alone
# between two letters or digits (there it cannot open or close emphasis: ``reward_mean``), and
# ``.``, ``-``, ``(``, ``)`` and ``>`` mid-line are plain text, so numbers and arrows read as
# written (``0.705 -> 0.0325``).
_MD_INLINE = re.compile(r"[\\`*~\[\]|]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
# Block markup that only acts at the start of a line (headings, quotes, lists, rules).
# (``-3.2`` or ``1.5 steps`` stay as written: a list needs a space after its marker).
_MD_LEADING = re.compile(r"^(\s*(?:\d{1,9})?)([#>]|[+\-=](?=[\s+\-=]|$)|(?<=\d)[.)](?=\s|$))")


def markdown(text: Any) -> str:
    """``text`` as one line of Markdown that shows as itself (a table cell, a heading, a PR
    comment): ``line`` first, then ``&`` and ``<`` as HTML entities (no tag, comment, autolink
    or entity can start), the inline markup characters backslash-escaped and a leading block
    marker escaped. Numbers, arrows and parentheses are left as written."""
    s = line(text).replace("&", "&amp;").replace("<", "&lt;")
    s = _MD_INLINE.sub(lambda m: "\\" + m.group(), s)
    return _MD_LEADING.sub(lambda m: m.group(1) + "\\" + m.group(2), s, count=1)


def markdown_cell(text: Any) -> str:
    """Lighter escaping for generated docs tables: one line, ``|`` escaped."""
    return line(text).replace("|", "\\|")


_SLACK_DROP = re.compile(UNSAFE.pattern)


def slack(text: Any) -> str:
    """Text for a Slack-compatible webhook: control and direction characters removed (tabs
    and newlines kept), ``&``, ``<``, ``>`` escaped as Slack's docs require, so markup such as
    ``<!channel>`` or ``<https://x|label>`` in model output is shown, not acted on."""
    s = _SLACK_DROP.sub("", str(text).replace("\r\n", "\n"))
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# Characters that JSON encoders leave raw and a browser acts on when drawing text.
_HTML_UNSAFE = re.compile(
    "[\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb\ud800-\udfff]"
)


def json_for_html(json_text: str) -> str:
    """JSON text with every direction, zero-width, separator and C1 character that sits raw in
    it replaced by the JSON for its visible escape (``\\\\u202e``): the page shows the text
    ``\\u202e`` where the character was, so it cannot reorder what follows. Only raw characters
    are touched, and those occur only inside JSON strings, so the JSON stays valid."""
    return _HTML_UNSAFE.sub(lambda m: f"\\\\u{ord(m.group()):04x}", json_text)


def json_for_terminal(json_text: str) -> str:
    """JSON text with every unsafe character that sits raw in it written as its JSON escape
    (``\\u202e``): the same values once parsed, nothing a terminal acts on when printed."""
    return _HTML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)


def fs_text(s: str) -> str:
    """``s`` with the bytes of a file name that is not UTF-8 (``surrogateescape``'s lone
    surrogates) shown as visible ``\\xff`` escapes: text every encoder accepts."""
    if s.isascii():
        return s
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def unsurrogate(data: Any) -> Any:
    """``data`` with every string (keys too) passed through ``fs_text``."""
    if isinstance(data, str):
        return fs_text(data)
    if isinstance(data, dict):
        return {unsurrogate(k): unsurrogate(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [unsurrogate(v) for v in data]
    return data
