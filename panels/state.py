"""State: the bookkeeping between target and drafter before and after the last stage.

cursor        positions whose context K/V the drafter holds
capture       target rows waiting to be written to the drafter (base position, rows)
target offset tokens in the target's cache
lag           anchor position - cursor: closed by the next context stage (docs/ARCHITECTURE.md)
ring          sliding drafter layers: rows held / rows kept

On a short terminal (under SHORT rows, e.g. 80 x 24) the rows that follow from others
(anchor pos = committed - 1) and the column header are left out, so the history below
still fits.
"""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.widgets import Static

from dflash_tui.engine.records import EngineState

from .format import DASH, grid
from .frame import Frame

SHORT = 30  # terminal rows below which the panel is compact
DERIVED = {"anchor pos"}  # left out when compact

FIELDS = (
    ("cursor", lambda s: s.cursor),
    ("capture base", lambda s: s.capture_base),
    ("capture rows", lambda s: s.capture_rows),
    ("target offset", lambda s: s.target_offset),
    ("committed", lambda s: s.committed),
    ("anchor pos", lambda s: s.anchor_position),
    ("lag", lambda s: s.lag),
    ("ring", lambda s: None if s.ring_window is None else f"{s.ring_occupancy}/{s.ring_window}"),
)


class StatePanel(Static):
    DEFAULT_CSS = """
    StatePanel {
        border: round $primary 50%;
        border-title-color: $text-primary;
        height: auto;
        padding: 0 1;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.border_title = "state"
        self._key: Optional[tuple] = None
        self._rows = -1

    def show(self, frame: Frame) -> None:
        record = frame.record
        if record is not None and record.stages:
            last = record.stages[-1]
            before, after, title = last.before, last.after, f"after {last.stage}"
            ms = last.ms if frame.show_timings else None
            rollback = record.rollback if record.complete else "pending"
        elif frame.prefill is not None:
            before, after, title, ms = None, frame.prefill.state, "after prefill", None
            if frame.show_timings:
                ms = frame.prefill.ms
            rollback = None
        else:
            before = after = None
            title, ms, rollback = "", None, None
        compact = self.screen.size.height < SHORT
        key = (before, after, title, ms, rollback, compact, frame.failed)
        if key == self._key:
            return
        self._key = key
        self.border_title = "state: before → after" if compact else "state"
        self.border_subtitle = title + (f" · {ms:.1f} ms" if ms is not None else "")
        text = render_state(before, after, rollback, compact, frame.failed)
        rows = text.plain.count("\n")
        # a layout pass repaints every panel: only when the number of rows changes
        self.update(text, layout=rows != self._rows)
        self._rows = rows


WIDTHS = [13, 8, 8]  # fits the left column at its narrowest (36 columns, 80-column terminal)


def render_state(before: Optional[EngineState], after: Optional[EngineState], rollback,
                 compact: bool = False, failed: bool = False) -> Text:
    rows = []
    if after is None:
        return Text("no session" if failed else "waiting for prefill", style="dim")
    for label, get in FIELDS:
        if compact and label in DERIVED:
            continue
        new = get(after)
        old = get(before) if before is not None else None
        if new is None and old is None:
            continue
        changed = before is not None and old != new
        style = "bold yellow" if changed else ""
        if label == "lag" and new:
            style = "bold cyan"  # lag is expected after commit; it closes at context
        rows.append([Text(label, style="dim"), DASH if old is None else str(old),
                     Text(DASH if new is None else str(new), style=style)])
    table = grid(rows, WIDTHS, "lrr", header=None if compact else ["", "before", "after"])
    if rollback is None:
        return table
    # the rollback spans both value columns: "replay 12 rows" does not fit in one
    label = Text("rollback".ljust(WIDTHS[0] + 1), style="dim")
    if rollback == "pending":
        line = Text.assemble(label, ("at commit", "dim"))
    else:
        kind = rollback.kind
        shown = "none" if kind == "none" else f"{kind} {rollback.rows} row{'s' * (rollback.rows != 1)}"
        line = Text.assemble(label, (shown, "" if kind == "none" else "bold"))
    return Text("\n").join([table, line])

