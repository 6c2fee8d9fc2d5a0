"""Plain-data records: the only things that leave the engine.

Frozen dataclasses of Python scalars, strings, tuples and (for raw buffers only) numpy
arrays. Panels, snapshots, traces and the bench read these and nothing else. This module
imports no MLX, so replay can rebuild records from a trace with no model at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Optional


@dataclass(frozen=True)
class ProbeRow:
    stage: str
    layer: Optional[int]
    name: str
    shape: tuple
    dtype: str
    nan: int
    posinf: int
    neginf: int
    min: Optional[float]
    max: Optional[float]
    absmax: Optional[float]
    mean: Optional[float]
    rms: Optional[float]
    fp16_headroom_bits: Optional[float]

    @property
    def nonfinite(self) -> bool:
        return self.nan + self.posinf + self.neginf > 0

    @property
    def where(self) -> str:
        layer = "" if self.layer is None else f" layer {self.layer}"
        return f"{self.stage}{layer} {self.name}"


@dataclass(frozen=True)
class EngineState:
    """The bookkeeping between target and drafter at one instant (docs/ARCHITECTURE.md,
    "A round: the state machine")."""

    cursor: int  # positions whose context K/V the drafter holds
    capture_base: int  # position of the first captured row not yet written to the drafter
    capture_rows: int
    target_offset: int  # tokens in the target's cache
    committed: int  # prompt + generated tokens
    ring_window: Optional[int] = None  # sliding drafter layers: rows kept (window - 1)
    ring_occupancy: Optional[int] = None

    @property
    def anchor_position(self) -> int:
        return self.committed - 1

    @property
    def lag(self) -> int:
        """How far the drafter's context trails the anchor (closed by the next context write)."""
        return self.anchor_position - self.cursor


@dataclass(frozen=True)
class Rollback:
    kind: str = "none"  # "none" | "trim" | "replay"
    rows: int = 0


@dataclass(frozen=True)
class TopToken:
    token: int
    logit: float
    prob: float


@dataclass(frozen=True)
class SlotRank:
    slot: int  # 0-based proposal slot; block row slot + 1
    proposal: int
    target: int  # the target's argmax at block row `slot`
    rank: int  # drafter logits in this slot strictly above the target token's
    p_target: float  # the drafter's probability of the target token
    in_candidates: Optional[bool]  # DFlash2: target token among the selector's top-K
    after_rejection: bool  # conditioned on a rejected prefix
    accepted: bool
    drafter_top: tuple[TopToken, ...] = ()
    target_top: tuple[TopToken, ...] = ()

    @property
    def target_p1(self) -> Optional[float]:
        """The target's own probability of its top token at this verify row (None: not
        recorded): where it is low the target was torn, and no drafter could be sure."""
        return self.target_top[0].prob if self.target_top else None


@dataclass(frozen=True)
class SelectorSlot:
    slot: int
    candidates: tuple[int, ...]
    unary: tuple[float, ...]
    edge: tuple[float, ...]  # edge from the chosen predecessor to each candidate
    score: tuple[float, ...]
    chosen: int  # token id picked by the walk
    argmax: int  # token id with the best unary score (the plain argmax)
    chosen_index: int
    argmax_index: int
    predecessor: int  # token id the walk came from (the anchor for slot 0)
    lattice: tuple[tuple[float, ...], ...]  # total score, rows: previous slot's candidates
    q: Optional[tuple[float, ...]] = None  # sampling row over the K candidates (T > 0)

    @property
    def off_argmax(self) -> bool:
        return self.chosen != self.argmax


@dataclass(frozen=True)
class Selector:
    top_k: int
    slots: tuple[SelectorSlot, ...]

    @property
    def off_argmax_slots(self) -> tuple[int, ...]:
        return tuple(s.slot for s in self.slots if s.off_argmax)


@dataclass(frozen=True)
class DraftLogits:
    """What the draft stage adds to its round's record: the proposal slots whose drafter
    logits hold a NaN or an infinity. Counted every round, probes on or off: a drafter that
    overflowed otherwise shows only as nothing accepted where no probe runs (the bench)."""

    nonfinite_logit_slots: tuple[int, ...] = ()


@dataclass(frozen=True)
class Selection:
    """What the select stage adds to its round's record."""

    proposals: tuple[int, ...]
    selector: Optional[Selector] = None  # DFlash2's walk; None for DFlash


@dataclass(frozen=True)
class Verdict:
    """What the verify stage adds to its round's record."""

    target_tokens: tuple[int, ...]  # the target's argmax at each verify row
    accepted: int
    bonus: int
    ranks: tuple[SlotRank, ...] = ()


