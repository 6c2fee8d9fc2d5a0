"""A session's rounds, kept in bounded memory: a compact summary row for every completed
round, the full records of the most recent ones, and a way back to the older ones.

A full round record is large (on the sample pair ~270 KB: 71 probe rows, a 15 x 16 x 16
selector lattice, top-5 lists), so a session of thousands of rounds cannot keep them all.
What aggregates, search and the history panel need of a round is small: its accepted count
(and the reference configuration's, with --compare),
per slot the rank, fate and the selector's choice, per probed buffer the fp16 headroom,
absmax and non-finite count. Those go into numpy columns (about 1.9 KB a round on the sample);
the full records of the last `keep` rounds stay in memory; an older one is fetched from
`source` (the session's trace, see trace_rounds.py) when someone asks for it.

Pure Python and numpy: no MLX, no Textual. The app appends on its own thread only.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Callable, Optional

import numpy as np

from .engine.records import RoundRecord

FETCHED = 8  # older records read back and kept (stepping back and forth re-reads none)

# Per-slot flags (the `flags` column).
PROPOSED = 1  # the round proposed this slot
ACCEPTED = 2  # verify accepted it
JUDGED = 4  # every earlier slot was accepted: its rank says something (not after a rejection)
IN_K = 8  # DFlash2: the target's token was among the selector's K candidates
IN_K_KNOWN = 16  # the round had a selector (DFlash2)
LEFT_ARGMAX = 32  # the selector's walk picked something other than the slot's argmax
NONFINITE = 64  # the side's logits at this slot held a NaN or Inf: its rank is no rank

BufferKey = tuple  # (stage, layer or None, name)


@dataclass(frozen=True)
class Side:
    """One configuration's slots in a round, as History keeps them: the drafter's
    (`drafter_side`) or, with --compare, the reference's on the same stream
    (`reference_side`)."""

    proposals: tuple[int, ...]
    accepted: Optional[int]
    targets: tuple[int, ...]  # the target's token per slot (-1: unknown)
    ranks: tuple[tuple, ...]  # (slot, rank, the target's own top probability or nan, in K or None)
    walk: tuple[tuple, ...]  # DFlash2: (slot, pick, argmax, the walk left the argmax)
    top_k: int = 0  # DFlash2: the selector's K (0: no selector, or not recorded)
    nonfinite: tuple[int, ...] = ()  # the slots whose logits held a NaN or Inf


def drafter_side(record: RoundRecord) -> Side:
    ranks = tuple((r.slot, r.rank, _nan(r.target_p1), r.in_candidates) for r in record.ranks)
    walk = () if record.selector is None else tuple(
        (s.slot, s.chosen, s.argmax, s.off_argmax) for s in record.selector.slots)
    return Side(tuple(record.proposals or ()), record.accepted,
                tuple(record.target_tokens or ()), ranks, walk,
                0 if record.selector is None else record.selector.top_k,
                tuple(record.nonfinite_logit_slots or ()))


def reference_side(record: RoundRecord) -> Side:
    """The reference's slots (records.Compare): judged against the target's tokens after its
    own proposals. The target's top probability is the primary's where the two sides'
    prefixes agree (the same verify row), unknown past that (RoundRecord.reference_target_p1).
    Its pick is its proposal (the walk's own choice: only tests force a reference's
    proposals). Its selector's K is its own (a reference checkpoint may set another); a
    recording made before Compare.top_k has none: 0."""
    c = record.compare
    p1 = record.reference_target_p1()
    ranks = tuple((s, rank, _nan(p1[s]), c.in_candidates[s] if c.in_candidates else None)
                  for s, rank in enumerate(c.ranks))
    walk = tuple((s, c.proposals[s], argmax, left)
                 for s, (argmax, left) in enumerate(zip(c.argmax, c.left_argmax)))
    return Side(c.proposals, c.accepted, tuple(-1 if t is None else t for t in c.targets),
                ranks, walk, c.top_k or 0, tuple(c.nonfinite_logit_slots or ()))


def _nan(p: Optional[float]) -> float:
    """A probability as History's float column holds it (nan: not recorded)."""
    return math.nan if p is None else p


