"""Metric records by their shape, whatever the framework that printed them.

A console log holds records (a step marker and key/value pairs) among lines that are not. The
shapes read here:

- pairs on a line: ``k: v``, ``k=v``, ``k:v - k:v`` (verl), ``k: v|k: v`` (DeepSpeed-Chat),
  ``Name words 0.25, Other 1.0`` after a step marker (mlx-lm, prime-rl), bullet lines
  ``• Avg Reward: 0.41`` under a step header (NeMo-RL), values with units (``12.3s``, ``4.1 GB``);
- a dict: Python repr (``'k': np.float64(0.25)``, ``tensor(0.5)``, ``nan``, strings) or JSON,
  on one line or across several (a ``pprint`` block);
- tables: markdown (``Step | Training Loss | reward`` then ``-- | --``, as a notebook prints
  TRL's table), HTML (``<table>`` of a notebook's output), box-drawing (rich, tabulate
  ``fancy_grid`` / ``grid``): a table with a header row gives one record per row (its ``Step``
  column the step), a table of key/value cells gives one record;
- tqdm bars: the ``N/M`` position of the main bar, and postfix pairs (``loss=0.1``) read as the
  record of that bar, one per completed bar.

A step comes from a marker (``step:34``, ``Step 3/10``, ``Iter 5:``, ``Global step 2``,
``=== METRICS STEP 2 ===``, a ``step``/``global_step``/``iteration`` key or column). Lines
with pairs that follow a marker belong to its step until the next one. A record with no step
anywhere takes the position of the main tqdm bar, else its order (1, 2, ...), and the reader
says so once. Lines that are not records become events (``model.Event``): tracebacks, errors,
out-of-memory, 5xx and refused connections; their timestamps (ISO, ``YYYY-MM-DD HH:MM:SS,mmm``,
``MM/DD/YYYY HH:MM:SS``, ``[HH:MM:SS]``, glog ``I1201 10:00:00.123``) give step times.

Values are parsed without ``eval`` (``printed.parse_number``); keys are kept as printed (spaces
collapsed, ``rewards / f`` as ``rewards/f``) for the mapping chain to name. Timestamps, level
prefixes and the kinds of event are in ``logevents.py``.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from typing import Any, NamedTuple

from ..model import Event
from ._tablelines import TableLines
from .base import flatten
from .logevents import (
    MAX_EVENTS,
    MAX_TB_CHARS,
    MAX_TB_LINES,
    TRACEBACK,
    classify,
    parse_timestamp,
    strip_prefix,
)
from .printed import (
    NUM,
    PAIR,
    SEG_WORDS,
    UNIT,
    VALUE,
    brace_balance,
    clean_key,
    number,
    parse_pairs,
)
from .tables import STEP_NAMES, step_rank

__all__ = ["MAX_EVENTS", "STEP_KEYS", "Record", "ShapeParser", "parse_timestamp"]

# The names of a step key or column: the table layer's (``tables.step_rank``).
STEP_KEYS = frozenset(STEP_NAMES)
_STEP_OF = re.compile(r"^\s*(\d+)\s*/\s*\d+\s*$")

_NUM = NUM
_VALUE = VALUE
_UNIT = UNIT
_PAIR = PAIR
# A whole segment that is one pair whose key may have spaces: ``Avg Reward: 0.41``.
_SEG_PAIR = re.compile(
    rf"^([A-Za-z_@][\w./@ ()\[\]-]*?)\s*[:=]\s*({_VALUE})(?:\s?[A-Za-z%][\w/%]*)?"
    r"\s*(?:\([^)]*\))?\.?$",
    re.I,
)
_SEG_WORDS = SEG_WORDS
# A segment of two or more ``key number`` pairs separated by single spaces (keys of one token).
_WORD_PAIR = re.compile(rf"([A-Za-z_][\w./-]*)\s+({_VALUE}){_UNIT}(?=\s|$)", re.I)
_WORD_RUN = re.compile(rf"(?:[A-Za-z_][\w./-]*\s+{_VALUE}{_UNIT}(?:\s+|$)){{2,}}", re.I)
_TAG = re.compile(r"^\[[A-Za-z][\w .-]*\]\s*")  # ``[teacher] ...``: the loop's own tag
_DIGIT = re.compile(r"\d")
_NONNUM = re.compile(r"\b(?:nan|inf|infinity)\b", re.I)
_RULE = re.compile(r"^[-=_*#~]{5,}$")  # a separator line: the step's block ends
_SPLIT = re.compile(r"\s+-\s+|\s*\|\s*|\s*[,;]\s+|\s+•\s+|\t+|(?<![:=\s])\s{3,}")
_MARKER = re.compile(
    r"(?<![\w/.])(global[ _]step|train[ _]step|steps?|iter(?:ation)?|update(?=\s*[:=#]?\s*\d)|"
    r"it(?=\s*[:=#]?\s*\d)|episode|epoch(?=\s*[:=#]?\s*\d+\s*(?:[/|,:\]]|\s\S|$))|"
    r"(?:rollout|perf)(?= \d+:\s*(?:\{|$)))"
    r"\s*[:=#]?\s*(\d+)"
    r"(?:\s*/\s*(\d+))?(?![\w.]|:\d)",
    re.I,
)
# A line that is a step's header (``===== Step 3/10 =====``, ``Training step 3``,
# ``=== METRICS STEP 2 ===``) has few words besides its marker; a warning or a printed sample
# that mentions a step (``UserWarning: ... step 3 of the generation config is ignored``) is a
# sentence, and starts no step's block.
_WORDS = re.compile(r"[A-Za-z]{2,}")
# A printed object's repr: ``GRPOConfig(output_dir='out', learning_rate=1e-06, ...)``,
# ``Namespace(lr=1e-06, batch_size=8)``; without a step in it, settings rather than a record.
_REPR = re.compile(r"^[A-Za-z_][\w.]*\([A-Za-z_]\w*=.*\)\s*$")
# Records without a printed step held before the file's way of numbering is known: enough to
# tell the kind of record that recurs from a one-off before it (a printed config).
UNSURE = 4
_HEADER_WORDS = 4
_MARKER_HINT = re.compile(r"step|iter|perf|rollout|epoch|update|episode|\bit\b", re.I)
# Counters that number something other than updates when an update counter is printed too:
# ``epoch 1 iter 20`` is update 20, ``[GRU] epoch=10 | ...`` alone is update 10.
_OUTER_MARKERS = ("epoch", "episode")
# ``Epoch:[1/3](12/9751)``, ``Epoch 2/3 [5/100]``: the batch within the epoch, of N batches.
_EPOCH_POS = re.compile(
    r"(?<![\w/.])epoch\s*[:=]?\s*\[?\s*(\d+)\s*/\s*(\d+)\s*\]?\s*[,:]?\s*[(\[]\s*(\d+)\s*/\s*(\d+)\s*[)\]]",
    re.I,
)
_MARKER_WORDS = frozenset(
    {
        "step",
        "steps",
        "iter",
        "iteration",
        "it",
        "global_step",
        "train_step",
        "perf",
        "rollout",
        "update",
        "episode",
        "epoch",
    }
)
_LEAD_MARKER = re.compile(
    _MARKER.pattern.replace("(?<![\\w/.])", r"^[^\w{]*") + r"\s*[:|,\-]?", re.I
)
_BAR = re.compile(
    r"(?:^|\s)(?P<desc>[^|\r]*?):?\s*(?P<pct>\d{1,3})%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+)"
    r"\s*\[(?P<inside>[^\]]*)\]"
)
# A line that can be inside a dict printed across lines (pprint, json.dumps(indent=...)): a
# quoted key, a closing bracket, a value or list item, or nothing.
_DICT_CONT = re.compile(
    r"""^\s*(?:$|['"]|[\]\}\)\[\{,]|[-+]?(?:\d|\.\d|nan\b|inf)|(?:np|numpy|torch)\.|tensor\(|array\(|"""
    r"""True\b|False\b|None\b|null\b|true\b|false\b)""",
    re.I,
)


class Record(NamedTuple):
    """A metric record read from a log: its step and how it was found, values, line, time."""

    step: int
    values: dict[str, float]
    line: int
    time: float | None
    how: str  # "marker", "column", "bar", "block", "order"


_number = number


def _dict_values(text: str, *, complete: bool = True) -> dict[str, float]:
    """The numeric pairs of a dict printed as JSON or as a Python repr."""
    out: dict[str, float] = {}
    body = text[text.find("{") :]
    obj = None
    if body[1:].lstrip(" \t\r\n").startswith('"'):
        try:
            obj = json.loads(body)
        except (ValueError, RecursionError):  # too deep: read as a Python repr below
            obj = None
    if isinstance(obj, dict):
        for k, v in flatten(obj):
            if isinstance(v, bool) or v is None:
                continue
            f = float(v) if isinstance(v, int | float) else _number(str(v))
            if f is None and step_rank(k) is not None:
                m = _STEP_OF.match(str(v))
                f = float(m.group(1)) if m else None
            if f is not None:
                out[clean_key(str(k))] = f
        return out
    for k, v in parse_pairs(body, complete=complete).items():
        f = v if isinstance(v, float) else _number(str(v))
        if f is None and step_rank(k) is not None:
            m = _STEP_OF.match(str(v))  # "step N of M"
            f = float(m.group(1)) if m else None
        if f is not None:
            out[clean_key(k)] = f
    return out


def line_pairs(text: str) -> tuple[dict[str, float], int]:
    """The ``key: value`` pairs of a line of text, and how many segments had the
    ``words number`` shape (only trusted after a step marker)."""
    out: dict[str, float] = {}
    loose = 0
    if ": " not in text and "|" not in text and ", " not in text and "•" not in text:
        # ``k:v - k:v`` (verl) or ``k=v k=v``: keys have no spaces, one scan does it.
        many = _PAIR.findall(text)
        if len(many) >= 2:
            for k, v in many:
                f = _number(v)
                if f is not None:
                    out[k] = f
            return out, 0
    for seg in _SPLIT.split(text):
        seg = seg.strip().lstrip("-•*·▶>+ ").rstrip()
        if not seg or not (_DIGIT.search(seg) or _NONNUM.search(seg)):
            continue
        many = _PAIR.findall(seg) if (":" in seg or "=" in seg) else []
        if len(many) > 1:
            for k, v in many:
                f = _number(v)
                if f is not None:
                    out[clean_key(k)] = f
            continue
        m = _SEG_PAIR.match(seg) if (many or ":" in seg or "=" in seg) else None
        if m:
            f = _number(m.group(2))
            if f is not None:
                out[clean_key(m.group(1))] = f
            continue
        if many:
            k, v = many[0]
            f = _number(v)
            if f is not None:
                out[clean_key(k)] = f
            continue
        m = _SEG_WORDS.match(seg)
        if m:
            f = _number(m.group(2))
            if f is not None:
                out[clean_key(m.group(1))] = f
                loose += 1
            continue
        seg = _TAG.sub("", seg, count=1)
        if _WORD_RUN.fullmatch(seg):  # ``[tag] it 4 reward 0.5 success 0.4 lr 3e-4 time 12.3s``
            for k, v in _WORD_PAIR.findall(seg):
                f = _number(v)
                if f is not None:
                    out[k] = f
                    loose += 1
    return out, loose


def add_events(run: Any, events: list[Event]) -> None:
    """Append ``events`` to ``run.events``, at most ``MAX_EVENTS`` in all (the rest counted in
    ``run.info["events_dropped"]``)."""
    if not events:
        return
    room = MAX_EVENTS - len(run.events)
    if len(events) > room:
        run.info["events_dropped"] = run.info.get("events_dropped", 0) + len(events) - max(room, 0)
        events = events[: max(room, 0)]
    run.events.extend(events)


_FIRST_KEY = re.compile(r"""\{\s*(['"])(.*?)\1\s*:""")


def _dict_family(body: str, values: dict[str, float]) -> str:
    """The kind of a printed dict: its first key as printed, a value or not (a dict whose
    first value is None this time is still the same kind of record)."""
    m = _FIRST_KEY.match(body.lstrip())
    return "{" + (m.group(2) if m else next(iter(values)))


def _beside_bar(family: str, how: str) -> bool:
    """A record placed at a bar's position (not a finished bar's own postfix record)."""
    return how == "bar" and not family.startswith("bar:")


class ShapeParser(TableLines):
    """Reads one file's lines (cleaned by ``textlog.clean_line``), in order, into records and
    events. ``feed`` each line, then ``drain`` what is ready; ``finish`` at the end of a
    complete file. Keeps what a record split across lines needs until the record is whole.

    With ``records=False`` only events and timestamps are read: a framework's own console
    reader can feed its lines through one to fill ``RunData.events`` too."""

    def __init__(self, source: str, date: _dt.date | None = None, *, records: bool = True) -> None:
        self.source = source
        self.date = date
        self.read_records = records  # False: only events and times (for any console reader)
        self.records: list[Record] = []
        self.events: list[Event] = []
        self.warnings: list[str] = []
        self.last_time: float | None = None
        self.step: int | None = None  # the step the lines being read belong to
        self.last_step: int | None = None  # the last step a record was emitted at
        self.first_time: dict[int, float] = {}
        self._clock_prev: float | None = None
        self._day_shift = 0.0
        self._dict: list[str] | None = None
        self._dict_line = 0
        self._dict_step: int | None = None
        self._dict_depth = 0
        self._html: list[str] | None = None
        self._html_line = 0
        self._table = None
        self._prev_cells: list[str] | None = None
        self._tb: list[str] | None = None
        self._tb_line = 0
        self._tb_time: float | None = None
        self._bar_total = 0
        self._bar_pos: int | None = None
        self._bar_main: tuple[str, int] | None = None  # (description, total) of the main bar
        self._bar_live = False  # the main bar is in progress
        self._bar_done: dict[str, int] = {}
        self._bar_open: dict[str, Record] = {}
        self._order_family: str | None = None
        self._order_n = 0
        self._warned_order = False
        self._unsure: list[tuple[dict[str, float], int, float | None, str, int | None, str]] = []
        self._settled = False  # the records the file gives no step are numbered as they come
        self._printed: set[int] = set()  # steps the file printed (markers, columns, headers)
        self._bar_last: dict[str, int] = {}  # record kind -> the bar position it last took
        self._bar_off = False  # a bar's position does not number this file's records
        self._bar_floor = 0  # the last position a record beside a bar took
        self._bar_records = False  # finished bars' postfixes are this file's records (ART)
        self.marked = 0  # records whose step the file printed (a marker, a step column)
        self._block = False  # the step was set by a line of its own (a block's header)
        self._marked_line = 0  # the line of the last record whose step the file printed
        self._lead_prose = 0
        self._prose = 0  # lines of text (not records) since the last record or step line
        self.stray = 0  # stepless records dropped once the file numbers its records
        self._lead: tuple[dict[str, float], int, float | None] | None = None

    # -- the line loop ---------------------------------------------------------------------

    def feed(self, text: str, lineno: int) -> None:
        """Read one line (without its newline)."""
        if self._tb is not None and self._traceback_line(text, lineno):
            return
        if self._dict is not None:
            if not _DICT_CONT.match(text):
                # Not the inside of a printed dict (a brace of code or LaTeX in a sample
                # printout): no record was open; the line is read as itself.
                self._dict = None
                self._prose += 3  # the brace's line and this one are prose
            else:
                self._dict.append(text)
                self._dict_depth += brace_balance(text)  # one line at a time: linear
                if self._dict_depth <= 0 or len(self._dict) > 2000:
                    self._end_dict(complete=len(self._dict) <= 2000)
                return
        if self._html is not None or "<table" in text.lower():
            self._html_line_in(text, lineno)
            return
        t, level, msg = strip_prefix(text, self.date)
        if t is not None:
            t = self._clock(t, level)
            self.last_time = t
        s = msg.strip()
        if not s:
            self._prev_cells = None
            return
        if s.startswith(TRACEBACK):
            self._tb, self._tb_line, self._tb_time = [text.strip()], lineno, self.last_time
            return
        if not self.read_records:
            self._event(s if not level else f"{level} {s}".strip(), level, lineno, t)
            return
        if self._table is None and _RULE.match(s):
            self.step = None  # a record held before it may still lead the next step
            self._prev_cells = None
            return
        if self._table_line(s, lineno, t):
            return
        if self._bar(s, lineno, t):
            return
        if self._record_line(s, lineno, t, level):
            return
        self._prose += 1
        self._event(s if not level else f"{level} {s}".strip(), level, lineno, t)

    def _clock(self, t: float, level: str) -> float:
        """Time-of-day stamps: roll the day forward when the clock goes back."""
        if level != "clock":
            return t
        t += self._day_shift
        if self._clock_prev is not None and t < self._clock_prev - 3600:
            self._day_shift += 86400.0
            t += 86400.0
        self._clock_prev = t
        return t

    def drain(self) -> tuple[list[Record], list[Event]]:
        """The records and events read since the last call."""
        recs, evs = self.records, self.events
        self.records, self.events = [], []
        return recs, evs

    def finish(self) -> None:
        """The file is complete: close what is still open (a dict, a bar, a traceback)."""
        if self._dict is not None:
            self.warnings.append(
                f"{self.source}:{self._dict_line}: record incomplete at end of file; read as "
                "far as it goes"
            )
            self._end_dict(complete=False)
        if self._html is not None:
            self._end_html()
        if self._tb is not None:
            self._end_traceback()
        self._lead_flush()
        for desc, rec in list(self._bar_open.items()):
            self._bar_done[desc] = self._bar_done.get(desc, 0) + 1
            step = self._bar_done[desc]
            self._hold(rec.values, rec.line, rec.time, "bar:" + desc, step, "bar")
        self._bar_open.clear()
        self.settle()

    def settle(self) -> None:
        """Number the stepless records held now: what was read is all there is (the end of
        a file, or of a sample read to recognise it)."""
        if self._unsure:
            self._settle()

    # -- steps -----------------------------------------------------------------------------

    def _emit(
        self,
        values: dict[str, float],
        lineno: int,
        t: float | None,
        *,
        step: int | None = None,
        how: str = "marker",
        family: str = "",
    ) -> None:
        named = sorted((r, k) for k in values if (r := step_rank(k)) is not None)
        for _, k in named:  # a step key of the record (the best-named first) is its step
            v = values.pop(k)
            if step is None and v == v and float(v).is_integer() and v >= 0:
                step, how = int(v), "marker"
        if not values:
            if step is not None:
                self.step = step
                self._block, self._prose = True, 0
            return
        if step is None:
            if self.step is None and self._bar_pos is None and family == "pairs":
                if self._lead is None:
                    self._lead = (values, lineno, t)  # may lead the next step's block
                    self._lead_prose = self._prose
                    return
                self._lead_flush()
            far = lineno - self._marked_line > 2 or self._prose >= 3
            if self.marked >= 2 and (self.step is None or (far and not self._block)):
                # The file prints each record with its step: pairs outside any
                # step's block, or lines away from a one-line record (prose between), are
                # text of a sample printout (``x = 3``), not a record to number in order or
                # to add to a step.
                self.stray += 1
                return
            if self.step is not None:
                step, how = self.step, "block"
            elif self._bar_pos is not None and not self._bar_off:
                fam = family or next(iter(values))
                self._hold(values, lineno, t, fam, self._bar_pos, "bar")  # the bar's position
                return
            else:
                self._hold(values, lineno, t, family or next(iter(values)))
                return
        else:
            self.step = step
            self._block = False  # a record with its own step: the lines after are not its block
            if self._lead is not None:
                lead, self._lead = self._lead, None
                if lineno - lead[1] <= 3 and self._prose - self._lead_prose < 3:
                    self._emit(lead[0], lead[1], lead[2], step=step, how="block")
                else:  # far before this step, prose between: not its record
                    self.stray += 1
        self._append(values, lineno, t, step, how)

    def _append(
        self, values: dict[str, float], lineno: int, t: float | None, step: int, how: str
    ) -> None:
        if how in ("marker", "column") or (how == "block" and self._block):
            self._printed.add(step)
            if len(self._printed) >= 2 and self._unsure:
                # The file prints its steps: the stepless records before were not records
                # (a printed config, a finished bar's postfix, a sample's ``x = 3``).
                self.stray += len(self._unsure)
                self._unsure.clear()
        elif self._unsure and how == "bar" and not self._printed:
            self._settle()  # numbered by a bar: the records held come first
        self.last_step = step
        self._prose = 0
        if how in ("marker", "column"):
            self.marked += 1
            self._marked_line = lineno
        if t is None:
            t = self.last_time
        if t is not None and step not in self.first_time:
            self.first_time[step] = t
        self.records.append(Record(step, values, lineno, t, how))

    # -- records the file gives no step ----------------------------------------------------

    def _hold(
        self,
        values: dict[str, float],
        lineno: int,
        t: float | None,
        family: str,
        step: int | None = None,
        how: str = "order",
    ) -> None:
        """A record without a printed step (numbered in order, or by a finished tqdm bar):
        held until the file shows how it numbers its records (``_settle``)."""
        if self.marked >= 2:
            self.stray += 1
            return
        if self._settled and family.startswith("bar:") and not self._bar_records:
            self.stray += 1  # a finished bar beside records of another kind: not a record
            return
        if _beside_bar(family, how) and self._settled:
            if self._bar_last.get(family) == step:
                self._bar_off = True  # two records of a kind at one position: not this bar's
                step, how = None, "order"
            else:
                self._bar_last[family] = step  # type: ignore[assignment]
        if not self._settled:
            self._unsure.append((values, lineno, t, family, step, how))
            if len(self._unsure) >= UNSURE:
                self._settle()
            return
        self._place(values, lineno, t, family, step, how)

    def _place(
        self,
        values: dict[str, float],
        lineno: int,
        t: float | None,
        family: str,
        step: int | None,
        how: str,
    ) -> None:
        if step is None:
            self._number(values, lineno, t, family)
            return
        if _beside_bar(family, how):
            self._bar_floor = max(self._bar_floor, step)
        # a finished bar's postfix (its count), or a record beside a bar in progress
        self._append(values, lineno, t, step, "bar")

    def _settle(self) -> None:
        """Number the records held: in order of the kind of record that recurs (the most
        common family of the first ones); one of another kind before the first of those is
        a one-off printed before the records start (a config dump), not a record."""
        held, self._unsure = self._unsure, []
        self._settled = True
        fams: dict[str, int] = {}
        seen: set[tuple[str, int | None]] = set()
        for _, _, _, fam, step, how in held:
            fams[fam] = fams.get(fam, 0) + 1
            if _beside_bar(fam, how):
                # Records of a kind sharing a position: the bar does not number them.
                self._bar_off |= (fam, step) in seen
                seen.add((fam, step))
        # The kind that recurs most is the file's records (ties: the first seen). A finished
        # bar's postfix is a record only where bars are (ART); beside records of another kind
        # it is a progress report (vLLM's "Processed prompts").
        main = max(fams, key=lambda f: fams[f]) if fams else None
        self._bar_records = main is not None and main.startswith("bar:")
        kinds = [f for f in fams if not f.startswith("bar:")]
        if kinds and self._order_family is None:
            self._order_family = max(kinds, key=lambda f: fams[f])
        started = False
        for values, lineno, t, fam, step, how in held:
            if fam == main:
                started = True
            elif not started or (fam.startswith("bar:") and not self._bar_records):
                self.stray += 1
                continue
            if _beside_bar(fam, how):
                if self._bar_off:
                    step, how = None, "order"
                else:
                    self._bar_last[fam] = step  # type: ignore[assignment]
            self._place(values, lineno, t, fam, step, how)
        # Records numbered in order: a bar drawn later does not renumber the ones after it.
        self._bar_off |= self._order_n > 0

    def _number(self, values: dict[str, float], lineno: int, t: float | None, fam: str) -> None:
        if fam == self._order_family or self.last_step is None:
            # in order from 1, on after a record a bar placed (steps never go back)
            self._order_n = max(self._order_n, self._bar_floor) + 1
            step = self._order_n
        else:
            step = self.last_step  # another kind of line of the same record
        if not self._warned_order:
            self._warned_order = True
            self.warnings.append(
                f"{self.source}:{lineno}: records without a step number; numbered in "
                "order of appearance from 1"
            )
        self._append(values, lineno, t, step, "order")

    def _lead_flush(self) -> None:
        """A stepless record held to see whether a step marker follows: none did."""
        if self._lead is not None:
            values, lineno, t = self._lead
            self._lead = None
            self._emit(values, lineno, t, family="pairs:lead")

    def _marker(self, s: str) -> int | None:
        head = s.split("{", 1)[0]
        if not _MARKER_HINT.search(head):
            return None
        e = _EPOCH_POS.search(head)
        if e is not None:
            # Batch i of N in epoch k (1-based): update (k - 1) * N + i, which is i in the
            # first epoch, as printed.
            k, i, n = int(e.group(1)), int(e.group(3)), int(e.group(4))
            return max(k - 1, 0) * n + i
        best: tuple[int, int] | None = None
        for m in _MARKER.finditer(head):
            word = m.group(1).lower()
            rank = 0 if word.startswith(("global", "train")) else 2 if word in _OUTER_MARKERS else 1
            if best is None or rank < best[0]:
                best = (rank, int(m.group(2)))
        return None if best is None else best[1]

    # -- shapes ----------------------------------------------------------------------------

    def _record_line(self, s: str, lineno: int, t: float | None, level: str) -> bool:
        step = self._marker(s)
        if step is None and _REPR.match(s):
            return False  # a printed object (GRPOConfig(lr=1e-06, ...)): settings, not a record
        brace = s.find("{")
        if brace >= 0 and re.search(r"\{\s*(?:['\"]|$)", s[brace:]):
            if step is not None:
                self.step = step
            body = s[brace:]
            depth = brace_balance(body)
            if depth > 0:
                self._dict, self._dict_line, self._dict_step = [body], lineno, step
                self._dict_depth = depth
                return True
            values = _dict_values(body)
            if values:
                self._emit(values, lineno, t, step=step, family=_dict_family(body, values))
                return True
            return step is not None
        if level.upper() in ("ERROR", "CRITICAL", "FATAL", "E", "F"):
            return False
        lead = _LEAD_MARKER.match(s)
        values, loose = line_pairs(s[lead.end() :] if lead else s)
        if step is not None:
            # The marker's own number is not a metric ("Step 3: ..." / "Iter 5: ...").
            values = {
                k: v
                for k, v in values.items()
                if not (
                    k.lower().rsplit(" ", 1)[-1] in _MARKER_WORDS
                    and (_MARKER.fullmatch(f"{k} {v:g}") or _MARKER.fullmatch(f"{k}:{v:g}"))
                )
            }
            if not values:
                if len(_WORDS.findall(_MARKER.sub(" ", s))) > _HEADER_WORDS:
                    return False  # a sentence that mentions a step, not a step's header
                self.step = step
                self._bar_pos = None
                self._block, self._prose = True, 0
                return True
            self._emit(values, lineno, t, step=step)
            return True
        strict = len(values) - loose
        if strict >= 2 or (strict >= 1 and self.step is not None and len(values) <= 3):
            if loose and strict < 2:
                values = {k: v for k, v in values.items() if _PAIR.search(f"{k}: {v}")}
            self._emit(values, lineno, t, family="pairs")
            return True
        return False

    def _end_dict(self, *, complete: bool) -> None:
        lines, line, step = self._dict or [], self._dict_line, self._dict_step
        self._dict = None
        values = _dict_values("\n".join(lines), complete=complete)
        if values:
            body = "\n".join(lines)
            self._emit(values, line, self.last_time, step=step, family=_dict_family(body, values))

    def _bar(self, s: str, lineno: int, t: float | None) -> bool:
        if "%|" not in s:
            return False
        m = _BAR.search(s)
        if not m:
            return False
        n, total = int(m.group("n")), int(m.group("total"))
        desc = m.group("desc").strip() or "bar"
        post = m.group("inside").split(",", 2)
        values: dict[str, float] = {}
        if len(post) > 1:
            for k, v in _PAIR.findall(",".join(post[1:])):
                f = _number(v)
                if f is not None:
                    values[clean_key(k)] = f
        if values:
            rec = Record(0, values, lineno, t, "bar")
            if n >= total:
                self._bar_open.pop(desc, None)
                self._bar_done[desc] = self._bar_done.get(desc, 0) + 1
                step = self._bar_done[desc]
                self._hold(values, lineno, t, "bar:" + desc, step, "bar")
            else:
                self._bar_open[desc] = rec
        elif self.step is None:
            self._bar_position(desc, n, total)
        return True

    def _bar_position(self, desc: str, n: int, total: int) -> None:
        """Follow the main bar, whose position numbers the records printed beside it: a bar
        in progress (the one with the most to do, where two are), never one that had ended
        before (a dataset's ``Map: 7473/7473``, a shard loader's ``2/2``): the records after
        such a bar are not its, and are numbered in order."""
        key = (desc, total)
        if key == self._bar_main:
            self._bar_pos, self._bar_live = n, n < total
        elif n < total and (not self._bar_live or total >= self._bar_total):
            self._bar_main, self._bar_total, self._bar_pos, self._bar_live = key, total, n, True
        elif not self._bar_live:
            self._bar_pos = None

    # -- events ----------------------------------------------------------------------------

    def _traceback_line(self, text: str, lineno: int) -> bool:
        tb = self._tb
        assert tb is not None
        s = text.rstrip()
        if s.startswith((" ", "\t")) or not s or s.startswith(("During handling", "The above")):
            tb.append(s)
            return True
        if s.startswith(TRACEBACK):
            tb.append(s)
            return True
        tb.append(s)  # the exception line ends the block
        self._end_traceback()
        return True

    def _end_traceback(self) -> None:
        tb = self._tb or []
        self._tb = None
        lines = [ln for ln in tb if ln.strip()]
        if len(lines) > MAX_TB_LINES:
            lines = [*lines[:10], f"... ({len(lines) - MAX_TB_LINES} lines)", *lines[-49:]]
        text = "\n".join(lines)[-MAX_TB_CHARS:]
        self._add_event("traceback", text, self._tb_line, self._tb_time)

    def _event(self, s: str, level: str, lineno: int, t: float | None) -> None:
        kind = classify(s, level)
        if kind is not None:
            self._add_event(kind, s, lineno, t)

    def _add_event(self, kind: str, text: str, lineno: int, t: float | None) -> None:
        if len(self.events) >= MAX_EVENTS:
            return
        time = t if t is not None else self.last_time
        self.events.append(
            Event(time, kind, text[:MAX_TB_CHARS], self.last_step, self.source, lineno)
        )