@dataclass(frozen=True)
class BufferDrift:
    """One probed buffer of the compare lab, primary against reference, from both sides'
    tensors: max |primary - reference| over the values finite on both sides, and that over
    the reference buffer's absmax (None when it is no number: a value finite on one side
    only, or a difference from an all-zero reference); and rms(primary - reference) over
    the reference's rms, which a few huge values do not swamp (engine/drift.py)."""

    stage: str
    layer: Optional[int]
    buffer: str
    max_abs_diff: float
    rel_err: Optional[float]
    nonfinite: Optional[str] = None  # the side with non-finite values the other lacks: "primary", "reference" or "both"
    rms_rel_err: Optional[float] = None  # None: no number, or a recording made before it


def nonfinite_side(side: str) -> str:
    """BufferDrift.nonfinite in words, one vocabulary for every line that names the side
    (probe, bench, a divergence's `why`): the primary is the drafter to the user."""
    return {"primary": "on the drafter side only", "reference": "on the reference side only",
            "both": "on each side, where the other is finite"}.get(side, side)


@dataclass(frozen=True)
class Divergent:
    """Where two configurations part: the first buffer in pipeline order whose relative
    error exceeds the tolerance, or that is non-finite on one side only."""

    stage: str
    layer: Optional[int]
    buffer: str
    rel_err: Optional[float]  # None: no number (BufferDrift)
    nonfinite: Optional[str] = None  # as BufferDrift's

    @classmethod
    def at(cls, b: BufferDrift) -> "Divergent":
        return cls(b.stage, b.layer, b.buffer, b.rel_err, b.nonfinite)

    @property
    def where(self) -> str:
        return _where(self.stage, self.layer, self.buffer)

    @property
    def why(self) -> str:
        if self.nonfinite is not None:
            return f"non-finite {nonfinite_side(self.nonfinite)}"
        if self.rel_err is None:
            return "differs from an all-zero reference"
        return f"rel err {self.rel_err:.3g}"


@dataclass(frozen=True)
class Compare:
    """The compare lab's reference configuration in one round (docs/COMPARE.md): run on
    exactly the primary's inputs, never verified for the decode."""

    spec: str  # --compare SPEC as given
    proposals: tuple[int, ...]  # its own selector walk (argmax for DFlash)
    accepted: int  # how many of them the target accepts at temperature 0
    ranks: tuple[int, ...]  # per slot: its logits strictly above the target's token
    first_divergent: Optional[Divergent] = None
    buffers: tuple[BufferDrift, ...] = ()  # in pipeline order
    tolerance: float = 0.01
    # The target verified the reference's proposals beyond the primary's verify (its
    # tokens past the primary's first miss were needed): one more, shorter target forward.
    reverified: bool = False
    # Per slot, the reference's side of what the primary's slots record (SlotRank,
    # SelectorSlot), so its acceptance can be taken apart as the drafter's is:
    # the target's token after the anchor and the reference's OWN proposals before the slot
    # (what `ranks` is counted against); None where the target never saw that prefix (past
    # where the two sides' proposals part, in a round the reference had missed by then)
    targets: tuple[Optional[int], ...] = ()
    argmax: tuple[int, ...] = ()  # DFlash2: the slot's best-unary candidate (empty for DFlash)
    left_argmax: tuple[bool, ...] = ()  # DFlash2: its selector's walk picked another token
    in_candidates: tuple[Optional[bool], ...] = ()  # DFlash2: `targets` among its K candidates
    # Buffers of the compared stages that could not be compared: another shape on each side,
    # or present on one side only (a reference with another intermediate size, fewer layers)
    left_out: tuple[LeftOut, ...] = ()
    # The reference's own time this round, host and device (its stages' work and the wait
    # for it, a second verify): kept out of the primary's stage times
    ms: float = 0.0
    # The proposal slots whose reference logits hold a NaN or Inf, as the drafter's own
    # (RoundRecord.nonfinite_logit_slots): a reference that overflowed (float16) proposes
    # garbage and accepts nothing. None: a recording made before the field.
    nonfinite_logit_slots: Optional[tuple[int, ...]] = None
    # DFlash2: its selector's K, which a reference checkpoint may set apart from the
    # drafter's; what its `in_candidates` counts against. None: DFlash, or a recording made
    # before the field.
    top_k: Optional[int] = None

    @property
    def first_nonfinite(self) -> Optional[Divergent]:
        """The first buffer (pipeline order) non-finite on one side only: where a
        configuration overflowed. A first divergence at rounding level (a bfloat16 drafter
        against a float16 reference, about 1% everywhere) comes before it and would hide
        it, so it is named on its own."""
        return self.first_nonfinite_on(("primary", "reference", "both"))

    def first_nonfinite_on(self, sides: tuple[str, ...]) -> Optional[Divergent]:
        """first_nonfinite among the buffers whose non-finite side is one of `sides` (the
        breakpoint's reference stop: ("reference", "both"))."""
        b = next((b for b in self.buffers if b.nonfinite in sides), None)
        return None if b is None else Divergent.at(b)

    @property
    def nonfinite_after_first(self) -> Optional[Divergent]:
        """first_nonfinite where the first divergent buffer is another one (where it is the
        same, the divergence already says so)."""
        bad, first = self.first_nonfinite, self.first_divergent
        if bad is None or (first is not None and first.where == bad.where):
            return None
        return bad

    def judged_at(self, tolerance: float) -> "Compare":
        """The round judged again at another tolerance (replay and export --compare-tol):
        its first divergent buffer found anew from the recorded relative errors, so the
        same as a live run at that tolerance found."""
        return replace(self, tolerance=tolerance,
                       first_divergent=first_divergent(self.buffers, tolerance))


