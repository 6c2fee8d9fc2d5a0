"""A scrolling box whose keys scroll at once, for the modal screens (help, message log).

Textual defers a key's scroll until after the next refresh and counts it from where the
box is headed, which the deferred scrolls have not moved yet: a burst of ↓ (a held key,
keys typed ahead, several in one read of the terminal) scrolled one line.
"""

from __future__ import annotations

from textual.actions import SkipAction
from textual.containers import VerticalScroll


class KeyScroll(VerticalScroll):
    def _scroll_by(self, lines: int) -> None:
        if not self.allow_vertical_scroll:
            raise SkipAction()
        self.scroll_to(y=self.scroll_y + lines, animate=False, immediate=True)

    def action_scroll_down(self) -> None:
        self._scroll_by(1)

    def action_scroll_up(self) -> None:
        self._scroll_by(-1)

    def action_page_down(self) -> None:
        self._scroll_by(self.scrollable_content_region.height)

    def action_page_up(self) -> None:
        self._scroll_by(-self.scrollable_content_region.height)
