"""Numbers derived from a list of completed rounds (the header and the history share them)."""

from __future__ import annotations

from typing import Optional, Sequence

from dflash_tui.engine.records import RoundRecord


def mean_accepted(rounds: Sequence[RoundRecord]) -> Optional[float]:
    done = [r.accepted for r in rounds if r.accepted is not None]
    return sum(done) / len(done) if done else None


def tokens_per_second(rounds: Sequence[RoundRecord]) -> Optional[float]:
    """Committed tokens over the engine's own time for them (stage timings, so pauses and
    screen time do not count)."""
    tokens = sum(len(r.committed_tokens) for r in rounds)
    seconds = sum(sum(s.ms for s in r.stages) for r in rounds) / 1000
    return tokens / seconds if seconds > 0 and tokens else None


def acceptance_by_slot(rounds: Sequence[RoundRecord]) -> list[tuple[int, int]]:
    """Per proposal slot: (rounds that accepted it, rounds that proposed it)."""
    width = max((r.gamma for r in rounds), default=0)
    out = [[0, 0] for _ in range(width)]
    for r in rounds:
        if r.accepted is None:
            continue
        for s in range(r.gamma):
            out[s][1] += 1
            if s < r.accepted:
                out[s][0] += 1
    return [(a, n) for a, n in out]


def generated_tokens(rounds: Sequence[RoundRecord]) -> int:
    return sum(len(r.committed_tokens) for r in rounds)
