"""Per-slot numbers as both the TUI's aggregates tab (panels/aggregates.py) and `bench --slots`
(dflash_tui/bench/slots.py) write them, written once so the two never disagree. Plain
Python: panels/ may not import MLX, nor the bench the Textual panels."""

from __future__ import annotations

from typing import Optional


def off_rank(median: Optional[float], dash: str = "-") -> str:
    """A median rank where the drafter's argmax missed (a whole number or a half) in five
    characters at most, the aggregates tab's column: 2.5, 861, 1588, then 1e+05; never cut
    to a smaller number. `dash` where no slot missed."""
    if median is None:
        return dash
    if median < 1000:
        return f"{median:g}"
    return f"{median:.0f}" if median < 1e5 else f"{median:.0e}"
