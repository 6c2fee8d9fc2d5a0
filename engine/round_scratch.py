"""The round in flight: what each stage hands the next (queued on the device, then read
back), and RoundScratch, which holds them and builds the round's record from their parts.

engine/session.py runs the stages; these are their typed outputs (docs/ARCHITECTURE.md, "A
round: the state machine"). They hold MLX arrays and never leave the engine: only the
record RoundScratch.record builds (records.py, plain data) does.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Optional

import mlx.core as mx
import numpy as np

from .probes import first_nonfinite
from .records import (
    Commitment, DraftLogits, EngineState, ProbeRow, RoundRecord, Selection, StageRecord, Verdict,
)


@dataclass(frozen=True)
class Drafted:
    """The draft stage's output, on the device."""

    hidden: mx.array  # final-normed block rows 1..gamma [gamma, H]
    logits: mx.array  # [gamma, V]
    hproj: Optional[mx.array]  # DFlash2: the selector's projection of hidden [gamma, r]
    nonfinite: mx.array  # [gamma] bool: the slot's logits hold a NaN or Inf (nonfinite_rows)

    def arrays(self) -> list[mx.array]:
        return [self.hidden, self.logits, self.nonfinite,
                *([] if self.hproj is None else [self.hproj])]

    def part(self) -> DraftLogits:
        """The draft stage's part of the record, once `nonfinite` is computed."""
        return DraftLogits(tuple(np.flatnonzero(np.array(self.nonfinite)).tolist()))


@dataclass(frozen=True)
class Proposal:
    """The select stage on the device: the proposals verify reads, and what the record needs.
    Proposals decided on the host (sampling, forced) come with their host values."""

    tokens: mx.array  # [gamma] int32: the proposals to verify
    lattice: tuple[mx.array, ...] = ()  # DFlash2: selector.lattice_arrays
    picks: Optional[mx.array | list[int]] = None  # DFlash2: the walk's candidate index per slot
    q: Optional[np.ndarray] = None  # sampling rows (T > 0): [gamma, V], or [gamma, K] over candidates
    forced: Optional[tuple[int, ...]] = None  # SessionOptions.proposer's tokens

    def arrays(self) -> list[mx.array]:
        """What `_selection` reads back."""
        device = [self.tokens, *self.lattice, self.picks]
        return [a for a in device if isinstance(a, mx.array)]


@dataclass(frozen=True)
class Selected:
    """The select stage's output read back: the proposals and what they were drawn from."""

    part: Selection
    q: Optional[np.ndarray]  # sampling rows (T > 0): [gamma, V], or [gamma, K] over candidates
    candidates: Optional[np.ndarray]  # DFlash2: the top-K token ids per slot [gamma, K]


@dataclass(frozen=True)
class Verification:
    """The verify stage on the device: the target's forward over [anchor, proposals]."""

    logits: mx.array  # [gamma+1, V]
    capture: mx.array  # the target's context rows [1, gamma+1, n*H]
    argmax: mx.array  # [gamma+1]
    ranks: tuple[mx.array, ...]  # ranks.rank_arrays (empty when SessionOptions.ranks is off)
    saved: Optional[list]  # non-trimmable caches' state before verify (None: all trim)
    sampling: bool  # temperature > 0: the verdict reads the logits back

    def arrays(self) -> list[mx.array]:
        """What `_verdict` reads back (the capture stays on the device for the next round)."""
        return [*self.verdict_arrays(), *self.ranks]

    def verdict_arrays(self) -> list[mx.array]:
        """What the accepted prefix is decided from (the ranks are for the record only)."""
        return [self.argmax, *([self.logits] if self.sampling else [])]


@dataclass(frozen=True)
class Verified:
    """The verify stage's output read back: the verdict and what commit needs to settle it."""

    part: Verdict
    capture: mx.array  # the target's context rows of [anchor, proposals] [1, gamma+1, n*H]
    saved: Optional[list]  # non-trimmable caches' state before verify (None: all trim)


@dataclass
class RoundScratch:
    """The round in flight: where it stands, what each stage handed on, and what its record
    gathers (stage timings, probe rows, raw buffers, token texts)."""

    index: int
    position: int  # the anchor's absolute position
    anchor: int
    gamma: int
    state_before: EngineState
    text_before: str  # the committed text when the round began
    token_text: dict[int, str]
    stages: list[StageRecord] = field(default_factory=list)
    probes: list[ProbeRow] = field(default_factory=list)
    raw: Optional[dict[str, np.ndarray]] = None
    drafted: Optional[Drafted] = None
    draft_logits: Optional[DraftLogits] = None
    proposal: Optional[Proposal] = None
    selected: Optional[Selected] = None
    verification: Optional[Verification] = None
    verified: Optional[Verified] = None
    committed: Optional[Commitment] = None

    def record(self) -> RoundRecord:
        """The round's record so far: the header, then each stage's part spread over its fields."""
        parts = (
            self.draft_logits,
            self.selected.part if self.selected else None,
            self.verified.part if self.verified else None,
            self.committed,
        )
        filled = {f.name: getattr(p, f.name) for p in parts if p is not None for f in fields(p)}
        probes = tuple(self.probes)
        return RoundRecord(
            round=self.index, position=self.position, anchor=self.anchor, gamma=self.gamma,
            state_before=self.state_before, state_after=self.stages[-1].after,
            stages=tuple(self.stages), probes=probes, first_nonfinite=first_nonfinite(probes),
            token_text=dict(self.token_text), raw=self.raw,
            **{"committed_text": self.text_before, **filled},
        )
