"""The compare lab: every round, a reference drafter configuration runs beside the primary
on exactly the primary's inputs (docs/COMPARE.md).

The reference runs through the very stage code the primary does: it is the drafter of a
second `Session` (the shadow) that is never prefilled and never verifies. The primary's
session calls this module at its stage seams, and the shadow's state follows the primary's:

  prefill   the target captures the reference's layers too (Target.hook); the shadow's
            capture is those rows of the prompt
  context   the shadow writes its own context caches from the same rows
  draft     the shadow drafts the same block (anchor, positions, gamma) and walks its own
            selector; the drift of every buffer present on both sides is queued
  verify    the reference's capture rows of the verify pass; its ranks of the target's tokens
  commit    read back; the reference's accepted count; the shadow keeps the committed rows

Only the primary's proposals reach verify and commit, so the decode is unchanged.

How many of its proposals the target would have accepted (temperature 0; with sampling
there is no single answer, and --compare is refused): the primary's verify gives the
target's token after every prefix of the PRIMARY's proposals. While the reference's
proposals equal the primary's, those are the target's tokens for the reference's prefix
too, so the verify decides the reference's count unless the reference gets right the very
slot the primary missed (its proposal there is the target's bonus token). Then, and only
then, the target's tokens further along the reference's proposals are computed by one more
target forward: after the commit the target's cache holds exactly the shared prefix (the
anchor and the primary's accepted tokens), so the forward runs the reference's proposals
from that slot on, its argmax rows are the verify's answers, and the cache is rewound
(trimmed, or restored for recurrent caches). A round thus costs at most one more draft pass
and one more (shorter) verify.

The reference's time (its seams' host work and the waits for its device work, which the
commit's wait runs) is counted in its record (`Compare.ms`) and kept out of the primary's
stage times, so the commit stage shows the commit.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

import mlx.core as mx
import numpy as np

from .checkpoint import load_drafter
from .compare_spec import CompareSpec, check_greedy, named_as_reference
from .config_diff import differences_note
from .drafter import DraftModel
from .errors import ParameterError
from .drift import Drift, Key
from .pair_check import check_pair
from .probes import pipeline_key
from .quantize import dequantize_drafter, dequantize_for_cpu, quantize_drafter
from .ranks import rank_arrays, rank_of
from .records import Compare, LeftOut, first_divergent
from .session import Session
from .target import DTYPES

if TYPE_CHECKING:
    from .round_scratch import Proposal, RoundScratch, Selected, Verified

Proposer = Callable[[list[int], int], list[int]]


class Reference:
    """The loaded reference configuration: its drafter and what SPEC said. `Pair.open`ed
    sessions each run one beside their primary (`open`)."""

    def __init__(self, spec: CompareSpec, drafter: DraftModel, draft_dir: Path,
                 tolerance: float, proposer: Optional[Proposer] = None):
        self.spec, self.drafter, self.draft_dir = spec, drafter, draft_dir
        self.tolerance = tolerance
        # Forced reference proposals, as SessionOptions.proposer for the primary: for tests
        # and what-ifs from Python (no flag sets it).
        self.proposer = proposer

    def open(self, session: Session) -> "Comparison":
        return Comparison(session, self)


def load_reference(spec: CompareSpec, primary: DraftModel, primary_dir: Path, dtype: str,
                   tolerance: float, keep_quantized: bool = False) -> Reference:
    """The drafter SPEC names: another directory in the pair's dtype, or the primary's
    checkpoint loaded again with the overrides applied. On the CPU a quantized one is then
    dequantized unless `keep_quantized` (as the primary is: engine/api.py)."""
    if spec.draft_dir is not None:
        with named_as_reference(spec):
            drafter = load_drafter(spec.draft_dir, DTYPES[dtype])
        if not keep_quantized:
            dequantize_for_cpu(drafter)
        return Reference(spec, drafter, spec.draft_dir, tolerance)
    if not spec.copies_primary:  # a layer offset reads other rows through the same modules
        return Reference(spec, primary, primary_dir, tolerance)
    drafter = load_drafter(primary_dir, DTYPES[spec.dtype or dtype])
    if spec.bits is not None:
        # a quantized primary (the sample may ship in 8 bits) is quantized again from the
        # float values its packed weights hold
        dequantize_drafter(drafter)
        with named_as_reference(spec):
            quantize_drafter(drafter, spec.bits, spec.group_size, where=str(primary_dir))
    if not keep_quantized:
        dequantize_for_cpu(drafter)
    if spec.residual_scale != 1.0:
        drafter.scale_residual(spec.residual_scale)
    mx.eval(drafter.parameters())
    return Reference(spec, drafter, primary_dir, tolerance)


class Tap:
    """A stage's probe sink that also keeps every buffer handed to it (for the drift),
    whether or not the sink itself records statistics (the bench runs without probes)."""

    def __init__(self, sink, kept: dict[Key, mx.array]):
        self._sink, self._kept = sink, kept

    def __call__(self, name: str, layer: Optional[int], tensor: mx.array) -> None:
        self._kept[(self._sink.stage, layer, name)] = tensor
        self._sink(name, layer, tensor)

    def __getattr__(self, name):
        return getattr(self._sink, name)


@dataclass
class _Queued:
    """The reference's part of the round in flight, on the device until the commit."""

    logits: mx.array  # its draft logits [gamma, V]
    proposal: "Proposal"
    drift: Drift
    left_out: tuple[LeftOut, ...]  # the buffers the drift could not compare
    nonfinite: mx.array  # [gamma] bool: its logits hold a NaN or Inf (probes.nonfinite_rows)
    capture: Optional[mx.array] = None  # its capture rows of the verify pass
    ranks: Optional[mx.array] = None  # [gamma]


