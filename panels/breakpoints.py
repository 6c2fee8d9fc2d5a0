"""Breakpoints menu (`b`): arm the conditions that stop a run, and their thresholds.

Returns the edited Breakpoints on enter / apply, None on escape.
"""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label

from dflash_tui.breakpoints import TOGGLES, Breakpoints

NUMBERS = {"rank_above": "rank_threshold", "position": "position_at"}
COMPARE_ONLY = {"diverge"}  # conditions only a session with --compare can meet


class BreakpointsScreen(ModalScreen[Breakpoints | None]):
    DEFAULT_CSS = """
    /* opaque: a see-through modal blends every cell of the screen below (slow) */
    BreakpointsScreen { align: center middle; background: $background; }
    BreakpointsScreen > Vertical {
        width: 64; height: auto; border: thick $primary; background: $surface; padding: 0 1;
    }
    BreakpointsScreen Horizontal { height: auto; }
    BreakpointsScreen Checkbox { width: 1fr; border: none; }
    BreakpointsScreen Input { width: 12; }
    BreakpointsScreen #bp-error { color: $error; height: auto; }
    BreakpointsScreen #bp-buttons { margin-top: 1; align-horizontal: right; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "cancel"),
        Binding("ctrl+s", "apply", "apply"),
        *(Binding(str(i + 1), f"flip('{name}')", show=False) for i, (name, _) in enumerate(TOGGLES)),
    ]

    def __init__(self, armed: Breakpoints, compare: bool = True) -> None:
        """compare: the session runs with --compare (else "diverge" can never fire: it is
        shown disabled)."""
        super().__init__()
        self.armed = armed
        self.compare = compare

    def compose(self):
        with Vertical() as box:
            box.border_title = "breakpoints: stop a run on the stage where…"
            for i, (name, label) in enumerate(TOGGLES):
                with Horizontal():
                    idle = name in COMPARE_ONLY and not self.compare
                    yield Checkbox(f"{i + 1}  {label}" + (" (not in this session)" if idle else ""),
                                   getattr(self.armed, name) and not idle, id=f"bp-{name}",
                                   disabled=idle)
                    if name in NUMBERS:
                        yield Input(str(getattr(self.armed, NUMBERS[name])), type="integer",
                                    id=f"bp-{NUMBERS[name]}")
            yield Label("", id="bp-error")
            with Horizontal(id="bp-buttons"):
                yield Button("Apply", variant="primary", id="bp-apply")
                yield Button("Cancel", id="bp-cancel")

    def action_flip(self, name: str) -> None:
        box = self.query_one(f"#bp-{name}", Checkbox)
        if not box.disabled:
            box.value = not box.value

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "bp-apply":
            self.action_apply()
        else:
            self.action_cancel()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.action_apply()

    def action_apply(self) -> None:
        values = {name: self.query_one(f"#bp-{name}", Checkbox).value for name, _ in TOGGLES}
        for field in NUMBERS.values():
            text = self.query_one(f"#bp-{field}", Input).value.strip()
            try:
                number = int(text)
                if number < 0:
                    raise ValueError
            except ValueError:
                self.query_one("#bp-error", Label).update(Text(
                    f"{field.replace('_', ' ')}: expected a whole number ≥ 0, got {text!r}"))
                return
            values[field] = number
        self.dismiss(replace(self.armed, **values))

    def action_cancel(self) -> None:
        self.dismiss(None)
