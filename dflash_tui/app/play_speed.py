"""Replay's play speed (`+` / `-`): how far one tick of the play timer goes, how many ticks'
worth a late tick makes up, and how fast the play really goes where reading the rounds is
slower than the speed asks.

Pure Python: no MLX, no Textual.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class PlaySpeed:
    """How far one tick of the play timer goes: `count` stages or whole rounds."""

    unit: str  # "stage" or "round"
    count: int
    interval: float  # seconds between ticks

    def __str__(self) -> str:
        return f"{self.count / self.interval:g} {self.unit}s/s"


# `+` / `-` walk these. Stage by stage is for watching a round unfold; a recording of
# thousands of rounds wants whole rounds, many a tick (one frame drawn per tick, every stage
# passed still checked against the breakpoints).
PLAY_SPEEDS = (
    PlaySpeed("stage", 1, 0.25),
    PlaySpeed("stage", 1, 0.1),
    PlaySpeed("round", 1, 0.1),
    PlaySpeed("round", 10, 0.1),
    PlaySpeed("round", 100, 0.1),
)
DEFAULT_SPEED = 1
MAX_CATCH_UP = 10  # ticks' worth of rounds one late tick may play (a stall is not made up)
MEASURE_EVERY = 1.0  # seconds: how often the speed played is measured


class PlayClock:
    """The chosen speed (an index into PLAY_SPEEDS) and the play's clock."""

    def __init__(self) -> None:
        self.index = DEFAULT_SPEED
        self._last_tick = 0.0  # when the timer last ticked (or started)
        self._measured_since = 0.0
        self._measured_rounds = 0

    @property
    def speed(self) -> PlaySpeed:
        return PLAY_SPEEDS[self.index]

    def change(self, step: int) -> bool:
        """One speed faster (1) or slower (-1); False (unchanged) past either end."""
        if not 0 <= self.index + step < len(PLAY_SPEEDS):
            return False
        self.index += step
        return True

    def text(self) -> str:
        edge = {0: " (slowest)", len(PLAY_SPEEDS) - 1: " (fastest)"}.get(self.index, "")
        return f"{self.speed}{edge}"

    def started(self) -> None:
        """The timer (re)starts: its ticks and the measure count from now."""
        self._last_tick = self._measured_since = time.monotonic()
        self._measured_rounds = 0

    def due(self) -> int:
        """Stages or rounds this tick is to play. A frame can take longer than the interval
        (a slow machine, a big screen): at the round speeds the rounds of the time it took
        are played in this tick, so the speed shown is the speed played (stage by stage,
        each stage is shown, late or not)."""
        speed, now = self.speed, time.monotonic()
        due = speed.count
        if speed.unit == "round":
            late = (now - self._last_tick) / speed.interval
            due = min(max(due, round(speed.count * late)), MAX_CATCH_UP * speed.count)
        self._last_tick = now
        return due

    def played(self, rounds: int) -> Optional[float]:
        """Count what a tick played; once a second, the rounds a second it played where
        that is short of what the speed asks (the rounds cannot be read that fast), else
        None."""
        self._measured_rounds += rounds
        seconds = time.monotonic() - self._measured_since
        if seconds < MEASURE_EVERY:
            return None
        speed, rate = self.speed, self._measured_rounds / seconds
        self._measured_since, self._measured_rounds = time.monotonic(), 0
        return rate if speed.unit == "round" and rate < 0.8 * speed.count / speed.interval else None
