"""The breakpoints menu (`b`): letters toggle the rows, digits are only ever numbers (a
number typed before its field has the focus flips nothing), and an armed row reads ✓ in its
box, without colour. Driven in a bare host app: the menu is a panel, with no engine behind it."""

from __future__ import annotations

from textual.app import App

from dflash_tui.breakpoints import Breakpoints
from dflash_tui.panels.breakpoints import ARMED, DIGITS_HINT, TITLE, BreakpointsScreen

from app_helpers import run, screen_lines, wait_for


class Host(App):
    """Opens the menu at once and keeps what it answered."""

    def __init__(self, armed: Breakpoints, compare: bool = True) -> None:
        super().__init__()
        self.armed, self.compare = armed, compare
        self.answers: list = []

    def on_mount(self) -> None:
        self.push_screen(BreakpointsScreen(self.armed, compare=self.compare), self.answers.append)


async def menu(pilot) -> BreakpointsScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, BreakpointsScreen), what="the menu")
    await pilot.pause()
    return pilot.app.screen


def answered(pilot):
    return wait_for(pilot, lambda: pilot.app.answers, what="the menu's answer")


def row_line(app, label: str) -> str:
    return next(line for line in screen_lines(app) if label in line)


def test_digits_typed_before_the_field_toggle_nothing():
    """Focus on the first row, `300` then enter: before, `3` flipped "true-token rank above"
    on; now no breakpoint changes and the menu says where digits go."""
    armed = Breakpoints()

    async def scenario():
        app = Host(armed)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await menu(pilot)
            await pilot.press("3", "0", "0")
            said = str(screen.query_one("#bp-error").render())
            await pilot.press("ctrl+s")
            await answered(pilot)
            assert app.answers == [armed]
            assert said == DIGITS_HINT

    run(scenario())


def test_a_row_key_then_a_number_arms_it_at_that_number():
    """`p 300 r 5 a n enter`: position armed at 300, rank above 5 (the row's key puts the
    focus on it, its first digit moves to its field, the rest follows there), accepted == 0
    on, non-finite off. (The same typed in one read, in the app: test_app_typed_keys.py.)"""
    async def scenario():
        app = Host(Breakpoints())
        async with app.run_test(size=(80, 24)) as pilot:
            await menu(pilot)
            await pilot.press("p", "3", "0", "0", "r", "5", "a", "n", "enter")
            await answered(pilot)
            assert app.answers == [Breakpoints(nonfinite=False, zero_accepted=True,
                                               position=True, position_at=300,
                                               rank_above=True, rank_threshold=5)]

    run(scenario())


def test_letters_toggle_from_anywhere_and_digits_edit_a_focused_field():
    async def scenario():
        app = Host(Breakpoints(), compare=False)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await menu(pilot)
            field = screen.query_one("#bp-rank_threshold")
            field.focus()
            await pilot.pause()
            field.value = ""
            await pilot.press("4", "2", "n", "a", "s", "d")  # d: diverge, not in this session
            assert field.value == "42" and screen.focused is screen.query_one("#bp-off_argmax")
            await pilot.press("ctrl+s")
            await answered(pilot)
            # the number typed into the rank row's field armed that row
            assert app.answers == [Breakpoints(nonfinite=False, zero_accepted=True,
                                               off_argmax=True, rank_above=True,
                                               rank_threshold=42)]

    run(scenario())


def test_an_armed_row_reads_differently_without_colour():
    async def scenario():
        app = Host(Breakpoints(nonfinite=True, zero_accepted=False))
        async with app.run_test(size=(80, 24)) as pilot:
            await menu(pilot)
            armed, off = row_line(app, "any NaN / Inf"), row_line(app, "accepted == 0")
            assert f"▐{ARMED}▌" in armed and f"▐{ARMED}▌" not in off and "▐ ▌" in off
            await pilot.press("a", "n")
            await pilot.pause()
            assert "▐ ▌" in row_line(app, "any NaN / Inf")
            assert f"▐{ARMED}▌" in row_line(app, "accepted == 0")
            await pilot.press("escape")
            await answered(pilot)
            assert app.answers == [None]

    run(scenario())


def test_a_number_typed_on_an_armed_row_keeps_it_armed():
    """Position armed at 256: `p 300 enter` arms it at 300. `p` toggles, so it disarmed the
    row, and the number typed after it was kept on a row that would never fire."""
    async def scenario():
        app = Host(Breakpoints(position=True, position_at=256))
        async with app.run_test(size=(80, 24)) as pilot:
            await menu(pilot)
            await pilot.press("p", "3", "0", "0", "enter")
            await answered(pilot)
            assert app.answers == [Breakpoints(position=True, position_at=300)]

    run(scenario())


def test_a_number_typed_into_a_field_arms_its_row_and_an_emptied_one_does_not():
    async def scenario():
        app = Host(Breakpoints())
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await menu(pilot)
            screen.query_one("#bp-position_at").focus()
            await pilot.pause()
            await pilot.press("backspace", "backspace", "backspace")  # 256 selected on focus: one clears it
            assert not screen.query_one("#bp-position").value
            await pilot.press("5")
            assert screen.query_one("#bp-position").value
            assert not screen.query_one("#bp-rank_above").value

    run(scenario())


def test_the_diverge_row_reads_whole_at_80_columns_without_compare():
    """At 80 columns with no --compare the diverge row was cut to "(--compare) (not…"."""
    async def scenario():
        app = Host(Breakpoints(), compare=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await menu(pilot)
            line = row_line(app, "configurations diverge")
            assert "…" not in line
            assert "d  configurations diverge beyond tol (needs --compare)" in line

    run(scenario())


def test_the_menu_title_reads_whole_at_80_columns():
    """The title ended in an ellipsis ("breakpoints: stop a run on the stage where…"), which
    reads as cut at 80 columns (and at any other width: the menu's is fixed). Its top
    border now holds a whole sentence and no ellipsis, at 80 x 24 and at 200 x 50."""
    async def scenario(size):
        app = Host(Breakpoints())
        async with app.run_test(size=size) as pilot:
            await menu(pilot)
            top = row_line(app, "breakpoints")
            assert f" {TITLE} " in top and "…" not in top, top
            assert "…" not in "".join(screen_lines(app))

    for size in ((80, 24), (200, 50)):
        run(scenario(size))


def test_the_nonfinite_row_says_the_reference_stops_it_under_compare():
    """With --compare the default-armed NaN / Inf row also stops where the reference went
    non-finite (it did not: only diverge stopped there), and says so, whole at 80 columns
    on the focused row; without --compare it names only the drafter's side."""
    async def scenario(compare, label):
        app = Host(Breakpoints(), compare=compare)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await menu(pilot)
            assert screen.focused.id == "bp-nonfinite"  # the focused row: its border narrows it
            line = row_line(app, "any NaN / Inf")
            assert f"n  {label}" in line and "…" not in line, line

    run(scenario(True, "any NaN / Inf (a probe, logits, or the reference)"))
    run(scenario(False, "any NaN / Inf (a probe, or the drafter's logits)"))
