"""History: accepted proposals per round as a sparkline, and acceptance by slot position.

Slot s's bar is P(accepted >= s + 1): the share of rounds that proposed slot s and accepted
it (so later slots can only do as well as earlier ones). Only the slots of the round on
screen (its γ) are drawn, as many as fit; those left out are counted (`…+9`), and a
selected slot among them is named with its value (`s24 20`). A round that accepted nothing
shows as a red dot; one that accepted every proposal as a bright bar. The aggregates tab
has the full story.
"""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.widgets import Static

from .format import percent, reading_text, rounds_count
from .frame import Frame

BARS = "▁▂▃▄▅▆▇█"
LABEL = 10  # "acc/round " and "by slot   "
# Under this many characters after the labels, the labels go: their room is the bars'
# (at 16 characters the label left 6, two bars and `…+13`; under 14 lines ran past the width).
FEWEST_BARS = 8
RULER_EVERY = 5  # slot numbers on the axis (and the selected one)


class HistoryPanel(Static):
    DEFAULT_CSS = """
    HistoryPanel {
        border: round $primary 50%;
        border-title-color: $text-primary;
        height: 6;
        padding: 0 1;
    }
    """
    # On a short screen (the screen's -short breakpoint class) one line of slot bars: the
    # class is on an ancestor, so this is app CSS, not scoped to the widget.
    SHORT_CSS = """
    .-short HistoryPanel { height: 5; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.border_title = "history"
        self._key: Optional[tuple] = None
        self._frame: Optional[Frame] = None
        self._data: tuple = (None, [], [], [])

    def show(self, frame: Frame) -> None:
        width = self.content_size.width or 20  # (0: not laid out yet)
        bar_rows = max(self.content_size.height - 2, 1)
        slots = frame.slots or frame.gamma or 0
        data = (id(frame.history), len(frame.history or ()), frame.upto, slots)
        key = data + (frame.slot, width, bar_rows, frame.reading)
        if key == self._key:
            return
        if self._key is None or key[:4] != self._key[:4]:
            self._data = self._numbers(frame, slots)  # a slot key alone redraws, counts nothing
        self._key, self._frame = key, frame
        mean, accepted, gamma, by_slot = self._data
        if frame.reading is not None:  # the history is still filling: how far, not a mean
            self.border_subtitle = reading_text(frame.reading)
        else:
            self.border_subtitle = (f"mean {mean:.2f} over {rounds_count(len(accepted))}"
                                    if accepted else "no rounds yet")
        self.update(render_history(accepted, gamma, by_slot, frame.slot, width, bar_rows),
                    layout=False)  # fixed height

    @staticmethod
    def _numbers(frame: Frame, slots: int) -> tuple:
        """(mean accepted, accepted and γ per round, per slot (accepted, proposed)) up to the
        round on screen."""
        accepted, gamma, by_slot, mean = [], [], [], None
        if frame.history is not None and frame.upto:
            from dflash_tui import aggregates

            history, span = frame.history, aggregates.every_round(frame.history, frame.upto)
            mean = aggregates.mean_accepted(history, span)
            accepted = history.accepted.values[span.rows].tolist()
            gamma = history.gamma.values[span.rows].tolist()
            # every slot the session has proposed: the last round before --max-tokens proposes
            # only what is left (γ 1 capped), and its own γ left one bar on a finished session
            slots = max([slots, *gamma])
            by_slot = aggregates.accepted_at_least(history, span, slots)
        return mean, accepted, gamma, by_slot + [(0, 0)] * (slots - len(by_slot))

    def on_resize(self) -> None:
        if self._frame is not None:
            self._key = None
            self.show(self._frame)


def sparkline(values, tops) -> Text:
    """One glyph per round: accepted out of that round's γ."""
    text = Text(no_wrap=True)
    for v, top in zip(values, tops):
        if v == 0:
            text.append("·", style="bold red")
        else:
            level = min(len(BARS) - 1, round((v / max(top, 1)) * (len(BARS) - 1)))
            text.append(BARS[level], style="bold green" if v >= top else "cyan")
    return text


def slot_bars(rates: list[Optional[float]], rows: int, column: int = 2) -> list[Text]:
    """Vertical bars, a `column`-character column per slot (the bar and a gap, or the bar
    alone), `rows` lines tall (top line first)."""
    levels = len(BARS) * rows
    lines = [Text(no_wrap=True) for _ in range(rows)]
    for rate in rates:
        filled = 0 if rate is None else round(rate * levels)
        for r in range(rows):  # r = 0 is the bottom line
            part = filled - r * len(BARS)
            glyph = " " if part <= 0 else BARS[min(part, len(BARS)) - 1]
            lines[rows - 1 - r].append(glyph.ljust(column), style="green")
    return lines


