"""History: accepted proposals per round as a sparkline, and acceptance by slot position.

Slot s's acceptance is the share of rounds that proposed at least s+1 tokens and accepted
slot s (so later slots can only do as well as earlier ones). A round that accepted nothing
shows as a red dot; one that accepted every proposal as a bright bar.
"""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.widgets import Static

from . import stats
from .format import percent
from .frame import Frame

BARS = "▁▂▃▄▅▆▇█"
LABEL = 10  # "acc/round " and "by slot   "
SLOT_ROWS = 2  # height of the by-slot bars


class HistoryPanel(Static):
    DEFAULT_CSS = """
    HistoryPanel {
        border: round $primary 50%;
        border-title-color: $text-primary;
        height: 6;
        padding: 0 1;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.border_title = "history"
        self._key: Optional[tuple] = None
        self._frame: Optional[Frame] = None

    def show(self, frame: Frame) -> None:
        width = max(self.content_size.width, 20)
        key = (len(frame.rounds), frame.rounds[-1] if frame.rounds else None, frame.slot, width)
        if self._key is not None and key[0] == self._key[0] and key[1] is self._key[1] \
                and key[2:] == self._key[2:]:
            return
        self._key, self._frame = key, frame
        mean = stats.mean_accepted(frame.rounds)
        self.border_subtitle = (f"mean {mean:.2f} over {len(frame.rounds)} rounds"
                                if mean is not None else "no rounds yet")
        self.update(render_history(frame.rounds, frame.slot, width), layout=False)  # fixed height

    def on_resize(self) -> None:
        if self._frame is not None:
            self._key = None
            self.show(self._frame)


def sparkline(values: list[int], top: int) -> Text:
    text = Text(no_wrap=True)
    for v in values:
        if v == 0:
            text.append("·", style="bold red")
        else:
            level = min(len(BARS) - 1, round((v / max(top, 1)) * (len(BARS) - 1)))
            text.append(BARS[level], style="bold green" if v >= top else "cyan")
    return text


def slot_bars(rates: list[Optional[float]], rows: int = SLOT_ROWS) -> list[Text]:
    """Vertical bars, one 2-character column per slot, `rows` lines tall (top line first)."""
    levels = len(BARS) * rows
    lines = [Text(no_wrap=True) for _ in range(rows)]
    for rate in rates:
        filled = 0 if rate is None else round(rate * levels)
        for r in range(rows):  # r = 0 is the bottom line
            part = filled - r * len(BARS)
            glyph = " " if part <= 0 else BARS[min(part, len(BARS)) - 1]
            lines[rows - 1 - r].append(glyph + " ", style="green")
    return lines


def render_history(rounds, slot: int, width: int) -> Text:
    out = Text(no_wrap=True, overflow="crop")
    room = max(width - LABEL, 4)
    accepted = [r.accepted for r in rounds if r.accepted is not None]
    top = max((r.gamma for r in rounds), default=1)
    out.append("acc/round ", style="dim")
    out.append_text(sparkline(accepted[-room:], top))
    by_slot = stats.acceptance_by_slot(rounds)
    rates = [a / n if n else None for a, n in by_slot][: room // 2]
    for i, line in enumerate(slot_bars(rates)):
        out.append("\n")
        out.append("by slot   " if i == 0 else " " * LABEL, style="dim")
        out.append_text(line)
    out.append("\n" + " " * LABEL)
    for s in range(len(rates)):
        out.append(f"{s % 10} ", style="bold reverse" if s == slot else "dim")
    if slot < len(by_slot):
        a, n = by_slot[slot]
        out.append(f" s{slot} {percent(a, n)} ({a}/{n})", style="bold")
    return out
