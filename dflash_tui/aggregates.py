"""Numbers over many rounds: pure functions of a History's summary columns.

The aggregates tab, the header and the history panel render these; tests check them against
the same numbers computed from the full records. Every function takes the rows to look at as
a `span` (rows start..stop of the history, in round order), so "all rounds so far", "up to
the round on screen" and "rounds 100-200" are the same code.

Definitions (docs/TUI.md repeats them for users):
  proposed      rounds that proposed the slot
  accepted      rounds whose verify accepted it: P(accepted >= s+1) = accepted / proposed
  reached       rounds where every earlier slot was accepted, so the slot was judged on the
                target's own prefix; acceptance = accepted / reached is the chance the slot
                survives once the drafter gets there: where it drops is where acceptance is lost
  rank          over reached slots only (later slots were drafted on a rejected prefix):
                rank 0 means the drafter's argmax was the target's token
  in K          DFlash2: the target's token was among the selector's K candidates (recall)
  near misses   over reached slots whose argmax missed (rank > 0): the share where the
                target's token ranked 2nd (rank 1), within the top 5 (rank <= 4), among the
                selector's K candidates (in K); cumulative, so 1 - the last is "beyond K"
  left argmax   the selector's walk picked something other than the slot's argmax; on a
                reached slot that was (walk_effect.helped_hurt)
                  helped   the pick was the target's token and the argmax was not
                  hurt     the argmax was the target's token and the pick was not
                  neutral  neither was
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from .history import ACCEPTED, IN_K, IN_K_KNOWN, JUDGED, LEFT_ARGMAX, NONFINITE, PROPOSED, \
    History
from .walk_effect import helped_hurt

# A miss where the target's own top token had less than this probability is the target's
# doubt more than the drafter's error (docs/DISTILL.md, "Is it the target or the drafter?").
TORN = 0.5


@dataclass(frozen=True)
class Span:
    """Rows start..stop (exclusive) of a history."""
    start: int
    stop: int

    def __len__(self) -> int:
        return max(self.stop - self.start, 0)

    @property
    def rows(self) -> slice:
        return slice(self.start, self.stop)


def every_round(history: History, upto: Optional[int] = None) -> Span:
    """All rows, or the first `upto`."""
    return Span(0, len(history) if upto is None else min(upto, len(history)))


def rounds_span(history: History, first: Optional[int], last: Optional[int]) -> Span:
    """The rows of rounds first..last (inclusive, by round number; None: that end open)."""
    rounds = history.round.values
    start = 0 if first is None else int(np.searchsorted(rounds, first, "left"))
    stop = len(rounds) if last is None else int(np.searchsorted(rounds, last, "right"))
    return Span(start, stop)


# ---- the run's headline numbers -------------------------------------------------------------

def mean_accepted(history: History, span: Span) -> Optional[float]:
    accepted = history.accepted.values[span.rows]
    return float(accepted.mean()) if len(accepted) else None


def generated_tokens(history: History, span: Span) -> int:
    return int(history.committed.values[span.rows].sum())


def tokens_per_second(history: History, span: Span) -> Optional[float]:
    """Committed tokens over the engine's own time for them (stage timings: pauses and
    screen time do not count)."""
    tokens = generated_tokens(history, span)
    seconds = float(history.ms.values[span.rows].sum()) / 1000
    return tokens / seconds if seconds > 0 and tokens else None


# ---- --compare: the reference configuration beside the drafter ----------------------------------

@dataclass(frozen=True)
class CompareTally:
    """The rounds of a span that ran a reference configuration (--compare)."""
    rounds: int
    first: int  # the first and last of them (round numbers)
    last: int
    drafter_mean: float  # mean accepted per round, the drafter (the decode)
    reference_mean: float  # and the reference, on the same rounds
    diverged: int  # rounds whose buffers parted beyond the tolerance
    first_diverged: Optional[int]  # the first of them (a round number)


def compare_tally(history: History, span: Span) -> Optional[CompareTally]:
    """None when no round of the span carries a reference's record."""
    reference = history.compare_accepted.values[span.rows]
    compared = reference >= 0
    if not compared.any():
        return None
    diverged = history.compare_diverged.values[span.rows] & compared
    rounds = history.round.values[span.rows]
    return CompareTally(
        rounds=int(compared.sum()), first=int(rounds[compared][0]), last=int(rounds[compared][-1]),
        drafter_mean=float(history.accepted.values[span.rows][compared].mean()),
        reference_mean=float(reference[compared].mean()),
        diverged=int(diverged.sum()),
        first_diverged=int(rounds[diverged][0]) if diverged.any() else None,
    )


