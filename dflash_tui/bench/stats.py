"""The bench's numbers, computed from the engine's own round records (docs/BENCH.md).

Everything deterministic here is a ratio of integer counts taken from RoundRecords
(gamma, accepted, committed tokens), pooled over every round of every prompt in a workload:
the same records give the same digits on every run. Speed is wall-clock time and is kept
apart (decode seconds, tokens per second, speed-up) so no one mistakes one for the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from ..engine.baseline import BaselineRun, Divergence
from ..engine.records import RoundRecord, STAGE_ORDER, nonfinite_side
from .prompts import ALL, Prompt  # noqa: F401 (ALL, the pooled row: imported from here)


@dataclass(frozen=True)
class RoundStat:
    """What the bench keeps of one RoundRecord."""

    gamma: int  # proposals this round (shortened at the end of the token budget)
    accepted: int
    committed: int  # tokens the round appended (accepted + bonus, cut at EOS / budget)
    stage_ms: tuple[float, ...]  # per stage, in STAGE_ORDER (the reference's time is not in them)
    # --compare: the reference's accepted count, and where it first diverged (or None)
    compare_accepted: Optional[int] = None
    compare_divergent: Optional[str] = None
    compare_ms: Optional[float] = None  # the reference's own time this round
    compare_left_out: tuple = ()  # records.LeftOut: buffers its drift could not compare
    # how many proposal slots' drafter logits held a NaN or Inf: with probes off (the
    # bench's way), the only sign of an overflowed drafter besides nothing accepted
    nonfinite_logit_count: int = 0
    # --compare: the same count of the reference's logits, and the first buffer non-finite
    # on one side only (`draft layer 0 ffn_out on the reference side only`), or None
    compare_nonfinite_logit_count: int = 0
    compare_nonfinite: Optional[str] = None

    @property
    def rejected(self) -> bool:
        return self.accepted < self.gamma


def round_stat(record: RoundRecord) -> RoundStat:
    ms = record.timings_ms
    c, first = record.compare, record.compare and record.compare.first_divergent
    bad = c.first_nonfinite if c is not None else None
    return RoundStat(gamma=record.gamma, accepted=int(record.accepted),
                     committed=len(record.committed_tokens),
                     stage_ms=tuple(ms.get(s, 0.0) for s in STAGE_ORDER),
                     compare_accepted=None if c is None else c.accepted,
                     compare_divergent=first.where if first else None,
                     compare_ms=None if c is None else c.ms,
                     compare_left_out=() if c is None else c.left_out,
                     nonfinite_logit_count=len(record.nonfinite_logit_slots or ()),
                     compare_nonfinite_logit_count=0 if c is None else
                     len(c.nonfinite_logit_slots or ()),
                     compare_nonfinite=None if bad is None else
                     f"{bad.where} {nonfinite_side(bad.nonfinite)}")


@dataclass(frozen=True)
class SpecRun:
    """One prompt decoded speculatively at one block."""

    prompt: Prompt
    block: int
    tokens: tuple[int, ...]
    rounds: tuple[RoundStat, ...]
    prefill_s: float
    decode_s: float  # the rounds, on the wall clock
    finish_reason: str
    checked: bool  # compared against the target's greedy decode (temperature 0 only)
    divergence: Optional[Divergence] = None

    @property
    def decode_tokens(self) -> int:
        """Tokens the rounds committed (the first generated token comes from the prefill)."""
        return sum(r.committed for r in self.rounds)

    @property
    def nonfinite_logit_rounds(self) -> int:
        return nonfinite_logit_rounds(self.rounds)


def nonfinite_logit_rounds(rounds: Sequence[RoundStat]) -> int:
    """Rounds in which the drafter's logits held a NaN or Inf in some slot."""
    return sum(1 for r in rounds if r.nonfinite_logit_count)


@dataclass(frozen=True)
class TargetRun:
    """One prompt decoded by the target alone."""

    prompt: Prompt
    run: BaselineRun


@dataclass(frozen=True)
class Position:
    """Position i over a set of rounds: i counts accepted proposals (1..block), it is not a
    slot; a round reaches it by accepting slot i-1 (slots count from 0, as in tab 4) and
    every slot before it."""

    position: int
    proposed: int  # rounds whose gamma was i or more (proposed slot i-1)
    reached: int  # ... whose first i proposals were all accepted
    eligible: int  # ... whose first i-1 proposals were all accepted

    @property
    def acceptance(self) -> Optional[float]:
        """P(accepted >= i): the share of rounds that proposed slot i-1 and accepted it and
        everything before it."""
        return self.reached / self.proposed if self.proposed else None

    @property
    def conditional(self) -> Optional[float]:
        """P(accepted >= i | accepted >= i-1): slot i-1's own survival rate."""
        return self.reached / self.eligible if self.eligible else None


def positions(rounds: Sequence[RoundStat], block: int) -> tuple[Position, ...]:
    out = []
    for i in range(1, block + 1):
        proposed = [r for r in rounds if r.gamma >= i]
        out.append(Position(
            position=i, proposed=len(proposed),
            reached=sum(1 for r in proposed if r.accepted >= i),
            eligible=sum(1 for r in proposed if r.accepted >= i - 1),
        ))
    return tuple(out)


