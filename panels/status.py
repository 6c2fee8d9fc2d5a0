"""Status line: what the engine is doing (loading, running, paused, stopped by a breakpoint,
finished, failed) on the left; where exports and the trace go and what is armed, right."""

from __future__ import annotations

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

    def on_resize(self) -> None:
        self._render_line()

    def _render_line(self) -> None:
        width = self.content_size.width or 100
        right = Text(self.right, style="dim")
        right.truncate(max(width * 2 // 5, 0), overflow="ellipsis")
        left = Text(ICONS.get(self.kind, "") + self.message, style=STYLES.get(self.kind, ""))
        room = max(width - right.cell_len - 2, 1)
        left.truncate(room, overflow="ellipsis")
        line = Text.assemble(left, " " * (width - left.cell_len - right.cell_len), right)
        line.no_wrap = True
        self.update(line, layout=False)  # one line, always: no layout pass
