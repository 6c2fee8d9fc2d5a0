"""State: the bookkeeping between target and drafter before and after the last stage.

cursor        positions whose context K/V the drafter holds
capture       target rows waiting to be written to the drafter (base position, rows)
target offset tokens in the target's cache
lag           anchor position - cursor: closed by the next context stage (DESIGN.md s4)
ring          sliding drafter layers: rows held / rows kept
"""

from __future__ import annotations

from typing import Optional

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from dflash_tui.engine.records import EngineState

from .format import DASH
from .frame import Frame

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
        key = (before, after, title, ms, rollback)
        if key == self._key:
            return
        self._key = key
        self.border_subtitle = title + (f" · {ms:.1f} ms" if ms is not None else "")
        self.update(render_state(before, after, rollback))


def render_state(before: Optional[EngineState], after: Optional[EngineState], rollback) -> Table:
    table = Table(box=None, padding=(0, 1, 0, 0), show_edge=False, expand=True)
    table.add_column("", style="dim", no_wrap=True)
    table.add_column("before", justify="right", no_wrap=True)
    table.add_column("after", justify="right", no_wrap=True)
    if after is None:
        table.add_row("waiting for prefill", "", "")
        return table
    for label, get in FIELDS:
        new = get(after)
        old = get(before) if before is not None else None
        if new is None and old is None:
            continue
        changed = before is not None and old != new
        style = "bold yellow" if changed else ""
        if label == "lag" and new:
            style = "bold cyan"  # lag is expected after commit; it closes at context
        table.add_row(label, DASH if old is None else str(old),
                      Text(DASH if new is None else str(new), style=style))
    if rollback == "pending":
        table.add_row("rollback", "", Text("at commit", style="dim"))
    elif rollback is not None:
        kind = rollback.kind
        shown = "none" if kind == "none" else f"{kind} {rollback.rows} row{'s' * (rollback.rows != 1)}"
        table.add_row("rollback", "", Text(shown, style="" if kind == "none" else "bold"))
    return table

