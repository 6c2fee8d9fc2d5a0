"""Breakpoints menu (`b`): arm the conditions that stop a run, and their thresholds.

Returns the edited Breakpoints on enter / apply, None on escape.

Letters toggle (each row's key, from anywhere in the menu) and digits are only ever a
number: typed in a number field they edit it, typed on a row that has one they start it
afresh there, elsewhere they change nothing and the menu says where they go. (Digits used to
toggle rows unless a field had the focus: a number typed before focusing its field flipped
other breakpoints.) A number typed into a row's field arms the row. An armed row reads ✓ in
its box, not only in another colour.
"""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label

from dflash_tui.breakpoints import TOGGLES, Breakpoints, toggles

NUMBERS = {"rank_above": "rank_threshold", "position": "position_at"}
ROW_OF = {field: name for name, field in NUMBERS.items()}  # a number field's row
COMPARE_ONLY = {"diverge"}  # conditions only a session with --compare can meet
# A row this session cannot meet says what it needs, whole at 80 columns (its label and
# "(not in this session)" were cut to "(--compare) (not…").
IDLE_LABELS = {"diverge": "configurations diverge beyond tol (needs --compare)"}
# Each row's key: a letter from its label, so no digit ever toggles one.
ROW_KEYS = {"nonfinite": "n", "zero_accepted": "a", "rank_above": "r", "off_argmax": "s",
            "position": "p", "diverge": "d"}
ARMED, OFF = "✓", " "
# Whole, and reads so: "breakpoints: stop a run on the stage where…" ended in an ellipsis,
# which looked cut short at any width (the menu's is fixed)
TITLE = "breakpoints: a run stops at the stage that meets one"
DIGITS_HINT = "digits are numbers: r or p first (or tab to a field)"


class ArmedBox(Checkbox):
    """A checkbox whose box says whether it is on (✓ or blank), not only its colour: the
    stock box shows the same X either way, which a monochrome terminal or a colour-blind
    user cannot tell apart. Space toggles it; enter applies the menu, as in a number field
    (the stock enter toggled it too: `p` then enter disarmed the row just armed)."""

    BINDINGS = [Binding("enter", "screen.apply", "apply", show=False)]

    @property
    def _button(self) -> Content:
        self.BUTTON_INNER = ARMED if self.value else OFF  # read by the stock box
        return super()._button


class NumberField(Input):
    """A whole-number field that leaves letters to the menu (each row's toggle key), so a
    letter toggles its row wherever the focus is."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._started = False  # holds the first digit typed on its row: keep it unselected

    def check_consume_key(self, key: str, character: str | None) -> bool:
        return character is not None and (character.isdigit() or character == "-")

    def start(self, digit: str) -> None:
        """A number begun on this field's row: the digit, the focus here, the cursor after it."""
        self.value = digit
        self.cursor_position = len(digit)
        self._started = True
        self.screen.set_focus(self)

    def on_focus(self) -> None:
        # Runs before Input's own focus handler (subclass first), which selects the whole
        # value when select_on_focus is on: the next digit would then replace the first.
        self.select_on_focus = not self._started
        self._started = False


class BreakpointsScreen(ModalScreen[Breakpoints | None]):
    DEFAULT_CSS = """
    /* opaque: a see-through modal blends every cell of the screen below (slow) */
    BreakpointsScreen { align: center middle; background: $background; }
    BreakpointsScreen > Vertical {
        width: 66; height: auto; border: thick $primary; background: $surface; padding: 0 1;
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
        # Letters with priority: a focused field types every printable key into itself
        # before the menu's bindings see it. NumberField says it does not take letters
        # (Textual keeps the bindings of keys a focused field does not consume), so a letter
        # toggles its row from anywhere. Digits without: a number field takes them; from a
        # row or a button they come up to the menu. (Keys typed in one read keep their order
        # in the app: typed_keys.py.)
        *(Binding(ROW_KEYS[name], f"flip('{name}')", show=False, priority=True)
          for name, _ in TOGGLES),
        *(Binding(str(d), f"digit('{d}')", show=False) for d in range(10)),
    ]

    def __init__(self, armed: Breakpoints, compare: bool = True) -> None:
        """compare: the session runs with --compare (else "diverge" can never fire: it is
        shown disabled)."""
        super().__init__()
        self.armed = armed
        self.compare = compare

    def compose(self):
        with Vertical() as box:
            box.border_title = TITLE
            box.border_subtitle = f"{' '.join(ROW_KEYS.values())} toggle · ^s apply · esc cancel"
            for name, label in toggles(self.compare):
                with Horizontal():
                    idle = name in COMPARE_ONLY and not self.compare
                    yield ArmedBox(f"{ROW_KEYS[name]}  {IDLE_LABELS[name] if idle else label}",
                                   getattr(self.armed, name) and not idle, id=f"bp-{name}",
                                   disabled=idle)
                    if name in NUMBERS:
                        yield NumberField(str(getattr(self.armed, NUMBERS[name])),
                                          type="integer", id=f"bp-{NUMBERS[name]}")
            yield Label("", id="bp-error")
            with Horizontal(id="bp-buttons"):
                yield Button("Apply", variant="primary", id="bp-apply")
                yield Button("Cancel", id="bp-cancel")

    def action_flip(self, name: str) -> None:
        """Toggle the row and put the focus on it (at once: a number typed right after the
        key, in the same burst, goes to this row's field)."""
        box = self.query_one(f"#bp-{name}", Checkbox)
        if not box.disabled:
            box.value = not box.value
            self.set_focus(box)

    def action_digit(self, digit: str) -> None:
        """A digit with the focus outside a number field: on a row that has one, it starts
        that row's number afresh (the field takes the rest); elsewhere nothing changes."""
        focused = self.focused
        name = focused.id.removeprefix("bp-") if focused is not None and focused.id else ""
        if name in NUMBERS:
            self.query_one(f"#bp-{NUMBERS[name]}", NumberField).start(digit)
            self.query_one("#bp-error", Label).update("")
        else:
            self.query_one("#bp-error", Label).update(Text(DIGITS_HINT))
            self.app.bell()

    def on_input_changed(self, event: Input.Changed) -> None:
        """A number typed into a row's field arms that row: `p` `300` enter on an armed
        position row disarmed it (`p` toggles) and left the 300 unused."""
        field = event.input
        if field is self.focused and field.id and field.value.strip():
            self.query_one(f"#bp-{ROW_OF[field.id.removeprefix('bp-')]}", Checkbox).value = True

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
