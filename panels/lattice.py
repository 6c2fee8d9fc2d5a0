"""The K x K selector lattice of one slot as a heat map.

Rows are the predecessors (the previous slot's candidates; the anchor alone for slot 0),
columns this slot's candidates, best unary first; a cell is the total score unary + edge.
Colours run from the matrix's lowest score (dark) to its highest (bright). The walk's
predecessor row is marked ▶ and its pick ●; column marks: ★ plain argmax, ◎ target token.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from rich.color import Color
from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from .format import num, token_cell

# A perceptual ramp (viridis stops) from low to high scores.
RAMP = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))
LABEL = 9  # characters for a predecessor's token


def cell_width(k: int) -> int:
    """Characters per cell: 3 up to K = 8, 2 beyond (a K = 16 lattice stays ~40 wide)."""
    return 3 if k <= 8 else 2


def ramp(t: float) -> Color:
    t = min(max(t, 0.0), 1.0) * (len(RAMP) - 1)
    i = min(int(t), len(RAMP) - 2)
    f = t - i
    a, b = RAMP[i], RAMP[i + 1]
    return Color.from_rgb(*(round(x + (y - x) * f) for x, y in zip(a, b)))


def render_lattice(lattice: Sequence[Sequence[float]], predecessors: Sequence[str],
                   pred_index: int, pick: int, argmax: int, target: Optional[int]) -> Text:
    """target: the column of the target's token, or None when it is not a candidate."""
    values = [v for row in lattice for v in row if v is not None and math.isfinite(v)]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    span = hi - lo or 1.0
    k = len(lattice[0]) if lattice else 0
    cell = cell_width(k)
    text = Text(no_wrap=True)
    text.append(" " * (LABEL + 1))
    for c in range(k):
        mark = "★" if c == argmax else "◎" if c == target else " "
        index = c if cell > 2 else c % 10  # two-character cells: the last digit
        text.append(f"{mark}{index:<{cell - 1}d}"[:cell], style="bold" if mark != " " else "dim")
    text.append("\n")
    for r, row in enumerate(lattice):
        chosen_row = r == pred_index
        label = token_cell(predecessors[r] if r < len(predecessors) else "?", LABEL - 1)
        text.append(("▶" if chosen_row else " ") + f"{label:<{LABEL - 1}} ",
                    style="bold" if chosen_row else "dim")
        for c, value in enumerate(row):
            if value is None or not math.isfinite(value):  # NaN / Inf (None once in JSON)
                text.append("×".center(cell), style="bold white on red")
                continue
            t = (value - lo) / span
            fg = "black" if t > 0.55 else "white"
            glyph = ("●" if chosen_row and c == pick else " ").center(cell)
            text.append(glyph, style=Style(bgcolor=ramp(t), color=fg, bold=True))
        text.append("\n")
    text.append(" " * (LABEL + 1))
    text.append(f"{num(lo)} ", style="dim")
    for i in range(8):
        text.append(" ", style=Style(bgcolor=ramp(i / 7)))
    text.append(f" {num(hi)}", style="dim")
    return text


class LatticeHeatmap(Static):
    DEFAULT_CSS = """
    LatticeHeatmap { width: auto; height: auto; }
    """

    def show_slot(self, lattice, predecessors, pred_index, pick, argmax, target,
                  layout: bool = True) -> None:
        self.update(render_lattice(lattice, predecessors, pred_index, pick, argmax, target),
                    layout=layout)

    def clear(self, message: str = "") -> None:
        self.update(Text(message, style="dim"))
