"""The tables a console log prints, read line by line: markdown (``Step | Training Loss |
reward`` then ``-- | --``, as a notebook prints TRL's table), box-drawing (rich, tabulate's
``grid``, ``psql``, ``fancy_grid``) and HTML (``<table>`` of a notebook's output).

A table with a header row gives one record per row, its step column the table layer's
(``tables.step_rank``: the best-named column, else a first column named like a row index);
a table of key/value cells gives one record. ``TableLines`` is the part of ``ShapeParser`` that
does this (``shapes``): it hands each record to the parser's ``_emit``.
"""

from __future__ import annotations

import html
import re

from .printed import PAIR, SEG_WORDS, clean_key, number
from .tables import is_index_name, step_rank

__all__ = ["TableLines"]

_BORDER = re.compile(r"^\s*[-=+:|│┃║┆╎─━═┌┐└┘├┤┬┴┼┏┓┗┛┣┫┳┻╋┡┩╇╞╡╪╒╕╘╛╤╧╔╗╚╝╠╣╦╩╬\s]+$")
_CELL_SEP = re.compile(r"\s*[|│┃║]\s*")
_HTML_ROW = re.compile(r"<tr[^>]*>(.*?)</tr>", re.S | re.I)
_HTML_CELL = re.compile(r"<t[hd][^>]*>(.*?)</t[hd]>", re.S | re.I)
_TAGS = re.compile(r"<[^>]+>")


class _Table:
    __slots__ = ("header", "kind", "rows", "step_col")

    def __init__(self, kind: str) -> None:
        self.kind = kind  # "md", "box"
        self.header: list[str] | None = None
        self.rows = 0  # content rows seen
        self.step_col: int | None = None


class TableLines:
    """Markdown, box-drawing and HTML tables among a log's lines (a mixin of ``ShapeParser``,
    which provides ``_emit``, ``_marker`` and ``last_time``)."""

    _table: _Table | None
    _prev_cells: list[str] | None
    _html: list[str] | None
    _html_line: int
    last_time: float | None

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
        raise NotImplementedError

    def _marker(self, s: str) -> int | None:
        raise NotImplementedError

    def _cells(self, s: str) -> list[str] | None:
        if not any(c in s for c in "|│┃║"):
            return None
        cells = _CELL_SEP.split(s.strip())
        fenced = len(cells) >= 3 and cells[0] == "" and cells[-1] == ""  # "| x |": one cell
        if cells and cells[0] == "":
            cells = cells[1:]
        if cells and cells[-1] == "":
            cells = cells[:-1]
        return cells if len(cells) >= 2 or (fenced and cells) else None

    def _table_line(self, s: str, lineno: int, t: float | None) -> bool:
        tab = self._table
        if _BORDER.match(s) and len(s.strip()) >= 3:
            header_sep = any(c in s for c in "=═━") or bool(re.search(r"-{2,}", s) and "|" in s)
            if tab is None:
                if self._prev_cells is not None and header_sep and "|" in s:
                    tab = self._table = _Table("md")  # markdown: the line before is the header
                    self._set_header(tab, self._prev_cells)
                    tab.rows = 1
                elif any(c in s for c in "┏┌╒╔+"):
                    self._table = _Table("box")
                else:
                    return False
            elif header_sep and tab.rows == 1 and tab.header is None and self._prev_cells:
                self._set_header(tab, self._prev_cells)
            self._prev_cells = None
            return True
        cells = self._cells(s)
        if cells is None:
            self._table = None
            self._prev_cells = None
            return False
        if any(PAIR.search(c) or SEG_WORDS.match(c) for c in cells) or (
            tab is None and self._marker(s) is not None
        ):
            self._table = None  # "k: v | k: v": pairs, not a table
            self._prev_cells = None
            return False
        if tab is None and not s.lstrip().startswith(("│", "┃", "║")):
            # A markdown row is known only from the separator line after the header.
            self._prev_cells = cells
            nums = [number(c) for c in cells]
            if self._step_cell(cells) is None and sum(v is not None for v in nums) == 0:
                return bool(len(cells) >= 3)  # a header-looking line: held, not an event
            return False
        if tab is None:
            tab = self._table = _Table("box")
        tab.rows += 1
        self._prev_cells = cells
        self._table_row(tab, cells, lineno, t)
        return True

    def _step_cell(self, cells: list[str]) -> int | None:
        """The step column of a header (``tables.step_rank``: the best-named), else a first
        column named like a row index (``#``, ``idx``, pandas' unnamed one) whose integers
        are then the steps."""
        named = sorted((r, i) for i, c in enumerate(cells) if (r := step_rank(c)) is not None)
        if named:
            return named[0][1]
        return 0 if cells and is_index_name(clean_key(cells[0])) else None

    def _set_header(self, tab: _Table, cells: list[str]) -> None:
        tab.header = [clean_key(c) for c in cells]
        tab.step_col = self._step_cell(cells)

    def _table_row(self, tab: _Table, cells: list[str], lineno: int, t: float | None) -> None:
        nums = [number(c) for c in cells]
        if tab.header is None:
            keys, vals, raw = cells[0::2], nums[1::2], cells[1::2]
            alternating = (
                len(cells) % 2 == 0
                and all((k and number(k) is None) or not (k or r) for k, r in zip(keys, raw))
                and any(v is not None for v in vals)
            )
            if alternating:
                values = {clean_key(k): v for k, v in zip(keys, vals) if k and v is not None}
                self._emit(values, lineno, t)
            return
        if len(cells) != len(tab.header):
            return
        values = {}
        step = None
        for i, (name, v) in enumerate(zip(tab.header, nums)):
            if i == tab.step_col:
                if v is not None and v == v and v >= 0 and float(v).is_integer():
                    step = int(v)
                continue
            if v is not None and name:
                values[name] = v
        if values:
            if step is not None:
                self._emit(values, lineno, t, step=step, how="column")
            else:
                self._emit(values, lineno, t, family="table:" + tab.header[0])

    def _html_line_in(self, text: str, lineno: int) -> None:
        if self._html is None:
            self._html, self._html_line = [], lineno
        self._html.append(text)
        if "</table>" in text.lower() or len(self._html) > 100000:
            self._end_html()

    def _end_html(self) -> None:
        lines, line = self._html or [], self._html_line
        self._html = None
        body = "\n".join(lines)
        tab = _Table("html")
        for row in _HTML_ROW.findall(body):
            cells = [html.unescape(_TAGS.sub("", c)).strip() for c in _HTML_CELL.findall(row)]
            if not cells:
                continue
            if tab.header is None and "<th" in row.lower():
                self._set_header(tab, cells)
                continue
            self._table_row(tab, cells, line, self.last_time)
