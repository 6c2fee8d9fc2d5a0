"""A one-line question at the bottom of the screen (`/` search, `g` go to round, `a` range,
`F` probes filter): a label and an input that replace the status line until enter (answer)
or escape (nothing). Like a pager's or an editor's command line, the screen above stays as
it is.
"""

from __future__ import annotations

from typing import Callable, Optional

from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input, Label


class AnswerField(Input):
    """The question's field, its enter named in the key bar (Input's own is not shown)."""

    BINDINGS = [Binding("enter", "submit", "answer")]


class AskLine(Horizontal):
    DEFAULT_CSS = """
    AskLine { height: 1; display: none; background: $boost; }
    AskLine > Label { width: auto; padding: 0 1; color: $text-primary; text-style: bold; }
    AskLine > Input { height: 1; border: none; padding: 0; width: 1fr; background: $boost; }
    AskLine > Input:focus { border: none; }
    """
    # shown: while the question is open the key bar shows its keys only (KeyBar); `?` is
    # typed into the field, so help is f1 here
    BINDINGS = [Binding("escape", "cancel", "cancel"), Binding("f1", "help", "help")]

    class Closed(Message):
        """Answered or dismissed: the app puts the focus back where it was."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._answer: Optional[Callable[[str], None]] = None

    def compose(self):
        yield Label(id="ask-label")
        yield AnswerField(id="ask-input")

    @property
    def asking(self) -> bool:
        return self.display

    def ask(self, label: str, answer: Callable[[str], None], value: str = "",
            placeholder: str = "") -> None:
        self._answer = answer
        self.query_one(Label).update(label)
        field = self.query_one(Input)
        field.value, field.placeholder = value, placeholder
        self.display = True
        # At once, not at the next turn of the message loop (what field.focus() does): the
        # question has the keyboard from the moment it is asked.
        self.screen.set_focus(field)
        field.cursor_position = len(value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        answer = self._answer
        self._close()
        if answer is not None:
            answer(event.value)

    def action_help(self) -> None:
        self.app.action_help()  # the question stays open below the help, as typed so far

    def action_cancel(self) -> None:
        self._close()

    def _close(self) -> None:
        self._answer = None
        self.display = False
        self.post_message(self.Closed())
