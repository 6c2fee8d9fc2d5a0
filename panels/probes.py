"""Probes: every buffer's health for the round on screen, stage x buffer x layer.

NaN / Inf counts in red; FP16 headroom (log2(65504 / absmax)) in yellow below
LOW_HEADROOM_BITS and in red below zero (the buffer would overflow in float16). `[` / `]`
pick the layer shown; `f` jumps to the first non-finite buffer in pipeline order.

Rows only grow within a round (one stage adds its buffers), so an update appends the new
rows instead of rebuilding the table; a new round or a new layer filter rebuilds it.
"""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Static

from dflash_tui.engine.records import ProbeRow

from .format import DASH, count, num
from .frame import Frame
from .table import FastTable

LOW_HEADROOM_BITS = 4.0  # absmax above 4096: a few more doublings overflow float16
ALL, NO_LAYER = "all", "—"
# Most telling first: in a narrow inspector the last columns scroll off (m zooms it).
COLUMNS = ("stage", "L", "buffer", "nan", "+inf", "-inf", "fp16", "absmax", "rms", "mean",
           "min", "max", "shape", "dtype")


class ProbesPanel(Vertical):
    DEFAULT_CSS = """
    ProbesPanel { height: 1fr; }
    ProbesPanel > #probes-summary { height: 1; padding: 0 1; background: $boost; }
    ProbesPanel > FastTable { height: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.layer_filter: str = ALL
        self._rows: tuple[ProbeRow, ...] = ()  # all rows of the record on screen
        self._shown: list[ProbeRow] = []  # rows in the table, in order
        self._first: Optional[ProbeRow] = None

    def compose(self):
        yield Static(id="probes-summary")
        table = FastTable(id="probes-table")
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
        if rows is self._rows and first is self._first:
            return
        grown = len(rows) >= len(self._rows) > 0 and rows[:len(self._rows)] == self._rows
        self._first = first
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
        self._rebuild()
        self._summarise()
        return self.layer_filter

    def layer_options(self) -> list[str]:
        layers = sorted({r.layer for r in self._rows if r.layer is not None})
        return [ALL, NO_LAYER, *(str(layer) for layer in layers)]

    def jump_to_first_nonfinite(self) -> Optional[ProbeRow]:
        """Select the first non-finite buffer (widening the layer filter if it hides it)."""
        first = self._first
        if first is None:
            return None
        if not self._visible(first):
            self.layer_filter = ALL
            self._rebuild()
            self._summarise()
        index = next(i for i, r in enumerate(self._shown) if r is first or r == first)
        self.table.move_cursor(row=index, animate=False)
        self.table.focus()
        return first

    # ---- table -----------------------------------------------------------------------------

    def _visible(self, row: ProbeRow) -> bool:
        if self.layer_filter == ALL:
            return True
        if self.layer_filter == NO_LAYER:
            return row.layer is None
        return row.layer is not None and str(row.layer) == self.layer_filter

    def _rebuild(self) -> None:
        # set_rows keeps the cursor and the scroll position: stepping rounds does not jump
        self._shown = [r for r in self._rows if self._visible(r)]
        self.table.set_rows(self._cells(r) for r in self._shown)

    def _append(self, rows: list[ProbeRow]) -> None:
        if rows:
            self.table.add_rows(self._cells(r) for r in rows)
            self._shown.extend(rows)

    def _cells(self, row: ProbeRow) -> list:
        bad = row.nonfinite
        is_first = self._first is not None and row == self._first
        name = Text(row.name + (" ◀ first" if is_first else ""),
                    style="bold red" if bad else "")
        return [
            Text(row.stage, style="dim"),
            Text(DASH if row.layer is None else str(row.layer)),
            name,
            _count(row.nan), _count(row.posinf), _count(row.neginf),
            _headroom(row.fp16_headroom_bits),
            *(Text(num(v), justify="right") for v in (row.absmax, row.rms, row.mean, row.min, row.max)),
            Text("×".join(str(d) for d in row.shape), style="dim"),
            Text(row.dtype, style="dim"),
        ]

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
        text.append("layer ", style="dim")
        text.append(self.layer_filter, style="bold")
        text.append(" ([ ])  ", style="dim")
        text.append(f"{len(self._shown)}/{len(self._rows)} buffers", style="dim")
        self.query_one("#probes-summary", Static).update(text, layout=False)  # one line


def compact_where(row: ProbeRow) -> str:
    layer = "" if row.layer is None else f" L{row.layer}"
    return f"{row.stage}{layer} {row.name}"

def _count(n: int) -> Text:
    return Text(count(n), style="bold white on red" if n else "dim", justify="right")


def _headroom(bits: Optional[float]) -> Text:
    if bits is None:
        return Text(DASH, style="dim", justify="right")
    style = "bold white on red" if bits < 0 else "bold black on yellow" if bits < LOW_HEADROOM_BITS else ""
    return Text(f"{bits:.1f}", style=style, justify="right")