def slot_ruler(slots: int, selected: int, column: int = 2) -> Text:
    """The slot axis under the bars: every RULER_EVERY-th number and the selected slot.
    Two characters a slot: numbers of two digits fill their column (they never wrap to a
    second line). One character a slot: a number starts at its slot and runs on to the
    right where it fits; the selected slot's character is marked."""
    text = Text(no_wrap=True)
    if column == 1:
        cells = ["·"] * slots
        for s in range(0, slots, RULER_EVERY):
            label = str(s)
            if s + len(label) <= slots:
                cells[s: s + len(label)] = label
        for s, cell in enumerate(cells):
            text.append(cell, style="bold reverse" if s == selected else "dim")
        return text
    for s in range(slots):
        if s == selected:
            text.append(f"{s:<2}", style="bold reverse")
        elif s % RULER_EVERY == 0:
            text.append(f"{s:<2}", style="dim")
        else:
            text.append("· ", style="dim")
    return text


def fit_slots(slots: int, room: int) -> tuple[int, int]:
    """(characters a slot, slots shown) for `slots` bars in `room` characters: two a slot
    where they fit; else one (γ 15 in the 80-column layout); else the first slots, as many as
    leave room for the mark that counts the rest (`…+3`)."""
    if 2 * slots <= room:
        return 2, slots
    if slots <= room:
        return 1, slots
    shown = room - len(f"…+{slots}")
    while shown > 0 and shown + len(f"…+{slots - shown}") > room:
        shown -= 1
    return 1, max(shown, 0)


def selected_forms(by_slot: list[tuple[int, int]], slot: int, glued: bool = False) -> list[str]:
    """The selected slot's numbers, longest first: the counts go first, then the `%` sign,
    then (`glued`: what comes before them is no digit) the space before them; its number
    alone last (`s12 100%` did not fit beside γ 15 at 80 columns, and went whole, then `s0`
    alone read as if its value were missing where `s0 100%` did not fit)."""
    if slot >= len(by_slot):
        return []
    a, n = by_slot[slot]
    share = percent(a, n)
    value = f"s{slot} {share.rstrip('%')}"
    return [f" s{slot} {share} ({a}/{n})", f" s{slot} {share}", f" {value}",
            *([value] if glued else []), f" s{slot}"]


def render_history(accepted, gamma, by_slot: list[tuple[int, int]], slot: int, width: int,
                   bar_rows: int = 2) -> Text:
    """Every line at most `width` characters: in a narrow panel the labels go first, then
    the bars that do not fit are counted instead of drawn."""
    out = Text(no_wrap=True, overflow="crop")
    label = LABEL if width - LABEL >= FEWEST_BARS else 0
    room = max(width - label, 1)
    out.append("acc/round "[:label], style="dim")
    out.append_text(sparkline(accepted[-room:], gamma[-room:]))
    forms = selected_forms(by_slot, slot)
    # Bars first: every slot that fits (the axis marks the selected one). Only a selected
    # slot among those left out takes room from the bars, for its number and value.
    column, count = fit_slots(len(by_slot), room)
    if count <= slot < len(by_slot):
        column, count = fit_slots(len(by_slot), room - len(forms[-2]))
    shown = by_slot[:count]
    rates = [a / n if n else None for a, n in shown]
    for i, line in enumerate(slot_bars(rates, bar_rows, column)):
        out.append("\n")
        out.append("by slot   "[:label] if i == 0 else " " * label, style="dim")
        out.append_text(line)
    out.append("\n" + " " * label)
    out.append_text(slot_ruler(len(shown), slot, column))
    used = label + len(shown) * column
    more = f"…+{len(by_slot) - count}"
    # slots left out are counted, never dropped in silence (under 5 characters, where no
    # bar fits either, a count cut to `…+1` would say a wrong number: none is said)
    if count < len(by_slot) and used + len(more) <= width:
        out.append(more, style="dim")
        used += len(more)
    # after the axis's dot (not a slot's or the count's digits) `s14 100` needs no space
    forms = selected_forms(by_slot, slot, glued=not out.plain[-1:].isdigit())
    for selected in forms:  # whole, or not at all
        if used + len(selected) <= width:
            out.append(selected, style="bold")
            break
    return out
