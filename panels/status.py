"""Status line: what the engine is doing (loading, running, paused, stopped by a breakpoint,
finished, failed) on the left; where exports and the trace go and what is armed, right."""

from __future__ import annotations

from rich.table import Table
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


class StatusLine(Static):
    DEFAULT_CSS = """
    StatusLine { height: 1; padding: 0 1; background: $boost; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.kind, self.message, self.right = "idle", "", ""

    def set_status(self, kind: str, message: str) -> None:
        if (kind, message) != (self.kind, self.message):
            self.kind, self.message = kind, message
            self._render_line()

    def set_right(self, text: str) -> None:
        if text != self.right:
            self.right = text
            self._render_line()

    def _render_line(self) -> None:
        grid = Table.grid(expand=True)
        grid.add_column(ratio=3, no_wrap=True, overflow="ellipsis")
        grid.add_column(ratio=2, justify="right", no_wrap=True, overflow="ellipsis")
        left = Text(ICONS.get(self.kind, "") + self.message, style=STYLES.get(self.kind, ""))
        grid.add_row(left, Text(self.right, style="dim"))
        self.update(grid)
