"""Help screen (`?`): the keys of the screen it was opened from, and what the colours mean."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

LEGEND = (
    ("tokens", "black on green", "accepted proposal"),
    ("tokens", "red strike", "rejected proposal"),
    ("tokens", "bold black on cyan", "bonus (the target's own token)"),
    ("tokens", "black on yellow", "proposed, not verified yet"),
    ("probes", "bold white on red", "NaN / Inf count, or fp16 headroom below 0 bits"),
    ("probes", "bold black on yellow", "fp16 headroom below 4 bits"),
    ("ranks", "bold green", "rank 0: the drafter's argmax is the target's token"),
    ("selector", "bold magenta", "the walk left the argmax path"),
    ("lattice", "", "▶ walk's predecessor  ● pick  ★ argmax  ◎ target token"),
)


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 84; max-width: 95%; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    """
    BINDINGS = [
        Binding("escape", "dismiss", "close"),
        Binding("question_mark", "dismiss", "close", show=False),
        Binding("q", "dismiss", "close", show=False),
    ]

    def __init__(self, keys: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self):
        with VerticalScroll() as scroll:
            scroll.border_title = "dflash-tui help"
            yield Static(self._keys_table(), id="help-keys")
            yield Static(self._legend(), id="help-legend")
            yield Static(Text("escape closes · ctrl+p opens the command palette", style="dim"))

    def _keys_table(self) -> Table:
        table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), expand=True)
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for section, rows in self.keys:
            table.add_row(Text(section, style="bold underline"), "")
            for key, description in rows:
                table.add_row(key, description)
        return table

    def _legend(self) -> Table:
        table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), title="colours",
                      title_justify="left", title_style="bold underline")
        table.add_column(style="dim", no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column()
        for panel, style, meaning in LEGEND:
            table.add_row(panel, Text(" sample " if style else "", style=style), meaning)
        return table

    def action_dismiss(self) -> None:
        self.dismiss(None)
