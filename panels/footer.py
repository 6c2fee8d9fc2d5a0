"""The key bar at the bottom: the keys of the current screen, in one line of text.

Textual's Footer is a widget per key and rebuilds itself (mounting and styling each one)
whenever the active bindings change, which happens on every focus move; on a small CPU that
rebuild was the slowest part of answering a key. This bar is one widget that redraws its
line only when the keys it shows change. A click on a key presses it.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.widgets import Static

PALETTE = ("ctrl+p", "^p", "palette")


class KeyBar(Static):
    DEFAULT_CSS = """
    KeyBar { height: 1; background: $panel; color: $foreground; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self._shown: tuple = ()
        self._spans: list[tuple[int, int, str]] = []  # (start, end, key) of each hint

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._bindings_changed(self.screen)  # in the first frame already

    def _bindings_changed(self, screen) -> None:
        if not self.is_attached or screen is not self.screen:
            return
        hints, actions = [], set()
        for _, binding, enabled, _ in screen.active_bindings.values():
            if binding.show and binding.action not in actions:
                actions.add(binding.action)  # one hint per action (first key wins)
                hints.append((binding.key, self.app.get_key_display(binding), binding.description,
                              enabled))
        shown = tuple(hints)
        if shown != self._shown:
            self._shown = shown
            self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        text, spans = Text(no_wrap=True, overflow="crop"), []
        for key, display, description, enabled in self._shown:
            start = text.cell_len
            text.append(f" {display}", style="bold" + ("" if enabled else " dim"))
            text.append(f" {description} ", style="" if enabled else "dim")
            spans.append((start, text.cell_len, key))
        palette = Text.assemble((f" {PALETTE[1]}", "bold"), f" {PALETTE[2]} ")
        width = self.content_size.width
        if width and text.cell_len + palette.cell_len < width:
            spans.append((width - palette.cell_len, width, PALETTE[0]))
            text.append(" " * (width - text.cell_len - palette.cell_len))
            text.append_text(palette)
        self._spans = spans
        self.update(text, layout=False)

    def on_click(self, event: events.Click) -> None:
        for start, end, key in self._spans:
            if start <= event.x < end:
                self.app.simulate_key(key)
                return