class Growing:
    """A numpy array grown by appending rows: capacity doubles along the first axis, and a
    2-D array widens when a longer row comes (new cells hold `fill`)."""

    def __init__(self, dtype, fill, width: Optional[int] = None) -> None:
        self._fill = fill
        self._2d = width is not None
        self._data = np.full((64, width) if self._2d else (64,), fill, dtype=dtype)
        self.n = 0

    def append(self, row) -> None:
        if self.n == len(self._data):
            grown = np.full((2 * self.n, *self._data.shape[1:]), self._fill, dtype=self._data.dtype)
            grown[: self.n] = self._data
            self._data = grown
        if self._2d:
            row = np.asarray(row, dtype=self._data.dtype)
            if len(row) > self._data.shape[1]:
                wider = np.full((len(self._data), len(row)), self._fill, dtype=self._data.dtype)
                wider[:, : self._data.shape[1]] = self._data
                self._data = wider
            self._data[self.n, : len(row)] = row
        else:
            self._data[self.n] = row
        self.n += 1

    @property
    def values(self) -> np.ndarray:
        """The rows appended so far (a view: valid until the next append)."""
        return self._data[: self.n]

    @property
    def nbytes(self) -> int:
        return self._data.nbytes


class History:
    """Every completed round of one session: summary columns for all, full records for the
    last `keep`, older full records from `source(round)` (None when there is none)."""

    def __init__(self, keep: int, source: Optional[Callable[[int], Optional[RoundRecord]]] = None,
                 side: Callable[[RoundRecord], Side] = drafter_side) -> None:
        self.keep = max(int(keep), 1)
        self.source = source
        # Whose slots and count the columns hold: the drafter's, or (reference_side, for the
        # bench's --compare --slots) the reference's, so that aggregates.slot_stats counts a
        # reference with the very code that counts the drafter.
        self.side = side
        self._recent: OrderedDict[int, RoundRecord] = OrderedDict()
        self._fetched: OrderedDict[int, RoundRecord] = OrderedDict()  # a few read back
        # per round
        self.round = Growing(np.int64, -1)
        self.position = Growing(np.int64, -1)
        self.gamma = Growing(np.int32, 0)
        self.accepted = Growing(np.int32, 0)
        self.committed = Growing(np.int32, 0)  # tokens this round appended
        self.top_k = Growing(np.int32, 0)  # DFlash2: the selector's K (0: none or unknown)
        self.ms = Growing(np.float64, 0.0)  # the round's stage times added up
        # --compare: the reference's accepted count (-1: no reference this round) and whether
        # the two configurations diverged beyond the tolerance
        self.compare_accepted = Growing(np.int32, -1)
        self.compare_diverged = Growing(np.bool_, False)
        # per slot (the width grows with gamma)
        self.flags = Growing(np.uint8, 0, width=0)
        self.rank = Growing(np.int32, -1, width=0)
        self.proposal = Growing(np.int64, -1, width=0)
        self.pick = Growing(np.int64, -1, width=0)  # the selector's choice (DFlash2)
        self.argmax = Growing(np.int64, -1, width=0)  # the slot's plain argmax (DFlash2)
        self.target = Growing(np.int64, -1, width=0)  # gamma + 1 verify rows
        # the target's own probability of its top token at the slot's verify row (nan: ranks
        # off): where it is low the target was torn, and no drafter could be sure
        self.target_p1 = Growing(np.float32, np.nan, width=0)
        self.committed_ids = Growing(np.int64, -1, width=0)
        # per probed buffer (the width grows with the buffers seen)
        self.buffer_keys: list[BufferKey] = []
        self._buffer_index: dict[BufferKey, int] = {}
        self.headroom = Growing(np.float32, np.nan, width=0)  # fp16 headroom bits (nan: none)
        self.absmax = Growing(np.float32, np.nan, width=0)
        self.nonfinite = Growing(np.int64, -1, width=0)  # NaN + Inf elements (-1: not probed)
        # the text of every token above (search reads it)
        self.token_text: dict[int, str] = {}

    def __len__(self) -> int:
        return self.round.n

    # ---- adding ----------------------------------------------------------------------------

    def add(self, record: RoundRecord) -> None:
        """Append a completed round (its raw buffers are never kept)."""
        gamma = record.gamma
        side = self.side(record)
        self.round.append(record.round)
        self.position.append(record.position)
        self.gamma.append(gamma)
        self.accepted.append(side.accepted or 0)
        self.committed.append(len(record.committed_tokens))
        self.top_k.append(side.top_k)
        self.ms.append(sum(s.ms for s in record.stages))
        compare = record.compare
        self.compare_accepted.append(-1 if compare is None else compare.accepted)
        self.compare_diverged.append(compare is not None and compare.first_divergent is not None)

        flags = np.zeros(gamma, np.uint8)
        rank = np.full(gamma, -1, np.int32)
        target_p1 = np.full(gamma, np.nan, np.float32)
        pick = np.full(gamma, -1, np.int64)
        argmax = np.full(gamma, -1, np.int64)
        proposed = min(len(side.proposals), gamma)
        flags[:proposed] |= PROPOSED
        # from the verdict itself, not the ranks (a session may run with ranks off): slots up
        # to the first miss were judged, those before it accepted
        if side.accepted is not None:
            done = min(side.accepted, proposed)
            flags[:done] |= ACCEPTED
            flags[: min(done + 1, proposed)] |= JUDGED
        for slot, slot_rank, p1, in_k in side.ranks:
            if slot >= gamma:
                continue
            rank[slot], target_p1[slot] = slot_rank, p1
            if in_k is not None:
                flags[slot] |= IN_K_KNOWN | (IN_K if in_k else 0)
        for slot in side.nonfinite:
            if slot < gamma:
                flags[slot] |= NONFINITE
        for slot, chosen, best, left in side.walk:
            if slot < gamma:
                pick[slot], argmax[slot] = chosen, best
                if left:
                    flags[slot] |= LEFT_ARGMAX
        self.flags.append(flags)
        self.rank.append(rank)
        self.target_p1.append(target_p1)
        self.pick.append(pick)
        self.argmax.append(argmax)
        self.proposal.append(list(side.proposals))
        self.target.append(list(side.targets))
        self.committed_ids.append(list(record.committed_tokens))
        ids = {*(record.proposals or ()), *(record.target_tokens or ()), *record.committed_tokens}
        self.token_text.update((t, record.text(t)) for t in ids if t not in self.token_text)

        headroom = np.full(len(self.buffer_keys), np.nan, np.float32)
        absmax = np.full(len(self.buffer_keys), np.nan, np.float32)
        nonfinite = np.full(len(self.buffer_keys), -1, np.int64)
        for p in record.probes:
            i = self._buffer(p.stage, p.layer, p.name)
            if i >= len(headroom):  # a buffer first seen in this round
                headroom, absmax, nonfinite = (np.pad(a, (0, i + 1 - len(a)), constant_values=v)
                                               for a, v in ((headroom, np.nan), (absmax, np.nan),
                                                            (nonfinite, -1)))
            headroom[i] = np.nan if p.fp16_headroom_bits is None else p.fp16_headroom_bits
            absmax[i] = np.nan if p.absmax is None else p.absmax
            nonfinite[i] = p.nan + p.posinf + p.neginf
        self.headroom.append(headroom)
        self.absmax.append(absmax)
        self.nonfinite.append(nonfinite)

        self._recent[record.round] = record if record.raw is None else replace(record, raw=None)
        while len(self._recent) > self.keep:
            self._recent.popitem(last=False)

    def _buffer(self, stage: str, layer: Optional[int], name: str) -> int:
        key = (stage, layer, name)
        index = self._buffer_index.get(key)
        if index is None:
            index = self._buffer_index[key] = len(self.buffer_keys)
            self.buffer_keys.append(key)
        return index

    # ---- reading ---------------------------------------------------------------------------

    def index(self, round_number: int) -> Optional[int]:
        """The row of a round number (rows are in round order), or None."""
        rounds = self.round.values
        i = int(np.searchsorted(rounds, round_number))
        return i if i < len(rounds) and rounds[i] == round_number else None

    @property
    def first_round(self) -> Optional[int]:
        return int(self.round.values[0]) if len(self) else None

    @property
    def last_round(self) -> Optional[int]:
        return int(self.round.values[-1]) if len(self) else None

    def is_kept(self, round_number: int) -> bool:
        return round_number in self._recent

    def kept(self) -> list[RoundRecord]:
        """The full records in memory: the last `keep` rounds and the few read back."""
        return [*self._recent.values(), *self._fetched.values()]

    def record(self, round_number: int) -> Optional[RoundRecord]:
        """The full record of a completed round: kept, else read back from the source."""
        record = self._recent.get(round_number) or self._fetched.get(round_number)
        if record is not None or self.source is None or self.index(round_number) is None:
            return record
        record = self.source(round_number)
        if record is not None:
            self._fetched[round_number] = record
            while len(self._fetched) > FETCHED:
                self._fetched.popitem(last=False)
        return record

    @property
    def nbytes(self) -> int:
        """Bytes held by the summary columns (the full records are not counted)."""
        columns = [v for v in vars(self).values() if isinstance(v, Growing)]
        return sum(c.nbytes for c in columns)


