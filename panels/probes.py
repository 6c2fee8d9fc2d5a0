"""Probes: every buffer's health for the round on screen, stage x buffer x layer.

NaN / Inf counts in red; FP16 headroom (log2(65504 / absmax)) in yellow below
LOW_HEADROOM_BITS and in red below zero (the buffer would overflow in float16).

The table is in pipeline order, or sorted by any column (`o` next column, `O` reverse, or
a click on the header); a filter keeps only some rows (`[` / `]` the layer; `F` asks for
words: `nonfinite`, `fp16<4`, or text found in the stage or buffer name). The selected
buffer stays selected while rounds advance and the table is re-sorted or filtered.

Within a round rows only grow (one stage adds its buffers), so in pipeline order with no
filter an update appends the new rows; anything else rebuilds the table.

With another round beside it (frame.other), its fp16 headroom and absmax are added per
buffer, marked where the headroom differs by a bit or more or only one has a NaN / Inf.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Static

from dflash_tui.engine.records import ProbeRow, RoundRecord

from .format import DASH, count, sci
from .frame import Frame
from .ranks import DIFFERS
from .table import FastTable

LOW_HEADROOM_BITS = 4.0  # absmax above 4096: a few more doublings overflow float16
ALL, NO_LAYER = "all", "—"
# Most telling first: in a narrow inspector the last columns scroll off (m zooms it).
COLUMNS = ("stage", "L", "buffer", "nan", "+inf", "-inf", "fp16", "absmax", "rms", "mean",
           "min", "max", "shape", "dtype")
PIPELINE = None  # the sort column meaning "in pipeline order"
DIFFERENT_BITS = 1.0  # headroom differences from the other round worth a mark


def _sort_value(row: ProbeRow, column: int):
    """The value a column sorts by (None last)."""
    name = COLUMNS[column]
    return {
        "stage": None, "L": row.layer, "buffer": row.name, "nan": row.nan, "+inf": row.posinf,
        "-inf": row.neginf, "fp16": row.fp16_headroom_bits, "absmax": row.absmax, "rms": row.rms,
        "mean": row.mean, "min": row.min, "max": row.max,
        "shape": math.prod(row.shape) if row.shape else 0, "dtype": row.dtype,
    }[name]


@dataclass(frozen=True)
class ProbeFilter:
    """Which rows show: every condition must hold."""
    nonfinite: bool = False
    below_bits: Optional[float] = None  # fp16 headroom below this many bits
    words: tuple[str, ...] = ()  # each found in the stage or the buffer name

    @classmethod
    def parse(cls, text: str) -> "ProbeFilter":
        """`nonfinite` (or `nan`), `fp16<N`, other words: text to find. Empty: no filter."""
        nonfinite, below, words = False, None, []
        for word in text.split():
            low = word.lower()
            match = re.fullmatch(r"fp16\s*<\s*(-?\d+(?:\.\d+)?)", low)
            if low in ("nonfinite", "nan", "inf"):
                nonfinite = True
            elif match:
                below = float(match.group(1))
            else:
                words.append(low)
        return cls(nonfinite, below, tuple(words))

    def __str__(self) -> str:
        parts = (["nonfinite"] if self.nonfinite else []) + \
            ([f"fp16<{self.below_bits:g}"] if self.below_bits is not None else []) + list(self.words)
        return " ".join(parts)

    def keeps(self, row: ProbeRow) -> bool:
        if self.nonfinite and not row.nonfinite:
            return False
        if self.below_bits is not None and not (
                row.fp16_headroom_bits is not None and row.fp16_headroom_bits < self.below_bits):
            return False
        where = f"{row.stage} {row.name}".lower()
        return all(w in where for w in self.words)


class ProbesPanel(Vertical):
    DEFAULT_CSS = """
    ProbesPanel { height: 1fr; }
    ProbesPanel > #probes-summary { height: 1; padding: 0 1; background: $boost; }
    ProbesPanel > FastTable { height: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.layer_filter: str = ALL
        self.filter = ProbeFilter()
        self.sort_column: Optional[int] = PIPELINE
        self.sort_reverse = False
        self._rows: tuple[ProbeRow, ...] = ()  # all rows of the record on screen
        self._shown: list[ProbeRow] = []  # rows in the table, in order
        self._first: Optional[ProbeRow] = None
        self._other: Optional[RoundRecord] = None
        self._other_label = ""
        self._other_index: dict = {}  # the other round's rows by (stage, layer, name)
        self._selected: Optional[tuple] = None  # (stage, layer, name) under the cursor

    def compose(self):
        yield Static(id="probes-summary")
        table = FastTable(id="probes-table", frozen=3)
        table.add_columns(*COLUMNS)
        yield table

    @property
    def table(self) -> FastTable:
        return self.query_one("#probes-table", FastTable)

    # ---- input -----------------------------------------------------------------------------

    def show(self, frame: Frame) -> None:
        if frame.record is not None:
            rows, first = frame.record.probes, frame.record.first_nonfinite
        elif frame.prefill is not None:
            rows = frame.prefill.probes
            first = next((p for p in rows if p.nonfinite), None)
        else:
            rows, first = (), None
        other = frame.other
        if rows is self._rows and first is self._first and other is self._other:
            return
        plain = self.sort_column is PIPELINE and not self._filtering and other is self._other
        grown = plain and len(rows) >= len(self._rows) > 0 and rows[:len(self._rows)] == self._rows
        self._first = first
        if other is not self._other:
            self._other, self._other_label = other, frame.other_label
            self._other_index = {_key(r): r for r in other.probes} if other is not None else {}
            extra = (f"{frame.other_label} fp16", f"{frame.other_label} absmax") if other else ()
            self.table.add_columns(*COLUMNS[:7], *extra, *COLUMNS[7:])
        if grown:
            # the same round, one stage further: append that stage's buffers
            new = [r for r in rows[len(self._rows):] if self._visible(r)]
            self._rows = rows
            self._append(new)
        else:
            self._rows = rows
            self._rebuild()
        self._summarise()

    def cycle_layer(self, step: int) -> str:
        """Move the layer filter through all, no-layer rows, layer 0, 1, ..."""
        options = self.layer_options()
        index = options.index(self.layer_filter) if self.layer_filter in options else 0
        self.layer_filter = options[(index + step) % len(options)]
        self._refresh_table()
        return self.layer_filter

    def layer_options(self) -> list[str]:
        layers = sorted({r.layer for r in self._rows if r.layer is not None})
        return [ALL, NO_LAYER, *(str(layer) for layer in layers)]

    def set_filter(self, text: str) -> ProbeFilter:
        self.filter = ProbeFilter.parse(text)
        self._refresh_table()
        return self.filter

    def sort_by(self, column: Optional[int], reverse: Optional[bool] = None) -> None:
        """Sort by a column (PIPELINE: the data flow); the same column again flips the order."""
        if reverse is None:
            reverse = not self.sort_reverse if column == self.sort_column and column is not None else False
        self.sort_column, self.sort_reverse = column, reverse
        self._refresh_table()

    def next_sort(self) -> None:
        """Pipeline order (the stage column), then each other column in turn."""
        column = 1 if self.sort_column is PIPELINE else self.sort_column + 1
        self.sort_by(PIPELINE if column >= len(COLUMNS) else column, reverse=False)

    def describe(self, lead: str = "sort") -> str:
        """The table's order and filters in words for the status line, what just changed
        (`lead`: "sort", "filter" or "layer") first: `probes sorted by absmax ↑: 92 buffers`,
        `probes filter fp16<9: 11 of 92 buffers · sorted by fp16 ↑`."""
        order = "in pipeline order" if self.sort_column is PIPELINE else \
            f"sorted by {COLUMNS[self.sort_column]} {'↓' if self.sort_reverse else '↑'}"
        shown, total = len(self._shown), len(self._rows)
        counted = f"{total} buffers" if shown == total else f"{shown} of {total} buffers"
        parts = {"sort": order, "filter": f"filter {str(self.filter) or 'none'}",
                 "layer": f"layer {self.layer_filter}"}
        rest = [text for name, text in parts.items() if name != lead and text not in
                ("in pipeline order", "filter none", f"layer {ALL}")]
        return " · ".join([f"probes {parts[lead]}: {counted}", *rest])

    def jump_to_first_nonfinite(self) -> Optional[ProbeRow]:
        """Select the first non-finite buffer (widening the filters if they hide it)."""
        first = self._first
        if first is None:
            return None
        if not self._visible(first):
            self.layer_filter, self.filter = ALL, ProbeFilter()
        self._selected = _key(first)
        self._refresh_table()
        self.table.focus()
        return first

    def on_fast_table_row_highlighted(self, event: FastTable.RowHighlighted) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self._shown):
            self._selected = _key(self._shown[event.cursor_row])

    def on_fast_table_header_selected(self, event: FastTable.HeaderSelected) -> None:
        event.stop()
        labels = self.table.labels
        if event.column < len(labels) and labels[event.column] in COLUMNS:
            index = COLUMNS.index(labels[event.column])
            self.sort_by(PIPELINE if index == 0 else index)

    # ---- table -----------------------------------------------------------------------------

    @property
    def _filtering(self) -> bool:
        return self.layer_filter != ALL or self.filter != ProbeFilter()

    def _visible(self, row: ProbeRow) -> bool:
        if self.layer_filter == NO_LAYER and row.layer is not None:
            return False
        if self.layer_filter not in (ALL, NO_LAYER) and (row.layer is None or str(row.layer) != self.layer_filter):
            return False
        return self.filter.keeps(row)

    def _refresh_table(self) -> None:
        self._rebuild()
        self._summarise()

    def _rebuild(self) -> None:
        shown = [r for r in self._rows if self._visible(r)]
        if self.sort_column is not PIPELINE:
            column = self.sort_column
            present = [r for r in shown if _sort_value(r, column) is not None]
            present.sort(key=lambda r: _sort_value(r, column), reverse=self.sort_reverse)
            shown = present + [r for r in shown if _sort_value(r, column) is None]
        self._shown = shown
        # set_rows keeps the cursor row; the selected buffer may have moved: follow it
        self.table.set_rows(self._cells(r) for r in shown)
        if self._selected is not None:
            index = next((i for i, r in enumerate(shown) if _key(r) == self._selected), None)
            if index is not None:
                self.table.move_cursor(row=index, animate=False)

    def _append(self, rows: list[ProbeRow]) -> None:
        if rows:
            self.table.add_rows(self._cells(r) for r in rows)
            self._shown.extend(rows)
            if self._selected is not None and self._selected in {_key(r) for r in rows}:
                self.table.move_cursor(row=next(i for i, r in enumerate(self._shown)
                                                if _key(r) == self._selected), animate=False)

    def _cells(self, row: ProbeRow) -> list:
        bad = row.nonfinite
        is_first = self._first is not None and row == self._first
        name = Text(row.name + (" ◀ first" if is_first else ""),
                    style="bold red" if bad else "")
        cells = [
            Text(row.stage, style="dim"),
            Text(DASH if row.layer is None else str(row.layer)),
            name,
            _count(row.nan), _count(row.posinf), _count(row.neginf),
            headroom_cell(row.fp16_headroom_bits),
        ]
        if self._other is not None:
            cells += self._other_cells(row)
        return cells + [
            *(Text(sci(v), justify="right") for v in (row.absmax, row.rms, row.mean, row.min, row.max)),
            Text("×".join(str(d) for d in row.shape), style="dim"),
            Text(row.dtype, style="dim"),
        ]

    def _other_cells(self, row: ProbeRow) -> list:
        theirs = self._other_index.get(_key(row))
        if theirs is None:
            return [Text(DASH, style="dim", justify="right")] * 2
        mine_bits, their_bits = row.fp16_headroom_bits, theirs.fp16_headroom_bits
        differs = (mine_bits is None) != (their_bits is None) or (
            mine_bits is not None and abs(mine_bits - their_bits) >= DIFFERENT_BITS)
        differs = differs or row.nonfinite != theirs.nonfinite
        headroom = headroom_cell(their_bits)
        if differs:
            headroom.stylize(DIFFERS)
        return [headroom, Text(sci(theirs.absmax), justify="right")]

    def _summarise(self) -> None:
        bad = [r for r in self._rows if r.nonfinite]
        text = Text(no_wrap=True, overflow="ellipsis")
        if bad:
            first = self._first or bad[0]
            text.append(f"{len(bad)} non-finite", style="bold red")
            text.append(", first ", style="dim")
            text.append(compact_where(first), style="bold red")
            text.append(" (f)  ", style="dim")
        elif self._rows:
            text.append("all finite  ", style="green")
        low = sum(1 for r in self._rows if r.fp16_headroom_bits is not None
                  and r.fp16_headroom_bits < LOW_HEADROOM_BITS)
        if low:
            text.append(f"{low} low fp16 headroom  ", style="yellow")
        text.append(f"{len(self._shown)}/{len(self._rows)} buffers", style="dim")
        text.append("  layer ", style="dim")
        text.append(self.layer_filter, style="bold")
        if self.filter != ProbeFilter():
            text.append("  filter ", style="dim")
            text.append(str(self.filter), style="bold")
        if self.sort_column is not PIPELINE:
            text.append("  by ", style="dim")
            text.append(COLUMNS[self.sort_column] + (" ↓" if self.sort_reverse else " ↑"), style="bold")
        self.query_one("#probes-summary", Static).update(text, layout=False)  # one line


def _key(row: ProbeRow) -> tuple:
    return (row.stage, row.layer, row.name)


def compact_where(row: ProbeRow) -> str:
    layer = "" if row.layer is None else f" L{row.layer}"
    return f"{row.stage}{layer} {row.name}"


def _count(n: int) -> Text:
    return Text(count(n), style="bold white on red" if n else "dim", justify="right")


def headroom_cell(bits: Optional[float]) -> Text:
    """FP16 headroom in bits: yellow below LOW_HEADROOM_BITS, red below 0."""
    if bits is None:
        return Text(DASH, style="dim", justify="right")
    style = "bold white on red" if bits < 0 else "bold black on yellow" if bits < LOW_HEADROOM_BITS else ""
    return Text(f"{bits:.1f}", style=style, justify="right")