@dataclass(frozen=True)
class LeftOut:
    """A buffer the drift table could not compare (Compare.left_out)."""

    stage: str
    layer: Optional[int]
    buffer: str
    primary_shape: Optional[tuple[int, ...]]  # None: the primary has no such buffer
    reference_shape: Optional[tuple[int, ...]]

    @property
    def where(self) -> str:
        return _where(self.stage, self.layer, self.buffer)

    @property
    def why(self) -> str:
        if self.primary_shape is None or self.reference_shape is None:
            return "reference only" if self.primary_shape is None else "drafter only"
        return f"{_shape(self.primary_shape)} vs {_shape(self.reference_shape)}"


def first_divergent(buffers: tuple[BufferDrift, ...], tolerance: float) -> Optional[Divergent]:
    """The first of `buffers` (in pipeline order) beyond `tolerance`, or with no number
    (non-finite on one side only, a difference from an all-zero reference). The engine
    judges each round with it, and replay and export --compare-tol judge a recording again
    (Compare.judged_at): from the same recorded relative errors, the same answer as a live
    run at that tolerance."""
    first = next((b for b in buffers if b.rel_err is None or b.rel_err > tolerance), None)
    return None if first is None else Divergent.at(first)


def _where(stage: str, layer: Optional[int], buffer: str) -> str:
    """A buffer as the drift's lines name it: `draft layer 0 ffn_act`."""
    return f"{stage}{'' if layer is None else f' layer {layer}'} {buffer}"


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


@dataclass(frozen=True)
class Commitment:
    """What the commit stage adds to its round's record."""

    committed_tokens: tuple[int, ...]
    rollback: Rollback
    committed_text: str
    finish_reason: Optional[str]
    compare: Optional[Compare] = None  # --compare: the reference configuration's round


# The round's stages in order, each with the part of the RoundRecord it fills in (None: the
# stage moves state and adds probes only). This is the one list of stages: session.Stage,
# probes.PIPELINE and the app's partial records (app/rounds.py) are derived from it.
STAGES: tuple[tuple[str, Optional[type]], ...] = (
    ("context", None),
    ("draft", DraftLogits),
    ("select", Selection),
    ("verify", Verdict),
    ("commit", Commitment),
)
STAGE_ORDER = tuple(name for name, _ in STAGES)


def filled_by(stage: str) -> tuple[str, ...]:
    """The RoundRecord fields `stage` fills in; until it runs they hold their defaults."""
    part = dict(STAGES)[stage]
    return () if part is None else tuple(f.name for f in fields(part))


@dataclass(frozen=True)
class StageRecord:
    stage: str
    before: EngineState
    after: EngineState
    ms: float


@dataclass(frozen=True)
class CommTiming:
    """A round's time in communication between ranks, when the target is sharded
    (docs/DISTRIBUTED.md says how each part is measured)."""

    lockstep_ms: float  # measured: the ranks comparing what they committed (waits for the slowest)
    commands_ms: float = 0.0  # measured: rank 0 broadcasting the app's commands (the TUI)
    target_collectives: int = 0  # the target's all_sums this round (counted from its sharded layers)
    target_est_ms: float = 0.0  # estimated: those all_sums at the cost calibrated when loading

    @property
    def total_ms(self) -> float:
        return self.lockstep_ms + self.commands_ms + self.target_est_ms