def _timed(seam):
    """Count a seam's time as the reference's (Comparison.seconds): the session takes it out
    of the primary's stage that called the seam."""

    @functools.wraps(seam)
    def timed(self, *args):
        t0 = time.perf_counter()
        try:
            return seam(self, *args)
        finally:
            self.seconds += time.perf_counter() - t0

    return timed


class Comparison:
    """One session's reference side (module docstring); the session calls it at its seams."""

    def __init__(self, session: Session, reference: Reference):
        from .api import Pair

        options = session.options
        check_greedy(options.temperature)
        spec = reference.spec
        offset = options.layer_offset if spec.layer_offset is None else spec.layer_offset
        self.layer_ids = check_pair(session.target, reference.drafter.config, offset,
                                    f"--compare {spec.text}")
        self.session, self.target, self.reference = session, session.target, reference
        shadow_options = replace(options, gamma=session.gamma, layer_offset=offset, probes=False,
                                 ranks=False, keep_raw=False, proposer=reference.proposer)
        try:
            self.shadow = Session(Pair(session.target, reference.drafter, reference.draft_dir),
                                  session.prompt_ids, options=shadow_options)
        except ParameterError as error:
            raise self._named(error) from None
        # One list of tokens: the shadow's context stage checks its cursor against it.
        self.shadow.tokens = session.tokens
        self._primary: dict[Key, mx.array] = {}  # the round's buffers, both sides
        self._reference: dict[Key, mx.array] = {}
        self._queued: Optional[_Queued] = None
        self.seconds = 0.0  # the reference's time so far, over every round (_timed)
        self._round_start = 0.0  # `seconds` when the round in flight began
        # The reference drafter's own notes (a block beyond the one it was trained for),
        # named as the reference's; one the primary already has says the same of both (the
        # drafter quantized in memory), and is shown once.
        # A reference directory's config fields that differ are named first: where its
        # buffers part from the drafter's, the field is the likely why.
        differs = differences_note(session.config, reference.drafter.config,
                                   options.layer_offset if spec.draft_dir else 0,
                                   session.layer_ids, self.layer_ids)
        own = ((differs,) if differs else ()) + tuple(
            note for note in self.shadow.info.notes if note not in session.info.notes)
        self.notes = tuple(f"--compare {spec.text}: {note}" for note in own)

    def check_gamma(self, gamma: int) -> None:
        """Session.set_gamma: the reference drafts the primary's block, so its drafter's limits
        (a sliding window, its positions) hold too."""
        try:
            self.shadow.check_gamma(gamma)
        except ParameterError as error:
            raise self._named(error) from None

    def _named(self, error: ParameterError) -> ParameterError:
        """A limit of the reference's drafter, said to be the reference's: the primary's own
        drafter may have no such limit ("the drafter's sliding_window" misled)."""
        return ParameterError(error.name, error.value,
                              f"--compare {self.reference.spec.text}: {error.problem}")

    # ---- the seams (engine/session.py calls these) ----------------------------------------

    def tap(self, sink):
        return Tap(sink, self._primary)

    def prefill(self) -> None:
        self.shadow.capture = self.target.reference_capture

    @_timed
    def context(self) -> None:
        self._round_start = self.seconds
        self.shadow._context(self._probe("context"))

    @_timed
    def draft(self, r: "RoundScratch") -> None:
        drafted = self.shadow._draft(r, self._probe("draft"))
        self._queued = _Queued(drafted.logits, self.shadow._select(r, drafted), *self._drift(),
                               drafted.nonfinite)

    @_timed
    def verify(self, r: "RoundScratch", logits: mx.array, target_argmax: mx.array) -> None:
        q, gamma = self._queued, r.gamma
        q.capture = self.target.reference_capture
        q.ranks = rank_arrays(q.logits, logits[:gamma], target_argmax[:gamma], 0.0)[0]

    @_timed
    def commit(self, r: "RoundScratch", selected: "Selected", verified: "Verified") -> Compare:
        """After the primary's commit: the round's reference record."""
        t0 = time.perf_counter()
        part, q = verified.part, self._queued
        self.shadow.capture = q.capture[:, : part.accepted + 1]
        self.shadow.capture_base = r.position
        walk = [q.proposal.lattice[0], q.proposal.picks] if q.proposal.lattice else []
        self.session._wait([q.proposal.tokens, q.ranks, q.nonfinite, *walk, *q.drift.pending()])
        proposals = np.array(q.proposal.tokens).tolist()
        primary = list(selected.part.proposals)
        accepted, unknown = known_accepted(proposals, primary, list(part.target_tokens))
        targets = known_targets(proposals, primary, list(part.target_tokens))
        ranks = np.array(q.ranks).tolist()
        if unknown is not None:
            more, more_ranks = self._target_tokens_after(proposals[unknown - 1: -1],
                                                         q.logits[unknown:])
            accepted = unknown + greedy_prefix(proposals[unknown:], more)
            # its ranks there are of the target's tokens after its own prefix, not the primary's
            targets[unknown:], ranks[unknown:] = more, more_ranks
        argmax, left, in_k, top_k = _walk(walk, targets)
        self.session._remember_text(r, [*proposals, *(t for t in targets if t is not None), *argmax])
        buffers = q.drift.rows()
        tol = self.reference.tolerance
        self._primary.clear()
        self._reference.clear()
        self._queued = None
        return Compare(
            spec=self.reference.spec.text, proposals=tuple(proposals), accepted=accepted,
            ranks=tuple(ranks), buffers=buffers, tolerance=tol,
            first_divergent=first_divergent(buffers, tol),
            reverified=unknown is not None, targets=tuple(targets), argmax=argmax,
            left_argmax=left, in_candidates=in_k, left_out=q.left_out,
            nonfinite_logit_slots=tuple(np.flatnonzero(np.array(q.nonfinite)).tolist()),
            top_k=top_k, ms=(self.seconds - self._round_start + time.perf_counter() - t0) * 1000,
        )

    # ---- helpers --------------------------------------------------------------------------

    def _probe(self, stage: str):
        kept = self._reference

        def probe(name: str, layer: Optional[int], tensor: mx.array) -> None:
            kept[(stage, layer, name)] = tensor

        return probe

    def _drift(self) -> tuple[Drift, tuple[LeftOut, ...]]:
        """Queue the drift of every buffer both sides probed with one shape, in pipeline
        order; and name the ones left out (another shape on each side, or one side only:
        the primary's buffers of this round so far are the same two stages')."""
        primary, reference = self._primary, self._reference
        keys = sorted((k for k, a in reference.items()
                       if k in primary and primary[k].shape == a.shape), key=_pipeline_order)
        compared = set(keys)
        left_out = tuple(
            LeftOut(*k, _shape_of(primary.get(k)), _shape_of(reference.get(k)))
            for k in sorted((primary.keys() | reference.keys()) - compared, key=_pipeline_order))
        return Drift(keys, [primary[k] for k in keys], [reference[k] for k in keys]), left_out

    def _target_tokens_after(self, tokens: list[int], logits: mx.array
                             ) -> tuple[list[int], list[int]]:
        """The target's argmax after each of `tokens`, run on from its committed cache (which
        is then rewound as it was), and each one's rank in `logits` (the reference's draft
        logits of those slots, one row per token)."""
        saved = self.target.checkpoint()
        out, _ = self.target.forward(mx.array([tokens], dtype=mx.int32))
        argmax = mx.argmax(out[0], axis=-1)
        logits = logits.astype(mx.float32)  # as ranks.rank_arrays counts
        at = mx.take_along_axis(logits, argmax[:, None], axis=-1)
        ranks = rank_of(logits, at[:, 0])
        self.session._wait([argmax, ranks])
        self.target.rewind(saved, len(tokens))
        return np.array(argmax).tolist(), np.array(ranks).tolist()


