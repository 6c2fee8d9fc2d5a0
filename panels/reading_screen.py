"""What the screens that are read, not answered (help, message log), share: a box in the
middle of an opaque screen, its text in a KeyScroll, closed by escape, q or the key that
opened it. A subclass sets the box's width and binds its own key."""

from __future__ import annotations

from textual.binding import Binding
from textual.screen import ModalScreen


class ReadingScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    /* opaque: a see-through modal blends every cell of the screen below (slow) */
    ReadingScreen { align: center middle; background: $background; }
    ReadingScreen > VerticalScroll {
        max-width: 95%; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    """
    BINDINGS = [
        Binding("escape", "dismiss", "close"),
        Binding("q", "dismiss", "close", show=False),
    ]

    def action_dismiss(self) -> None:
        self.dismiss(None)