@dataclass(frozen=True)
class RoundRecord:
    """One round as far as it has run. Each stage returns a new one with more filled in:
    its part of STAGES (DraftLogits, Selection, Verdict, Commitment), spread over these fields."""

    round: int
    position: int  # the anchor's absolute position
    anchor: int
    gamma: int
    state_before: EngineState
    state_after: EngineState
    stages: tuple[StageRecord, ...] = ()
    probes: tuple[ProbeRow, ...] = ()
    first_nonfinite: Optional[ProbeRow] = None
    # proposal slots whose drafter logits hold a NaN or Inf (None: before the draft stage,
    # or a trace written before the field)
    nonfinite_logit_slots: Optional[tuple[int, ...]] = None
    proposals: Optional[tuple[int, ...]] = None
    selector: Optional[Selector] = None
    target_tokens: Optional[tuple[int, ...]] = None  # target argmax per verify row
    ranks: tuple[SlotRank, ...] = ()
    accepted: Optional[int] = None
    bonus: Optional[int] = None
    committed_tokens: tuple[int, ...] = ()  # what this round appended
    rollback: Rollback = Rollback()
    committed_text: str = ""
    finish_reason: Optional[str] = None  # "eos" | "length" | "context" once the session is done
    token_text: dict[int, str] = field(default_factory=dict)
    raw: Optional[dict[str, Any]] = None  # name -> numpy array, when raw buffers are kept
    comm: Optional[CommTiming] = None  # distributed runs: the round's communication
    compare: Optional[Compare] = None  # --compare: the reference configuration (commit fills it)

    @property
    def stage(self) -> Optional[str]:
        """The last stage that ran."""
        return self.stages[-1].stage if self.stages else None

    @property
    def complete(self) -> bool:
        return self.stage == "commit"

    @property
    def timings_ms(self) -> dict[str, float]:
        return {s.stage: s.ms for s in self.stages}

    def text(self, token: Optional[int]) -> str:
        return "" if token is None else self.token_text.get(token, f"<{token}>")

    def reference_target_p1(self) -> tuple[Optional[float], ...]:
        """Per slot of the --compare reference's proposals: the target's own top
        probability at its verify row where the reference's prefix is the drafter's (the
        same row, whose probabilities the drafter's ranks hold); None past where the two
        sides' proposals part (a second verify keeps no probabilities), and without ranks."""
        if self.compare is None:
            return ()
        p1 = {r.slot: r.target_p1 for r in self.ranks}
        theirs, mine = self.compare.proposals, tuple(self.proposals or ())
        return tuple(p1.get(s) if theirs[:s] == mine[:s] else None for s in range(len(theirs)))


@dataclass(frozen=True)
class DistributedInfo:
    """How the target is spread over the ranks of an mlx.distributed group."""

    backend: str  # "ring" | "nccl" | "mpi" | "jaccl"
    world_size: int
    sharding: str  # "tensor": mlx-lm's model.shard (every rank holds a slice of every layer)
    per_rank: str  # what one rank holds, e.g. "heads 2/4, kv heads 1/2, ffn 64/128"
    collectives_per_forward: int  # the target's all_sums in one forward pass
    all_sum_us: float  # one all_sum of one token's hidden state, calibrated at load
    all_sum_us_per_row: float  # and what each further row adds


@dataclass(frozen=True)
class SessionInfo:
    """Who is talking to whom: fixed for a session."""

    target_path: str
    target_kind: str  # model_type, e.g. "llama", "qwen3_5"
    target_layers: int
    target_hidden: int
    vocab_size: int
    drafter_path: str
    drafter_kind: str  # "DFlash" | "DFlash2"
    drafter_layers: int
    drafter_hidden: int
    block_size: int  # what the drafter was built for (anchor + proposals)
    target_layer_ids: tuple[int, ...]  # after layer_offset
    layer_offset: int
    mask_token_id: int
    top_k: Optional[int]
    dtype: str
    backend: str  # "cpu" | "gpu"
    rollback_kind: str  # "trim" | "replay"
    temperature: float
    seed: int
    prompt: str
    prompt_tokens: int
    max_tokens: int
    notes: tuple[str, ...] = ()  # warnings worth showing (e.g. block beyond training)
    drafter_quantization: Optional[str] = None  # e.g. "q4/g64"; None for a float drafter
    compare: Optional[str] = None  # --compare SPEC: a reference configuration runs beside the drafter
    compare_tol: Optional[float] = None  # its --compare-tol
    compare_quantization: Optional[str] = None  # the reference drafter's, as drafter_quantization
    # True: the reference's quantized weights compute in float (on the CPU the loader
    # dequantizes them: engine/quantize.py, dequantize_for_cpu), so no quantized kernel runs
    compare_dequantized: bool = False
    distributed: Optional[DistributedInfo] = None  # None: one process holds the whole target
    mask_token_text: Optional[str] = None  # the mask token's display text (None: older traces)


@dataclass(frozen=True)
class PrefillRecord:
    info: SessionInfo
    first_token: int
    first_text: str
    state: EngineState
    ms: float
    probes: tuple[ProbeRow, ...] = ()