def known_accepted(reference: list[int], primary: list[int], targets: list[int]
                   ) -> tuple[int, Optional[int]]:
    """The reference's accepted count as far as the primary's verify decides it: (count,
    None) when it does; (slot, slot) when the reference has matched the target up to `slot`
    along a prefix the target never saw (it got right the slot the primary missed), so the
    target's tokens from there on must be computed."""
    for slot, token in enumerate(reference):
        if reference[:slot] != primary[:slot]:
            return slot, slot
        if token != targets[slot]:
            return slot, None
    return len(reference), None


def known_targets(reference: list[int], primary: list[int], targets: list[int]
                  ) -> list[Optional[int]]:
    """The target's token at each slot after the anchor and the reference's own proposals
    before it, as far as the primary's verify ran that prefix: up to the first slot where
    the two sides' proposals part (None beyond)."""
    same = next((i for i, (a, b) in enumerate(zip(reference, primary)) if a != b), len(reference))
    return [targets[s] if s <= same else None for s in range(len(reference))]


def _walk(walk: list, targets: list[Optional[int]]
          ) -> tuple[tuple, tuple, tuple, Optional[int]]:
    """DFlash2's selector, read back: per slot the argmax (its best-unary candidate), whether
    the walk left it, and whether the target's token was among the candidates (None where
    that token is unknown); and K, the candidates per slot (as the drafter's Selector.top_k).
    DFlash has no selector: all three empty, K None."""
    if not walk:
        return (), (), (), None
    candidates, picks = np.array(walk[0]), np.array(walk[1])
    argmax = candidates[:, 0]
    chosen = candidates[np.arange(len(picks)), picks]
    in_k = tuple(None if t is None else bool((row == t).any())
                 for row, t in zip(candidates, targets))
    return tuple(argmax.tolist()), tuple((chosen != argmax).tolist()), in_k, int(candidates.shape[1])


def _shape_of(tensor: Optional[mx.array]) -> Optional[tuple[int, ...]]:
    return None if tensor is None else tuple(tensor.shape)


def greedy_prefix(proposals: list[int], targets: list[int]) -> int:
    n = 0
    while n < len(proposals) and proposals[n] == targets[n]:
        n += 1
    return n


def _pipeline_order(key: Key) -> tuple:
    stage, layer, name = key
    return pipeline_key(_Named(stage, layer, name))


class _Named:
    """What probes.pipeline_key reads of a probe row."""

    def __init__(self, stage: str, layer: Optional[int], name: str):
        self.stage, self.layer, self.name = stage, layer, name
