"""The prompt dialog (`p`): type a new prompt, or start from one of sample_prompts/.

Dismisses with the prompt text (the session restarts on it) or None (escape).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from rich.text import Text
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, OptionList, TextArea
from textual.widgets.option_list import Option

from ...engine.errors import InputError
from ...prompt_file import read_prompt_file

PREVIEW = 60  # characters of a sample prompt shown in the list


class PromptText(TextArea):
    """The prompt editor: ctrl+a selects everything, as in most editors (TextArea's own
    ctrl+a goes to the start of the line; home still does)."""

    BINDINGS = [Binding("ctrl+a", "select_all", "select all", show=False)]


def sample_prompts(root: Path) -> list[tuple[str, Path]]:
    """(workload/name, path) of every sample_prompts/<workload>/*.txt, sorted."""
    if not root.is_dir():
        return []
    return [(f"{p.parent.name}/{p.stem}", p) for p in sorted(root.glob("*/*.txt"))]


class PromptScreen(ModalScreen[Optional[str]]):
    DEFAULT_CSS = """
    /* opaque: a see-through modal blends every cell of the screen below (slow) */
    PromptScreen { align: center middle; background: $background; }
    PromptScreen > Vertical {
        width: 90%; max-width: 110; height: 80%; border: thick $primary;
        background: $surface; padding: 0 1;
    }
    PromptScreen TextArea { height: 1fr; }
    /* a sample a line, cut at the edge: wrapped, two lines each left room for three */
    PromptScreen OptionList { height: 8; text-wrap: nowrap; text-overflow: ellipsis; }
    PromptScreen #prompt-error { color: $error; height: auto; }
    PromptScreen #prompt-buttons { height: auto; align-horizontal: right; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "cancel"),
        Binding("ctrl+s", "submit", "start"),
        Binding("ctrl+n", "clear", "empty"),
    ]

    def __init__(self, current: str, prompts_dir: Path) -> None:
        super().__init__()
        self.current = current
        self.samples = sample_prompts(prompts_dir)
        self.prompts_dir = prompts_dir

    def compose(self):
        with Vertical() as box:
            box.border_title = "new prompt: ctrl+s starts a fresh session on it, escape cancels"
            yield PromptText(self.current, id="prompt-text", soft_wrap=True, show_line_numbers=False)
            if self.samples:
                yield Label(Text(f"or pick a sample ({self.prompts_dir}):", style="dim"))
                options = []
                for name, path in self.samples:
                    try:
                        first = " ".join(path.read_text(encoding="utf-8").split())
                        first = first if len(first) <= PREVIEW else first[: PREVIEW - 1] + "…"
                    except (OSError, UnicodeDecodeError) as error:
                        first = f"(unreadable: {error.__class__.__name__})"
                    options.append(Option(Text.assemble((name, "bold"), "  ", (first, "dim")), id=str(path)))
                yield OptionList(*options, id="prompt-samples")
            else:
                yield Label(Text(f"no sample prompts in {self.prompts_dir}", style="dim"))
            yield Label("", id="prompt-error")
            with Horizontal(id="prompt-buttons"):
                yield Button("Start", variant="primary", id="prompt-start")
                yield Button("Empty", id="prompt-empty")
                yield Button("Cancel", id="prompt-cancel")

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        path = Path(event.option.id)
        try:
            text = read_prompt_file(path)
        except InputError as error:
            self.query_one("#prompt-error", Label).update(Text(str(error)))
            return
        area = self.query_one(TextArea)
        area.text = text
        area.focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        {"prompt-start": self.action_submit, "prompt-empty": self.action_clear,
         "prompt-cancel": self.action_cancel}[event.button.id]()

    def action_clear(self) -> None:
        area = self.query_one(TextArea)
        area.text = ""
        area.focus()

    def action_submit(self) -> None:
        text = self.query_one(TextArea).text
        if not text.strip():
            self.query_one("#prompt-error", Label).update(Text("the prompt is empty"))
            return
        self.dismiss(text)

    def action_cancel(self) -> None:
        self.dismiss(None)
