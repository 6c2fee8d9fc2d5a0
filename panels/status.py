"""Status line: what the engine is doing (loading, running, paused, stopped by a breakpoint,
finished, failed) on the left; on the right, what is armed and where files go.

The message wins: it gets the whole width it needs, and the right side takes what is left.
The right side is a list of parts, most important first, each with a full and a short form;
it is never cut mid-part: each part shows in the longest form that fits beside the message,
and a part that fits in no form is left out (the armed breakpoints are in the `b` menu and
the palette, where files go in the palette). A message longer than the line is cut with
`… [L]`: `L` opens the message log (StatusLog below, panels/messages.py), which keeps the
last LOG_SIZE messages whole.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple, Optional, Sequence

from rich.text import Text
from textual.widgets import Static

STYLES = {
    "idle": "",
    "busy": "bold cyan",
    "running": "bold green",
    "paused": "bold",
    "breakpoint": "bold black on yellow",
    "finished": "bold green",
    "error": "bold white on red",
    "warning": "bold yellow",  # a notification's (the log only)
    "info": "",
}
ICONS = {"busy": "… ", "running": "▶ ", "paused": "⏸ ", "breakpoint": "⚑ ", "finished": "⏹ ",
         "error": "✗ "}
GAP = "  "
LOG_KEY = "L"  # opens the message log (the binding is DebuggerApp's)
CUT = f"… [{LOG_KEY}]"  # ends a message cut to the line: the log has it whole
LOG_SIZE = 100
# progress and position (the header has it): the next message takes its place in the log
TRANSIENT = frozenset({"busy", "running", "paused"})


class Short(NamedTuple):
    """A message of several reasons (a breakpoint stop where two fired at once) in the form
    the line shows where the whole does not fit: the lead and the first reason, then how
    many more the log has, ` (+1 more: L)`. Cut as a long message is, the second reason
    went off the line unsaid at 80 columns."""
    first: str  # "round 0 commit: reference non-finite from draft L0 ffn_out"
    more: int  # the reasons after it (the log has them whole)

    @property
    def tail(self) -> str:
        return f" (+{self.more} more: {LOG_KEY})"


@dataclass(frozen=True)
class Entry:
    when: float  # time.time()
    kind: str  # a status kind, or a notification's "warning" / "error" / "info"
    text: str
    transient: bool = False  # a position (a search's hit): the next message takes its place


class StatusLog:
    """The last LOG_SIZE status messages (and notifications), whole. Progress and position
    messages (busy, running, paused) stand in the log only until the next message: the
    outcome replaces them ("exporting…" → "exported …", "running · round 4 draft" → the
    breakpoint), so a run, stepping or a ticking timer never floods it; so do messages
    added as transient (a search's hits: a walk with n pushes out no outcome)."""

    def __init__(self, size: int = LOG_SIZE) -> None:
        self.entries: deque[Entry] = deque(maxlen=size)

    def add(self, kind: str, text: str, when: Optional[float] = None,
            transient: bool = False) -> None:
        if not text:
            return
        last = self.entries[-1] if self.entries else None
        if last is not None and (last.kind, last.text) == (kind, text):
            return
        entry = Entry(time.time() if when is None else when, kind, text, transient)
        if last is not None and (last.kind in TRANSIENT or last.transient):
            self.entries[-1] = entry
        else:
            self.entries.append(entry)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self):
        return iter(self.entries)


class StatusLine(Static):
    DEFAULT_CSS = """
    StatusLine { height: 1; padding: 0 1; background: $boost; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.kind, self.message = "idle", ""
        self.short: Optional[Short] = None
        self.parts: tuple[tuple[str, str], ...] = ()
        self.cut = False  # the message did not fit: it ends in CUT

    @property
    def right(self) -> str:
        """The right side as it reads on a wide screen."""
        return GAP.join(full for full, _ in self.parts)

    def set_status(self, kind: str, message: str, short: Optional[Short] = None) -> None:
        if (kind, message, short) != (self.kind, self.message, self.short):
            self.kind, self.message, self.short = kind, message, short
            self._render_line()

    def set_right(self, parts: Sequence[tuple[str, str]]) -> None:
        """(full, short) forms of each part, most important first."""
        parts = tuple(parts)
        if parts != self.parts:
            self.parts = parts
            self._render_line()

    def on_resize(self) -> None:
        self._render_line()

    def _render_line(self) -> None:
        width = self.content_size.width or 100
        line, self.cut = status_text(self.kind, self.message, self.parts, width, self.short)
        self.update(line, layout=False)  # one line, always: no layout pass


def status_text(kind: str, message: str, parts: Sequence[tuple[str, str]],
                width: int, short: Optional[Short] = None) -> tuple[Text, bool]:
    """The line, and whether the message was cut: the message whole where it fits (the
    right side gets what is left), else its short form (several reasons: the first and the
    count of the others), else cut, ending in CUT, and no right side."""
    style = STYLES.get(kind, "")
    left = Text(ICONS.get(kind, "") + message, style=style)
    cut = left.cell_len > width  # (in its short form too: the log has it whole)
    if cut and short is not None:
        left = Text(ICONS.get(kind, "") + short.first, style=style)
        tail = Text(short.tail, style="dim")
        if left.cell_len + tail.cell_len > width:  # the first reason cut, its count kept
            left.truncate(max(width - tail.cell_len - 1, 1))
            left.append("…", style=style)
        left.append_text(tail)
    right = Text(fit_parts(parts, width - left.cell_len - len(GAP)), style="dim")
    if cut and short is None:
        left.truncate(max(width - len(CUT), 1))
        left.append(CUT[0], style=style)
        left.append(CUT[1:], style="dim")
    line = Text.assemble(left, " " * max(width - left.cell_len - right.cell_len, 0), right)
    line.no_wrap = True
    return line, cut


def fit_parts(parts: Sequence[tuple[str, str]], room: int) -> str:
    """The parts joined, each in the longest form that still lets the rest fit."""
    chosen: list[str] = []
    for i, (full, short) in enumerate(parts):
        # the parts after this one, in their short forms, should still fit
        later = sum(len(s) + len(GAP) for _, s in parts[i + 1:])
        used = sum(len(c) + len(GAP) for c in chosen)
        for form in (full, short):
            if used + len(form) + later <= room or used + len(form) <= room and form is short:
                chosen.append(form)
                break
    return GAP.join(chosen)