def _ratio(a: float, b: float) -> Optional[float]:
    return a / b if b else None


@dataclass(frozen=True)
class Cell:
    """One workload at one block: every number in the tables and the CSV row."""

    workload: str
    block: int
    prompts: int
    rounds: int
    tokens: int  # generated tokens, all prompts
    accepted: int  # accepted proposals, all rounds
    rollbacks: int  # rounds with at least one rejected proposal
    positions: tuple[Position, ...]
    decode_tokens: int
    decode_s: float
    target_decode_tokens: int
    target_decode_s: float
    stage_ms: tuple[float, ...]  # mean per round, STAGE_ORDER
    checked: int  # prompts compared against the target's greedy decode
    diverged: int
    # --compare: the reference's own time, mean per round: part of decode_s (the wall clock
    # of the rounds), in none of stage_ms; None without a reference
    compare_ms: Optional[float] = None
    nonfinite_logit_rounds: int = 0  # rounds whose drafter logits held a NaN or Inf

    @property
    def mean_accepted(self) -> Optional[float]:
        return _ratio(self.accepted, self.rounds)

    @property
    def tau(self) -> Optional[float]:
        mean = self.mean_accepted
        return None if mean is None else mean + 1.0

    @property
    def rollback_rate(self) -> Optional[float]:
        return _ratio(self.rollbacks, self.rounds)

    @property
    def tokens_per_round(self) -> Optional[float]:
        return _ratio(self.decode_tokens, self.rounds)

    @property
    def tokens_per_s(self) -> Optional[float]:
        return _ratio(self.decode_tokens, self.decode_s)

    @property
    def target_tokens_per_s(self) -> Optional[float]:
        return _ratio(self.target_decode_tokens, self.target_decode_s)

    @property
    def speedup(self) -> Optional[float]:
        spec, alone = self.tokens_per_s, self.target_tokens_per_s
        return None if spec is None or not alone else spec / alone

    @property
    def round_ms(self) -> Optional[float]:
        """Wall-clock milliseconds per round: context, draft, select, verify and commit."""
        return None if not self.rounds else 1000 * self.decode_s / self.rounds

    @property
    def target_ms_per_token(self) -> Optional[float]:
        return None if not self.target_decode_tokens else 1000 * self.target_decode_s / self.target_decode_tokens

    @property
    def break_even(self) -> Optional[float]:
        """Accepted proposals per round at which this block decodes as fast as the target
        alone: a round yields accepted + 1 tokens in round_ms, the target one token in
        target_ms_per_token, so they meet at round_ms / target_ms_per_token - 1. Measured
        at this block's own round cost, which hardly depends on how many were accepted (a
        rollback is a trim)."""
        round_ms, token_ms = self.round_ms, self.target_ms_per_token
        return None if round_ms is None or not token_ms else round_ms / token_ms - 1

    @property
    def conditional_range(self) -> Optional[tuple[float, float]]:
        values = [p.conditional for p in self.positions if p.conditional is not None]
        return (min(values), max(values)) if values else None


def cell(workload: str, block: int, runs: Sequence[SpecRun],
         targets: Sequence[TargetRun]) -> Cell:
    """Pool every round of `runs` (one block) and the target-alone runs of the same prompts."""
    rounds = [r for run in runs for r in run.rounds]
    ids = {run.prompt.id for run in runs}
    alone = [t.run for t in targets if t.prompt.id in ids]
    n = len(rounds)
    stage_ms = tuple(sum(r.stage_ms[i] for r in rounds) / n if n else 0.0
                     for i in range(len(STAGE_ORDER)))
    return Cell(
        workload=workload, block=block, prompts=len(runs), rounds=n,
        tokens=sum(len(run.tokens) for run in runs),
        accepted=sum(r.accepted for r in rounds),
        rollbacks=sum(1 for r in rounds if r.rejected),
        positions=positions(rounds, block),
        decode_tokens=sum(run.decode_tokens for run in runs),
        decode_s=sum(run.decode_s for run in runs),
        target_decode_tokens=sum(a.decode_tokens for a in alone),
        target_decode_s=sum(a.decode_s for a in alone),
        stage_ms=stage_ms,
        checked=sum(1 for run in runs if run.checked),
        diverged=sum(1 for run in runs if run.divergence is not None),
        compare_ms=mean_compare_ms(rounds),
        nonfinite_logit_rounds=nonfinite_logit_rounds(rounds),
    )


def mean_compare_ms(rounds: Sequence[RoundStat]) -> Optional[float]:
    """The reference's time per round (None: no reference ran)."""
    timed = [r.compare_ms for r in rounds if r.compare_ms is not None]
    return sum(timed) / len(timed) if timed else None


def fastest(cells: Sequence[Cell]) -> dict[str, Cell]:
    """Per workload, the block with the most tokens per second."""
    best: dict[str, Cell] = {}
    for c in cells:
        if c.tokens_per_s is not None and (c.workload not in best
                                           or c.tokens_per_s > best[c.workload].tokens_per_s):
            best[c.workload] = c
    return best
