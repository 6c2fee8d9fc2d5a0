"""Search a session for a token: in the committed stream, the proposals and the target's
tokens of every round (pure Python over a History).

A query is text (case-insensitive, may span several tokens: `weathered` is found even when
it was proposed as `we` + `athered`, or committed across two rounds) or `#ID`, a token id. A hit is a round and a slot:
the proposal slot, the verify row of a target token, or the committed token's index in the
round (slot k is the bonus when k proposals were accepted).
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


def token_id(query: str):
    """The token id a `#ID` query names, else None."""
    match = _ID.match(query.strip())
    return int(match.group(1)) if match else None


def search(history: History, query: str) -> list[Hit]:
    """Every (round, slot) where the query matches, in round then slot order."""
    if not query.strip():
        return []
    wanted = token_id(query)
    found: dict[tuple[int, int], set[str]] = {}
    for where, ids in (("committed", history.committed_ids.values),
                       ("proposal", history.proposal.values), ("target", history.target.values)):
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
    return [Hit(int(rounds[row]), slot, tuple(w for w in WHERE if w in places))
            for (row, slot), places in sorted(found.items())]


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


def step(hits: list[Hit], current: tuple[int, int], forward: bool) -> int | None:
    """Index of the next (or previous) hit after the (round, slot) on screen, wrapping."""
    if not hits:
        return None
    keys = [(h.round, h.slot) for h in hits]
    i = bisect_right(keys, current) if forward else bisect_left(keys, current) - 1
    return i % len(hits)
