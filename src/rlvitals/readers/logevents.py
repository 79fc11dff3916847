"""Log lines as events and times: timestamps, levels and logger prefixes, and the kinds of
line that say a run is in trouble (``model.EVENT_KINDS``).

``strip_prefix`` splits a cleaned log line into (unix time or None, level, message);
``classify`` names the event a message is, if any. ``shapes.ShapeParser`` uses both, and keeps
a ``Traceback (most recent call last):`` block whole as one event.
"""

from __future__ import annotations

import datetime as _dt
import re

__all__ = ["MAX_EVENTS", "classify", "parse_timestamp", "strip_prefix"]

# Prefixes before the message: timestamps, levels, logger names, file:line, decorations.
_TS_ISO = re.compile(
    r"^\[?(\d{4})[-/](\d{2})[-/](\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
    r"\s*(Z|[+-]\d{2}:?\d{2}|UTC)?\]?"
)
_TS_US = re.compile(r"^\[?(\d{2})/(\d{2})/(\d{4}) (\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?\]?")
_TS_GLOG = re.compile(
    r"^([IWEF])(\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?\s+\d*\s*[\w./-]*:\d+\]"
)
_TS_MD = re.compile(
    r"^\[?(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?\]?(?=\s)"
)  # vLLM
_TS_CLOCK = re.compile(r"^\[?(\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?\]?(?=\s|$)")
_LEVEL = re.compile(
    r"^[\s|,:\-]*\[?(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|TRACE|SUCCESS)\]?(?:\s*\|)?"
    r"(?::[\w.]+:)?[\s:|\-]*",
)
_LOGGER_AT = re.compile(
    r"^[\s|\-]*(?:[\w.<>-]+\.py:\d+\]?|[\w.<>-]+:[\w<>.-]+:\d+|[\w.<>-]+:\d+\]|\(\w+\))\s*[-:]?\s*"
)

TRACEBACK = "Traceback (most recent call last):"
_EVENT_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "oom",
        re.compile(
            r"out of memory|OutOfMemoryError|\bOOM\b|RESOURCE_EXHAUSTED|Killed process|"
            r"oom-kill|MemoryError",
            re.I,
        ),
    ),
    (
        "http_5xx",
        re.compile(
            r"\b5\d\d\b[ :-]*(?:Service Unavailable|Bad Gateway|Gateway Time-?out|Internal Server"
            r" Error)|HTTP/\d(?:\.\d)?\"?\s+5\d\d\b|status(?:[_ ]code)?[=: ]+5\d\d\b|"
            r"\b5\d\d Server Error",
            re.I,
        ),
    ),
    (
        "connection_refused",
        re.compile(
            r"Connection refused|ConnectionRefusedError|ECONNREFUSED|Failed to establish a new "
            r"connection|Cannot connect to host|ConnectError",
            re.I,
        ),
    ),
    (
        "timeout",
        re.compile(
            r"Watchdog caught collective operation timeout|\bTimeoutError\b|ReadTimeout|"
            r"timed out after|Connection timed out|DeadlineExceeded|GetTimeoutError",
            re.I,
        ),
    ),
    (
        "error",
        re.compile(
            r"\b(?:[A-Z]\w*(?:Error|Exception)|Error|Exception)\b(?::|\s*\(|$)|\bFAILED\b|"
            r"\bfatal error\b|Segmentation fault|core dumped",
        ),
    ),
)
MAX_TB_LINES = 60
MAX_TB_CHARS = 8000
MAX_EVENTS = 20000


_ERROR_LEVELS = ("ERROR", "CRITICAL", "FATAL", "E", "F")
_QUIET_LEVELS = ("WARNING", "WARN", "W", "INFO", "I")


def classify(message: str, level: str = "") -> str | None:
    """The event kind of a log message (``model.EVENT_KINDS``), or None for an ordinary line.

    A warning or info line that names an error is not an ``error`` event (retries are logged
    that way); it still is one of the specific kinds (5xx, refused connection, OOM, timeout).
    """
    lv = level.upper()
    for kind, pat in _EVENT_RULES:
        if pat.search(message):
            if kind == "error" and lv in _QUIET_LEVELS:
                return None
            return kind
    return "error" if lv in _ERROR_LEVELS else None


def parse_timestamp(text: str, date: _dt.date | None = None) -> tuple[float | None, str, str]:
    """``(unix seconds or None, level letter or word, text after the stamp)`` of a log line.

    ``date`` is used for stamps without one (a time of day: ``[10:00:01]``; glog's month/day
    takes its year). Naive stamps are local time.
    """
    m = _TS_ISO.match(text)
    if m:
        y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
        t = _stamp(y, mo, d, h, mi, s, m.group(7), m.group(8))
        return t, "", text[m.end() :]
    m = _TS_US.match(text)
    if m:
        mo, d, y, h, mi, s = (int(g) for g in m.groups()[:6])
        return _stamp(y, mo, d, h, mi, s, m.group(7), None), "", text[m.end() :]
    m = _TS_GLOG.match(text)
    if m:
        year = (date or _dt.date.today()).year
        mo, d, h, mi, s = (int(g) for g in m.groups()[1:6])
        return _stamp(year, mo, d, h, mi, s, m.group(7), None), m.group(1), text[m.end() :]
    m = _TS_MD.match(text)
    if m:
        year = (date or _dt.date.today()).year
        mo, d, h, mi, s = (int(g) for g in m.groups()[:5])
        return _stamp(year, mo, d, h, mi, s, m.group(6), None), "", text[m.end() :]
    m = _TS_CLOCK.match(text)
    if m:
        day = date or _dt.date.today()
        h, mi, s = (int(g) for g in m.groups()[:3])
        t = _stamp(day.year, day.month, day.day, h, mi, s, m.group(4), None)
        return t, "clock", text[m.end() :]
    return None, "", text


def _stamp(
    y: int, mo: int, d: int, h: int, mi: int, s: int, frac: str | None, tz: str | None
) -> float | None:
    try:
        dt = _dt.datetime(y, mo, d, h, mi, min(s, 59))
    except ValueError:
        return None
    if tz:
        if tz in ("Z", "UTC"):
            dt = dt.replace(tzinfo=_dt.UTC)
        else:
            sign = 1 if tz[0] == "+" else -1
            hh, mm = int(tz[1:3]), int(tz[-2:])
            dt = dt.replace(tzinfo=_dt.timezone(sign * _dt.timedelta(hours=hh, minutes=mm)))
    t = dt.timestamp()
    if frac:
        t += int(frac) / 10 ** len(frac)
    return t


def strip_prefix(text: str, date: _dt.date | None) -> tuple[float | None, str, str]:
    """``(time, level, message)`` of a cleaned line: timestamp, level, logger and decorations
    before the message removed."""
    t, level, rest = parse_timestamp(text.lstrip(), date)
    m = _LEVEL.match(rest)
    if m and (t is not None or m.group(1)):
        level = level or m.group(1)
        rest = rest[m.end() :]
        if t is None:
            t2, _lv2, rest2 = parse_timestamp(rest.lstrip(), date)
            if t2 is not None:
                t, rest = t2, rest2
    if t is not None or level:
        m = _LOGGER_AT.match(rest)
        if m and m.end() < len(rest):
            rest = rest[m.end() :]
    return t, level, rest
