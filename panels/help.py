"""Help screen (`?`): the keys of the app (built from its bindings, see DebuggerApp.
help_sections), and what the colours mean."""

from __future__ import annotations

import textwrap

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Static

from .key_scroll import KeyScroll
from .reading_screen import ReadingScreen

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


KEY, DESCRIPTION = 12, 66  # column widths of the keys list (the text narrows to fit the box)
LEGEND_PANEL, LEGEND_SAMPLE = 10, 10  # the legend's first two columns, "sample" with its gaps


class HelpScreen(ReadingScreen):
    DEFAULT_CSS = "HelpScreen > VerticalScroll { width: 84; }"
    BINDINGS = [Binding("question_mark", "dismiss", "close", show=False)]

    def __init__(self, keys: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.keys = keys
        self.text_width = KEY + DESCRIPTION  # of the text; set to the box's once it is laid out

    def on_mount(self) -> None:
        self.call_after_refresh(self._fit)

    def on_resize(self) -> None:
        self.call_after_refresh(self._fit)

    def on_screen_resume(self) -> None:  # shown again, maybe in a terminal resized since
        self.call_after_refresh(self._fit)

    def _fit(self) -> None:
        """Wrap the text to the box (narrower than 84 columns in an 80-column terminal):
        wrapped again by the box, a description's continuation fell back to column 0."""
        keys = self.query_one("#help-keys", Static)
        width = keys.content_size.width
        if width and width != self.text_width:
            self.text_width = width
            keys.update(self._keys_table())
            self.query_one("#help-legend", Static).update(self._legend())

    def compose(self):
        with KeyScroll() as scroll:
            scroll.border_title = "dflash-tui help"
            yield Static(self._keys_table(), id="help-keys")
            yield Static(self._legend(), id="help-legend")
            yield Static(Text("escape closes · ctrl+p opens the command palette", style="dim"))

    def keys_text(self) -> str:
        """The keys as they read (whatever part of them is scrolled into view)."""
        return self._keys_table().plain

    def _keys_table(self) -> Text:
        out = Text()
        for section, rows in self.keys:
            out.append(f"{section}\n", style="bold underline")
            for key, description in rows:
                lines = textwrap.wrap(description, max(20, self.text_width - KEY)) or [""]
                out.append(f"{key:<{KEY}}", style="bold cyan")
                out.append(lines[0] + "\n")
                for more in lines[1:]:
                    out.append(" " * KEY + more + "\n")
        return out

    def _legend(self) -> Text:
        out = Text("colours\n", style="bold underline")
        indent = LEGEND_PANEL + LEGEND_SAMPLE
        for panel, style, meaning in LEGEND:
            lines = textwrap.wrap(meaning, max(20, self.text_width - indent)) or [""]
            out.append(f"{panel:<{LEGEND_PANEL}}", style="dim")
            out.append(" sample " if style else "        ", style=style)
            out.append(f"  {lines[0]}\n")
            for more in lines[1:]:
                out.append(" " * indent + more + "\n")
        return out

    def action_dismiss(self) -> None:
        self.app.pop_screen()  # not dismiss(): the app keeps this screen installed for reuse
