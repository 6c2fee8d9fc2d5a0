"""Message log (`L`): the last status messages and notifications, whole, newest first (the
status line is one line and cuts a long message; a notification goes away)."""

from __future__ import annotations

import time
from typing import Iterable

from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.widgets import Static

from .key_scroll import KeyScroll
from .reading_screen import ReadingScreen
from .status import ICONS, LOG_KEY, STYLES, Entry

KIND_WIDTH = 12  # "⚑ breakpoint"


class MessagesScreen(ReadingScreen):
    DEFAULT_CSS = "MessagesScreen > VerticalScroll { width: 100; }"
    BINDINGS = [Binding(LOG_KEY, "dismiss", "close", show=False)]

    def __init__(self, entries: Iterable[Entry]) -> None:
        super().__init__()
        self.entries = list(entries)

    def compose(self):
        with KeyScroll() as scroll:
            scroll.border_title = f"messages: the last {len(self.entries)}, newest first"
            yield Static(self._table(), id="messages")
            yield Static(Text("escape closes", style="dim"))

    def _table(self):
        if not self.entries:
            return Text("no messages yet", style="dim")
        table = Table.grid(padding=(0, 1))
        table.add_column(no_wrap=True, style="dim")
        table.add_column(no_wrap=True, width=KIND_WIDTH)
        table.add_column(ratio=1, overflow="fold")
        for entry in reversed(self.entries):
            table.add_row(time.strftime("%H:%M:%S", time.localtime(entry.when)),
                          Text(ICONS.get(entry.kind, "") + entry.kind, style=STYLES.get(entry.kind, "")),
                          Text(entry.text))
        return table

    def text(self) -> str:
        """Every message, whole, newest first, one a line (what the log holds)."""
        return "\n".join(f"{entry.kind} {entry.text}" for entry in reversed(self.entries))