# ---- per slot ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class SlotStats:
    slot: int
    proposed: int
    accepted: int
    reached: int
    rank0: int  # reached slots with rank 0
    ranked: int  # reached slots with a rank
    rank_mean: Optional[float]
    rank_median: Optional[float]
    in_k: int
    in_k_known: int
    left: int  # the walk left the argmax here (reached or not)
    helped: int
    hurt: int
    neutral: int
    missed: int = 0  # reached, rejected, and the target's own top probability known
    torn: int = 0  # of those, the target's top token had p < TORN: no drafter could be sure
    # where the drafter's argmax was wrong (reached, rank > 0): how far down the true token was
    off_rank_median: Optional[float] = None
    # those misses (`off_ranked`) by how near: 2nd (rank 1), top 5 (rank 1-4), and, where the
    # round had a selector (`off_in_k_known`), among its K candidates
    off_ranked: int = 0
    off_second: int = 0
    off_top5: int = 0
    off_in_k: int = 0
    off_in_k_known: int = 0
    top_k: Optional[int] = None  # the selector's K in the span's rounds (the largest; None: none)
    # Slots whose logits held a NaN or Inf (a drafter or reference that overflowed): their
    # rank is no rank (rank_of puts the target's token last, vocabulary - 1, a number that
    # reads like a real one) and their candidates are noise, so they are left out of the
    # rank and K counts above and counted here: proposed, of them reached, and of them
    # with a selector's candidates (DFlash2)
    nonfinite: int = 0
    nonfinite_reached: int = 0
    nonfinite_in_k_known: int = 0

    @property
    def ranks_nonfinite(self) -> bool:
        """Every reached slot with a rank had non-finite logits: argmax, mean, off and the
        near-miss cells read n/f, not a dash (unreached) nor a number."""
        return self.ranked == 0 and self.nonfinite_reached > 0

    @property
    def in_k_nonfinite(self) -> bool:
        """As ranks_nonfinite, for the in K cell."""
        return self.in_k_known == 0 and self.nonfinite_in_k_known > 0

    @property
    def at_least(self) -> Optional[float]:
        """P(accepted >= slot + 1) over rounds that proposed the slot."""
        return _ratio(self.accepted, self.proposed)

    @property
    def acceptance(self) -> Optional[float]:
        """P(accepted | every earlier slot accepted)."""
        return _ratio(self.accepted, self.reached)

    @property
    def rank0_rate(self) -> Optional[float]:
        return _ratio(self.rank0, self.ranked)

    @property
    def torn_rate(self) -> Optional[float]:
        """Of the misses here, the share where the target itself was torn."""
        return _ratio(self.torn, self.missed)

    @property
    def recall(self) -> Optional[float]:
        return _ratio(self.in_k, self.in_k_known)

    @property
    def off_second_rate(self) -> Optional[float]:
        """Of the argmax's misses on reached slots, the share where the target's token was 2nd."""
        return _ratio(self.off_second, self.off_ranked)

    @property
    def off_top5_rate(self) -> Optional[float]:
        return _ratio(self.off_top5, self.off_ranked)

    @property
    def off_in_k_rate(self) -> Optional[float]:
        """Of those misses in rounds with a selector, the share its K candidates held."""
        return _ratio(self.off_in_k, self.off_in_k_known)

    @property
    def off_beyond_k_rate(self) -> Optional[float]:
        return _ratio(self.off_in_k_known - self.off_in_k, self.off_in_k_known)


