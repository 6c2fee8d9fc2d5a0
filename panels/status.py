"""Status line: what the engine is doing (loading, running, paused, stopped by a breakpoint,
finished, failed) on the left; on the right, what is armed and where files go.

The right side is a list of parts, most important first, each with a full and a short form.
It is never cut mid-part: each part shows in the longest form that fits beside at least
LEFT_MIN characters of the message, and a part that fits in no form is left out (the
palette and the help say the same).
"""

from __future__ import annotations

from typing import Sequence

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
    "info": "",
}
ICONS = {"busy": "… ", "running": "▶ ", "paused": "⏸ ", "breakpoint": "⚑ ", "finished": "⏹ ",
         "error": "✗ "}
LEFT_MIN = 28  # characters of the message kept however much the right side holds
GAP = "  "


class StatusLine(Static):
    DEFAULT_CSS = """
    StatusLine { height: 1; padding: 0 1; background: $boost; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.kind, self.message = "idle", ""
        self.parts: tuple[tuple[str, str], ...] = ()

    @property
    def right(self) -> str:
        """The right side as it reads on a wide screen."""
        return GAP.join(full for full, _ in self.parts)

    def set_status(self, kind: str, message: str) -> None:
        if (kind, message) != (self.kind, self.message):
            self.kind, self.message = kind, message
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
        left = Text(ICONS.get(self.kind, "") + self.message, style=STYLES.get(self.kind, ""))
        right = Text(fit_parts(self.parts, width - min(left.cell_len, LEFT_MIN) - len(GAP)), style="dim")
        room = max(width - right.cell_len - len(GAP), 1)
        left.truncate(room, overflow="ellipsis")
        line = Text.assemble(left, " " * max(width - left.cell_len - right.cell_len, 0), right)
        line.no_wrap = True
        self.update(line, layout=False)  # one line, always: no layout pass


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
