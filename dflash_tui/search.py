"""Search a session for a token: in the committed stream, the proposals and the target's
tokens of every round (pure Python over a History).

A query is text (case-insensitive, may span several tokens: `weathered` is found even when
it was proposed as `we` + `athered`, or committed across two rounds) or `#ID`, a token id. A hit is a round and a slot:
the proposal slot, the verify row of a target token, or the committed token's index in the
round (slot k is the bonus when k proposals were accepted).

Only what the screen shows is searched: the proposal slots 0..γ-1 (the ranks table's rows),
the target's token at each of them, and the committed tokens. A round that accepted all γ
proposals commits a bonus after the last slot (slot γ, a `bonus` hit, shown on the last
slot's row); the target's token after the last proposal of any other round was verified on
a rejected prefix and is shown nowhere, so it is not searched.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from .history import History

WHERE = ("committed", "proposal", "target")
_ID = re.compile(r"#\s*(\d+)$")


@dataclass(frozen=True)
class Hit:
    round: int
    slot: int
    where: tuple[str, ...]  # which of WHERE matched there
    bonus: bool = False  # slot γ: the bonus after every proposal was accepted

    @property
    def shown_slot(self) -> int:
        """The proposal slot the screen selects for it (the bonus: the last one's)."""
        return self.slot - 1 if self.bonus else self.slot

    @property
    def place(self) -> str:
        """Where it is, in the screen's terms: `slot 3`, or `bonus after slot 14`."""
        return f"bonus after slot {self.slot - 1}" if self.bonus else f"slot {self.slot}"


def token_id(query: str):
    """The token id a `#ID` query names, else None."""
    match = _ID.match(query.strip())
    return int(match.group(1)) if match else None


def search(history: History, query: str) -> list[Hit]:
    """Every (round, slot) where the query matches, in round then slot order."""
    if not query.strip():
        return []
    wanted = token_id(query)
    gammas = history.gamma.values
    found: dict[tuple[int, int], set[str]] = {}
    for where, ids in (("committed", history.committed_ids.values),
                       ("proposal", history.proposal.values), ("target", _shown_target(history))):
        if wanted is not None:
            rows, slots = np.nonzero(ids == wanted)
            for row, slot in zip(rows.tolist(), slots.tolist()):
                found.setdefault((row, slot), set()).add(where)
        else:
            # the committed stream reads on across rounds; each round's proposals and
            # target tokens are a text of their own
            hits = _text_hits(history, ids, query.casefold(), across_rows=where == "committed")
            for row, slot in hits:
                found.setdefault((row, slot), set()).add(where)
    rounds = history.round.values
    return [Hit(int(rounds[row]), slot, tuple(w for w in WHERE if w in places),
                bool(slot >= gammas[row]))
            for (row, slot), places in sorted(found.items())]


def _shown_target(history: History) -> np.ndarray:
    """The target's tokens with the row after the last proposal blanked (-1) unless the
    round committed it as its bonus (every proposal accepted)."""
    target = history.target.values.copy()
    gammas, committed = history.gamma.values, history.committed.values
    after_last = np.arange(target.shape[1])[None, :] >= gammas[:, None]
    target[after_last & (committed <= gammas)[:, None]] = -1
    return target


def _text_hits(history: History, ids: np.ndarray, needle: str, across_rows: bool):
    """(row, slot) where each match of `needle` starts, reading each row's tokens as one
    text, or (across_rows) all rows' tokens as one text."""
    text = history.token_text
    rows = [[(row, slot, text.get(t, "")) for slot, t in enumerate(tokens) if t >= 0]
            for row, tokens in enumerate(ids.tolist())]
    for pieces in ([[p for row in rows for p in row]] if across_rows else rows):
        if not pieces:
            continue
        joined = "".join(p[2] for p in pieces).casefold()
        ends = list(accumulate(len(p[2]) for p in pieces))
        start = joined.find(needle)
        while start >= 0:
            row, slot, _ = pieces[bisect_right(ends, start)]
            yield row, slot
            start = joined.find(needle, start + 1)


def first(hits: list[Hit], round_number: int) -> int | None:
    """Index of the first hit at or after the start of a round (wrapping): a new search
    starts at slot 0 of the round on screen, whatever slot is selected."""
    if not hits:
        return None
    return bisect_left([(h.round, h.slot) for h in hits], (round_number, 0)) % len(hits)


def step(hits: list[Hit], current: tuple[int, int], forward: bool, at: int | None = None) -> int | None:
    """Index of the next (or previous) hit, wrapping: after hit `at` when it is the one on
    screen (the last slot and the bonus share a row), else after the (round, slot) on screen."""
    if not hits:
        return None
    if at is not None:
        return (at + (1 if forward else -1)) % len(hits)
    keys = [(h.round, h.slot) for h in hits]
    i = bisect_right(keys, current) if forward else bisect_left(keys, current) - 1
    return i % len(hits)