def slot_stats(history: History, span: Span, slots: Optional[int] = None) -> list[SlotStats]:
    """One SlotStats per slot position (every slot any round in the span proposed, or the
    first `slots`)."""
    flags = history.flags.values[span.rows]
    width = flags.shape[1] if len(flags) else 0
    if len(flags):
        proposed_any = (flags & PROPOSED).any(axis=0)
        width = int(np.nonzero(proposed_any)[0].max()) + 1 if proposed_any.any() else 0
    if slots is not None:
        width = min(width, slots)
    rank = history.rank.values[span.rows]
    pick, argmax = history.pick.values[span.rows], history.argmax.values[span.rows]
    target = history.target.values[span.rows]
    target_p1 = history.target_p1.values[span.rows]
    top_k = int(history.top_k.values[span.rows].max()) if len(span) else 0
    out = []
    for s in range(width):
        f = flags[:, s]
        bad = (f & NONFINITE) > 0  # its rank and candidates are noise (SlotStats.nonfinite)
        reached = (f & JUDGED) > 0
        ranked_rows = reached & ~bad
        p1 = target_p1[:, s]  # as wide as flags: History appends both rows per round
        missed = reached & ((f & ACCEPTED) == 0) & ~np.isnan(p1)
        ranks = rank[ranked_rows, s]
        ranks = ranks[ranks >= 0]
        off = ranked_rows & (rank[:, s] > 0)  # the argmax missed: how near was the target's token
        off_known = off & ((f & IN_K_KNOWN) > 0)
        left = (f & LEFT_ARGMAX) > 0
        judged_left = left & reached
        truth = target[:, s] if s < target.shape[1] else np.full(len(f), -1)
        helped, hurt = helped_hurt(pick[:, s], argmax[:, s], truth)
        helped, hurt = helped & judged_left, hurt & judged_left
        out.append(SlotStats(
            slot=s,
            proposed=int(((f & PROPOSED) > 0).sum()),
            accepted=int(((f & ACCEPTED) > 0).sum()),
            reached=int(reached.sum()),
            rank0=int((ranks == 0).sum()), ranked=len(ranks),
            rank_mean=float(ranks.mean()) if len(ranks) else None,
            rank_median=float(np.median(ranks)) if len(ranks) else None,
            in_k=int((((f & IN_K) > 0) & ~bad).sum()),
            in_k_known=int((((f & IN_K_KNOWN) > 0) & ~bad).sum()),
            left=int(left.sum()), helped=int(helped.sum()), hurt=int(hurt.sum()),
            neutral=int((judged_left & ~helped & ~hurt).sum()),
            missed=int(missed.sum()), torn=int((missed & (p1 < TORN)).sum()),
            off_rank_median=float(np.median(ranks[ranks > 0])) if (ranks > 0).any() else None,
            off_ranked=int(off.sum()), off_second=int((ranks == 1).sum()),
            off_top5=int(((ranks > 0) & (ranks <= 4)).sum()),
            off_in_k=int((off_known & ((f & IN_K) > 0)).sum()), off_in_k_known=int(off_known.sum()),
            top_k=top_k or None,
            nonfinite=int((bad & ((f & PROPOSED) > 0)).sum()),
            nonfinite_reached=int((bad & reached).sum()),
            nonfinite_in_k_known=int((bad & ((f & IN_K_KNOWN) > 0)).sum()),
        ))
    return out


def accepted_at_least(history: History, span: Span, slots: int) -> list[tuple[int, int]]:
    """Per slot s < slots: (rounds that accepted it, rounds that proposed it), as in
    slot_stats but only these two counts (the history panel redraws them often)."""
    flags = history.flags.values[span.rows][:, :slots]
    accepted = ((flags & ACCEPTED) > 0).sum(axis=0).tolist()
    proposed = ((flags & PROPOSED) > 0).sum(axis=0).tolist()
    return list(zip(accepted, proposed))


# ---- per buffer -------------------------------------------------------------------------------

@dataclass(frozen=True)
class BufferStats:
    stage: str
    layer: Optional[int]
    name: str
    rounds: int  # rounds that probed the buffer
    min_headroom: Optional[float]  # fp16 headroom bits, lowest over the rounds
    min_headroom_round: Optional[int]
    max_absmax: Optional[float]
    nonfinite_rounds: int  # rounds in which it held a NaN or Inf
    nonfinite_values: int  # NaN + Inf elements over all those rounds
    first_nonfinite_round: Optional[int]


def buffer_stats(history: History, span: Span) -> list[BufferStats]:
    """One BufferStats per buffer probed in the span, in the order buffers were first seen
    (pipeline order)."""
    headroom = history.headroom.values[span.rows]
    absmax = history.absmax.values[span.rows]
    nonfinite = history.nonfinite.values[span.rows]
    rounds = history.round.values[span.rows]
    if not len(rounds):
        return []
    # every buffer at once (a column each): the tab redraws these while a run goes on
    probed = (nonfinite >= 0).sum(axis=0)
    has_room = ~np.isnan(headroom)
    low = np.argmin(np.where(has_room, headroom, np.inf), axis=0)
    has_absmax = ~np.isnan(absmax)
    big = np.where(has_absmax, absmax, -np.inf).max(axis=0)
    bad = nonfinite > 0
    first_bad = np.argmax(bad, axis=0)
    bad_values = np.where(bad, nonfinite, 0).sum(axis=0)
    out = []
    for i, (stage, layer, name) in enumerate(history.buffer_keys[: nonfinite.shape[1]]):
        if not probed[i]:
            continue
        room = has_room[:, i].any()
        any_bad = bad[:, i].any()
        out.append(BufferStats(
            stage=stage, layer=layer, name=name, rounds=int(probed[i]),
            min_headroom=float(headroom[low[i], i]) if room else None,
            min_headroom_round=int(rounds[low[i]]) if room else None,
            max_absmax=float(big[i]) if has_absmax[:, i].any() else None,
            nonfinite_rounds=int(bad[:, i].sum()), nonfinite_values=int(bad_values[i]),
            first_nonfinite_round=int(rounds[first_bad[i]]) if any_bad else None,
        ))
    return out


def min_headroom_per_round(history: History, span: Span) -> np.ndarray:
    """The lowest fp16 headroom of any buffer, per round (nan where none was measured)."""
    headroom = history.headroom.values[span.rows]
    out = np.full(len(headroom), np.nan)
    if headroom.size:
        has = ~np.isnan(headroom).all(axis=1)
        out[has] = np.nanmin(headroom[has], axis=1)
    return out


# ---- against the context position ---------------------------------------------------------

@dataclass(frozen=True)
class PositionBin:
    start: int  # anchor positions start..stop-1
    stop: int
    rounds: int
    mean_accepted: Optional[float]
    mean_gamma: Optional[float]


def acceptance_by_position(history: History, span: Span, bins: int = 8) -> list[PositionBin]:
    """Mean accepted per round in `bins` equal ranges of the anchor's position."""
    position = history.position.values[span.rows]
    if not len(position):
        return []
    accepted = history.accepted.values[span.rows]
    gamma = history.gamma.values[span.rows]
    lo, hi = int(position.min()), int(position.max()) + 1
    bins = max(1, min(bins, hi - lo, len(position)))
    edges = np.linspace(lo, hi, bins + 1).round().astype(np.int64)
    which = np.clip(np.searchsorted(edges, position, "right") - 1, 0, bins - 1)
    out = []
    for b in range(bins):
        inside = which == b
        n = int(inside.sum())
        out.append(PositionBin(
            start=int(edges[b]), stop=int(edges[b + 1]), rounds=n,
            mean_accepted=float(accepted[inside].mean()) if n else None,
            mean_gamma=float(gamma[inside].mean()) if n else None,
        ))
    return out


def _ratio(part: int, whole: int) -> Optional[float]:
    return part / whole if whole else None
