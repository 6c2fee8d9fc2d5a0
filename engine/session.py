"""A speculative decode that can be stepped one stage at a time (docs/ARCHITECTURE.md).

A round is five stages, in order (records.STAGES): context -> draft -> select -> verify ->
commit. Each stage is a method below that takes what the earlier stages handed on (kept in
the round's RoundScratch: engine/round_scratch.py) and returns its own typed output. The
device work of a stage is queued lazily; what the record needs from it is read back
afterwards (`_selection`, `_verdict`), so the two can be run apart:

  step_stage   one stage, then one wait for its outputs and its probes: each stage's time
               is its whole cost (the TUI steps this way and shows every stage)
  step_round   a whole round with context, draft, select and verify chained on the device
               and one wait before the records are built (the bench and the CLI run this
               way); the records are the same

A stage's output carries the part of the round's record it fills in (records.Selection,
Verdict, Commitment); `RoundScratch.record` builds the record from the parts so far. Only
plain data leaves: every MLX array stays here.

State carried between rounds:
  tokens        prompt + committed tokens; the last one is the anchor (not yet seen by the target)
  target cache  every committed token except the anchor
  capture       target context rows not yet written to the drafter (base position, rows)
  cursor        positions whose context K/V the drafter holds; lags the anchor until the
                next context stage writes the capture
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, Callable, Iterator, Optional

import mlx.core as mx
import numpy as np

from . import block_attention
from .acceptance import greedy_accept, rejection_sample, softmax_rows
from .committed_text import CommittedText
from .context_cache import ContextCache
from .device_walk import greedy_walk, picked_tokens
from .drafter import block_masks
from .errors import ParameterError
from .memory import bound_buffer_cache
from .pair_check import check_pair
from .paths import named_as_draft
from .probes import ProbeSink, nonfinite_rows
from .ranks import rank_arrays, rank_values, slot_ranks
from .quantize import computes_in_float, describe as describe_quantization
from .records import (
    STAGE_ORDER, Commitment, EngineState, PrefillRecord, Rollback, RoundRecord, Selection,
    SessionInfo, StageRecord, Verdict,
)
from .round_scratch import Drafted, Proposal, RoundScratch, Selected, Verification, Verified
from .selector import lattice_arrays, selector_record, to_lattice, walk
from .target import backend
from .tokens import token_display

if TYPE_CHECKING:
    from .api import Pair

# Stage.CONTEXT == "context", ... in the order of records.STAGES.
Stage = Enum("Stage", [(name.upper(), name) for name in STAGE_ORDER], type=str)


ATTENTION_KINDS = ("mlx", "padded", "kernel")  # SessionOptions.attention


class SessionFinished(Exception):
    """Stepping a session that already hit EOS, its token budget or the target's context."""


@dataclass(frozen=True)
class SessionOptions:
    """How a session decodes; fixed once it is open (gamma and keep_raw have setters on the
    Session, since the app changes them between rounds)."""

    gamma: Optional[int] = None  # proposals per round; default: the drafter's block_size - 1
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 256
    probes: bool = True
    # Per-slot ranks and both models' top tokens in each verdict (the ranks panel): four
    # passes over both models' full-vocabulary logits a round. Off for speed runs.
    ranks: bool = True
    keep_raw: bool = False  # keep every probed buffer as a numpy array in the record
    layer_offset: int = 0
    # Forced proposals, for tests and what-if debugging: called with the committed tokens
    # and gamma, returns the gamma proposals to verify instead of the drafter's. The drafter
    # still runs, so its probes, ranks and selector stay visible.
    proposer: Optional[Callable[[list[int], int], list[int]]] = None
    # How the block's rows attend, in the drafter and the target's verify: "mlx" (MLX's
    # attention over the rows held), "padded" (over whole cache buffers, masked:
    # engine/padded_attention.py) or "kernel" (a CUDA kernel over the rows held:
    # engine/block_attention.py). None chooses "kernel" where MLX's attention would plan a
    # kernel for each new shape (a CUDA GPU), else "mlx".
    attention: Optional[str] = None


@dataclass
class Waits:
    """Every time the session blocked on the device (`Session._wait`), and for how long."""

    count: int = 0
    seconds: float = 0.0


class Session:
    """One speculative decode of one prompt on a Pair. `Pair.open` makes one and prefills it;
    then `step_stage` / `step_round` / `run` advance it and return plain records."""

    def __init__(self, pair: "Pair", prompt_ids: list[int], *,
                 options: SessionOptions = SessionOptions(), prompt_text: str = ""):
        target, drafter = pair.target, pair.drafter
        config = drafter.config
        self.pair, self.target, self.drafter, self.config = pair, target, drafter, config
        self.options = options
        with named_as_draft(pair.draft):
            self.layer_ids = check_pair(target, config, options.layer_offset, str(pair.draft_dir))
        if not prompt_ids:
            raise ParameterError("prompt_ids", list(prompt_ids),
                                 "expected at least one token (the prompt is empty)")
        self.gamma = self.check_gamma(config.block_size - 1 if options.gamma is None else options.gamma)
        self.keep_raw = options.keep_raw
        self.prompt_ids = list(prompt_ids)
        self.eos_ids = set(getattr(target.tokenizer, "eos_token_ids", ()) or ())
        self.embed_scale = target.embed_scale * config.input_embedding_scale
        self.info = SessionInfo(
            target_path=str(target.spec.path), target_kind=target.spec.kind,
            target_layers=target.num_layers, target_hidden=target.hidden_size,
            vocab_size=target.vocab_size, drafter_path=str(pair.draft_dir),
            drafter_kind=config.kind_label, drafter_layers=config.num_hidden_layers,
            drafter_hidden=config.hidden_size, block_size=config.block_size,
            target_layer_ids=self.layer_ids, layer_offset=options.layer_offset,
            mask_token_id=config.mask_token_id,
            top_k=config.selector_top_k if config.is_dflash2 else None,
            dtype=pair.dtype, backend=backend(),
            rollback_kind="trim" if target.trimmable else "replay",
            temperature=options.temperature, seed=options.seed, prompt=prompt_text,
            prompt_tokens=len(prompt_ids), max_tokens=options.max_tokens,
            notes=self._notes(), drafter_quantization=describe_quantization(drafter),
            compare=pair.reference.spec.text if pair.reference is not None else None,
            compare_tol=pair.reference.tolerance if pair.reference is not None else None,
            mask_token_text=token_display(target.tokenizer, config.mask_token_id),
        )
        self._token_text: dict[int, str] = {}
        # The decode's state (module docstring): prefill() fills it in, once.
        self.rng = np.random.default_rng(options.seed)
        self.attention = self._check_attention(options.attention)
        self.ctx_caches = [
            ContextCache(config.sliding_window - 1 if t == "sliding_attention" else None,
                         padded=self.attention == "padded", kernel=self.attention == "kernel")
            for t in config.layer_types
        ]
        self.waits = Waits()
        self.cursor, self.capture_base = 0, 0
        self.capture: Optional[mx.array] = None
        self.tokens = list(self.prompt_ids)
        self._text = ""  # the committed text, brought up to date once per round
        self._committed = CommittedText(self.target.tokenizer.decode)
        self.finish_reason: Optional[str] = None
        self.prefill_record: Optional[PrefillRecord] = None
        self._next = Stage.CONTEXT
        self._round: Optional[RoundScratch] = None  # the round in flight, until its commit
        self._record: Optional[RoundRecord] = None  # the latest stage's record
        # Completed rounds. The session keeps no history (a record can be tens of KB and a
        # decode thousands of rounds): a caller that wants the records keeps them.
        self.rounds_done = 0
        # --compare: the reference configuration run beside this one (engine/compare.py),
        # called at the stage seams below.
        self.compare = pair.reference.open(self) if pair.reference is not None else None
        if self.compare:  # its notes are shown wherever the drafter's are
            self.info = replace(self.info, notes=self.info.notes + self.compare.notes,
                                compare_quantization=self.compare.shadow.info.drafter_quantization,
                                compare_dequantized=computes_in_float(pair.reference.drafter))

    # ---- setup ---------------------------------------------------------------------------

    @staticmethod
    def _check_attention(attention: Optional[str]) -> str:
        if attention is None:
            return "kernel" if block_attention.available() else "mlx"
        if attention not in ATTENTION_KINDS:
            raise ParameterError("attention", attention, f"expected one of {', '.join(ATTENTION_KINDS)}")
        return attention

    def check_gamma(self, gamma: int) -> int:
        """The block size gamma checked against the target and the drafter (at open, at every
        set_gamma, and by a comparison for its reference); returned as given."""
        if gamma < 1:
            raise ParameterError("gamma", gamma, "expected at least 1 proposal per round")
        # a block the target could never verify in one forward (or, with no context declared,
        # past the drafter's positions): at open and at every γ change alike
        self.target.check_block(gamma, self.config.max_position_embeddings)
        window = self.config.sliding_window
        if "sliding_attention" in self.config.layer_types and gamma + 1 > window:
            raise ParameterError(
                "gamma", gamma,
                f"a block of {gamma + 1} rows exceeds the drafter's sliding_window {window}; "
                "its sliding layers cannot see their own block",
            )
        return gamma

    def _notes(self) -> tuple[str, ...]:
        # the target's weights first: what the drafter computes follows from them
        notes = (list(self.target.weight_notes.notes) + list(self.config.notes)
                 + list(self.drafter.weight_notes.notes))
        if self.gamma + 1 > self.config.block_size:
            notes.append(
                f"block of {self.gamma} proposals is beyond the {self.config.block_size - 1} "
                "the drafter was trained for"
            )
        if self.config.num_target_layers != self.target.num_layers:
            notes.append(
                f"drafter was built for a {self.config.num_target_layers}-layer target; this "
                f"one has {self.target.num_layers}"
            )
        return tuple(notes)

    def set_gamma(self, gamma: int) -> int:
        """Takes effect from the next round's context stage."""
        gamma = self.check_gamma(gamma)
        if self.compare:  # the reference drafts the same block: its drafter's limits hold too
            self.compare.check_gamma(gamma)
        if (self.prefill_record is not None and self.finish_reason is None
                and not self._block_fits(gamma)):
            # the commit's check passed the block of the γ it had; a wider one would run past
            last = len(self.tokens) - 1 + self._next_gamma(gamma)
            raise ParameterError(
                "gamma", gamma,
                f"the next block (positions {len(self.tokens) - 1} to {last}) runs past the "
                f"target's context of {self.target.context_length} positions")
        self.gamma = gamma
        return self.gamma

    def set_keep_raw(self, on: bool) -> None:
        """Keep (or stop keeping) raw buffers in records, from the next stage on."""
        self.keep_raw = on

    # ---- state ---------------------------------------------------------------------------

    @property
    def generated(self) -> list[int]:
        return self.tokens[len(self.prompt_ids):]

    def state(self) -> EngineState:
        sliding = [c for c in self.ctx_caches if c.keep is not None]
        return EngineState(
            cursor=self.cursor, capture_base=self.capture_base,
            capture_rows=0 if self.capture is None else int(self.capture.shape[1]),
            target_offset=self.target.offset, committed=len(self.tokens),
            ring_window=sliding[0].keep if sliding else None,
            ring_occupancy=sliding[0].length if sliding else None,
        )

    @property
    def next_stage(self) -> Stage:
        return self._next

    @property
    def finished(self) -> Optional[str]:
        return self.finish_reason

    def token_text(self, ids) -> dict[int, str]:
        """Display text of each token id (engine/tokens.py), remembered per session."""
        out = {}
        for t in ids:
            t = int(t)
            if t not in self._token_text:
                self._token_text[t] = token_display(self.target.tokenizer, t)
            out[t] = self._token_text[t]
        return out

    # ---- prefill -------------------------------------------------------------------------

    def prefill(self) -> PrefillRecord:
        """Target forward over the prompt: first token, capture = every prompt row, cursor 0."""
        if self.prefill_record is not None:
            raise RuntimeError("Session.prefill() already ran; open a new session to start again")
        t0 = time.perf_counter()
        bound_buffer_cache(self.pair)  # a decode would otherwise grow MLX's cache without end
        self.target.reset(self.attention)
        self.target.hook(self.layer_ids, self.compare.layer_ids if self.compare else ())
        sink = ProbeSink("prefill", self.options.probes)
        logits, capture = self.target.prefill(self.prompt_ids)
        if self.compare:
            self.compare.prefill()
        sink("capture", None, capture)
        sink("target_logits", None, logits[None])
        logits = logits.astype(mx.float32)
        self._wait([logits, capture, *sink.pending()])
        first = self._sample_target(np.array(logits))
        self.capture = capture
        self.tokens.append(first)
        self._text = self._committed_text()
        self._check_finished()
        self.prefill_record = PrefillRecord(
            info=self.info, first_token=first, first_text=self.token_text([first])[first],
            state=self.state(), ms=(time.perf_counter() - t0) * 1000, probes=tuple(sink.rows()),
        )
        return self.prefill_record

    def _sample_target(self, logits: np.ndarray) -> int:
        if self.options.temperature <= 0:
            return int(np.argmax(logits))
        p = softmax_rows(logits[None], self.options.temperature)[0]
        return int(self.rng.choice(len(p), p=p))

    def _check_finished(self) -> None:
        if self.tokens[-1] in self.eos_ids:
            self.finish_reason = "eos"
        elif len(self.generated) >= self.options.max_tokens:
            self.finish_reason = "length"
        elif not self._block_fits():
            self.finish_reason = "context"

    def _next_gamma(self, gamma: Optional[int] = None) -> int:
        """The next round's proposals: gamma (the session's), cut to what is left of the
        token budget."""
        return min(self.gamma if gamma is None else gamma,
                   self.options.max_tokens - len(self.generated))

    def _block_fits(self, gamma: Optional[int] = None) -> bool:
        """Whether the next round's block (anchor + proposals, at positions len(tokens)-1 on)
        stays inside the context the target declares (the limit check_prompt holds a prompt
        to): past it are positions the target never saw in training. A block that no longer
        fits ends the session ("context") even where a smaller one would. A target that
        declares no context is not bounded here."""
        limit = self.target.context_length
        return limit is None or len(self.tokens) + self._next_gamma(gamma) <= limit

    @property
    def finish_message(self) -> Optional[str]:
        """Why the session finished, said to a person after "finished: " or "stopped: " (the
        reason itself, `finish_reason`, is the record's): the limit reached is named with
        its number. None while the session goes on."""
        return {
            None: None,
            "eos": "the target emitted end-of-sequence",
            "length": f"reached the token budget ({self.options.max_tokens} tokens)",
            "context": f"reached the target's context ({self.target.context_length} positions)",
        }.get(self.finish_reason, self.finish_reason)

    def _wait(self, arrays: list) -> None:
        """Block until the device has computed `arrays`: the one place a round waits for the
        device (counted in `waits`; tests hold a round to its number of waits)."""
        t0 = time.perf_counter()
        mx.eval(arrays)
        self.waits.count += 1
        self.waits.seconds += time.perf_counter() - t0

    # ---- stepping ------------------------------------------------------------------------

    def _check_steppable(self) -> None:
        if self.prefill_record is None:
            raise RuntimeError("Session.step_stage() before prefill(): call prefill() first "
                               "(Pair.open does unless prefill=False)")
        if self.finish_reason is not None:
            raise SessionFinished(self.finish_message)

    def step_stage(self) -> RoundRecord:
        """Run the next stage and wait for it; return the round's record as far as it has run."""
        self._check_steppable()
        stage = self._next
        if stage is Stage.CONTEXT:
            self._round = self._begin_round()
        r = self._round
        before = self.state()
        t0, reference_s = time.perf_counter(), self._reference_seconds()
        sink = self._sink(stage)
        if stage is Stage.CONTEXT:
            self._wait([*self._context(sink), *sink.pending()])
        elif stage is Stage.DRAFT:
            r.drafted = self._draft(r, sink)
            self._wait([*r.drafted.arrays(), *sink.pending()])
            r.draft_logits = r.drafted.part()
        elif stage is Stage.SELECT:
            r.proposal = self._select(r, r.drafted)
            self._wait(r.proposal.arrays())
            r.selected = self._selection(r, r.proposal)
        elif stage is Stage.VERIFY:
            r.verification = self._verify(r, r.proposal, r.drafted, sink)
            self._wait([*r.verification.arrays(), *sink.pending()])
            r.verified = self._verdict(r, r.selected, r.verification)
        else:
            r.committed = self._commit(r, r.selected, r.verified)
        self._keep_probes(r, sink)
        # the reference's part of the stage is its own (Compare.ms), not the stage's
        seconds = time.perf_counter() - t0 - (self._reference_seconds() - reference_s)
        r.stages.append(StageRecord(stage.value, before, self.state(), seconds * 1000))
        return self._finish_stage(r, stage)

    def step_round(self) -> RoundRecord:
        """Run the rest of the current round (a whole round from its start).

        From a round's start, the device work of context, draft, select and verify is queued
        as one chain, with a single wait before the records are built (`_chained_round`);
        the record equals the one `step_stage` would build, but its stage times are host
        times (the wait is counted in verify's). Mid-round, the remaining stages are stepped.
        """
        self._check_steppable()
        if self._next is Stage.CONTEXT:
            return self._chained_round()
        record = self.step_stage()
        while not record.complete:
            record = self.step_stage()
        return record

    def _chained_round(self) -> RoundRecord:
        r = self._round = self._begin_round()
        sinks = {stage: self._sink(stage) for stage in Stage}
        clock = _StageClock(self.state, self._reference_seconds)

        clock.start(Stage.CONTEXT)
        queued = self._context(sinks[Stage.CONTEXT])
        clock.start(Stage.DRAFT)
        r.drafted = self._draft(r, sinks[Stage.DRAFT])
        clock.start(Stage.SELECT)
        r.proposal = self._select(r, r.drafted)
        # The device starts on context, draft and select while the host builds the verify
        # pass (a target forward is the largest graph of the round). On a CPU, MLX runs much
        # of that work before async_eval returns (it bounds the tasks in flight): the time
        # is the draft's.
        clock.resume(Stage.DRAFT)
        queued += [*r.proposal.arrays(), r.drafted.nonfinite]
        mx.async_eval(queued)
        clock.start(Stage.VERIFY)
        r.verification = self._verify(r, r.proposal, r.drafted, sinks[Stage.VERIFY])
        verdict = r.verification.verdict_arrays()
        mx.async_eval(verdict)
        # What only the record needs is queued last, the ranks and the probes' reductions
        # (~100 buffers at real scale): the host builds and queues them while the device
        # runs the verify, instead of before it. The sinks keep their buffers alive.
        self._wait([*queued, *verdict, *r.verification.ranks,
                    *(a for sink in sinks.values() for a in sink.pending())])
        clock.resume(Stage.DRAFT)
        r.draft_logits = r.drafted.part()
        clock.resume(Stage.SELECT)
        r.selected = self._selection(r, r.proposal)
        clock.resume(Stage.VERIFY)
        r.verified = self._verdict(r, r.selected, r.verification)
        clock.start(Stage.COMMIT)
        r.committed = self._commit(r, r.selected, r.verified)
        clock.stop()
        for stage in Stage:
            self._keep_probes(r, sinks[stage])
        r.stages.extend(clock.records())
        return self._finish_stage(r, Stage.COMMIT)

    def _reference_seconds(self) -> float:
        """--compare: the reference's time so far (engine/compare.py), which the stages
        that call it leave out of their own."""
        return self.compare.seconds if self.compare else 0.0

    def _sink(self, stage: Stage) -> ProbeSink:
        sink = ProbeSink(stage.value, self.options.probes, self.keep_raw)
        return self.compare.tap(sink) if self.compare else sink

    def _keep_probes(self, r: RoundScratch, sink: ProbeSink) -> None:
        r.probes.extend(sink.rows())
        if self.keep_raw:
            r.raw = {**(r.raw or {}), **sink.raw()}

    def _finish_stage(self, r: RoundScratch, stage: Stage) -> RoundRecord:
        self._record = r.record()
        order = list(Stage)
        self._next = order[(order.index(stage) + 1) % len(order)]
        if stage is Stage.COMMIT:
            self.rounds_done += 1
            self._round = None  # its device arrays go with it
        return self._record

    def run(self, rounds: Optional[int] = None) -> Iterator[RoundRecord]:
        done = 0
        while self.finish_reason is None and (rounds is None or done < rounds):
            yield self.step_round()
            done += 1

    @property
    def current(self) -> Optional[RoundRecord]:
        """The record of the latest stage run (None before the first)."""
        return self._record

    def _begin_round(self) -> RoundScratch:
        return RoundScratch(
            index=self.rounds_done, position=len(self.tokens) - 1, anchor=self.tokens[-1],
            gamma=self._next_gamma(), state_before=self.state(),
            text_before=self._text, token_text=self.token_text([self.tokens[-1]]),
        )

    def _committed_text(self) -> str:
        return self._committed.text(self.generated)

    def _remember_text(self, r: RoundScratch, ids) -> None:
        """Add the display text of `ids` to the round's record."""
        r.token_text.update(self.token_text(ids))

    # ---- the five stages -----------------------------------------------------------------

    def _context(self, sink: ProbeSink) -> list[mx.array]:
        """Write the capture rows into every drafter layer's context cache; returns the
        caches' buffers (to wait for)."""
        ctx = self.drafter.project_context(self.capture, sink)
        kv = self.drafter.context_kv(ctx, self.capture_base, sink)
        for cache, (k, v) in zip(self.ctx_caches, kv):
            cache.append(k, v)
        self.cursor += int(self.capture.shape[1])
        self.capture_base, self.capture = self.cursor, None
        assert self.cursor == len(self.tokens) - 1, "context: cursor must reach the anchor"
        if self.compare:
            self.compare.context()
        return [buffer for c in self.ctx_caches for buffer in (c.keys, c.values)]

    def _draft(self, r: RoundScratch, sink: ProbeSink) -> Drafted:
        """The block forward: [anchor, mask x gamma] at positions p .. p+gamma."""
        block = mx.array([[r.anchor] + [self.config.mask_token_id] * r.gamma])
        x = self.target.embed_tokens(block) * self.embed_scale
        x = x.astype(self.drafter.dtype)
        masks = block_masks(self.config, [c.length for c in self.ctx_caches], r.gamma + 1)
        hidden = self.drafter.block_hidden(x, self.ctx_caches, r.position, masks, sink)[0, 1:]
        sink("final_normed", None, hidden)
        logits = self.drafter.logits(hidden, self.target.lm_head)
        sink("logits", None, logits)
        nonfinite = nonfinite_rows(logits)
        hproj = None
        if self.config.is_dflash2:
            hproj = self.drafter.candidate_selector.hidden_projection(hidden)
            sink("hproj", None, hproj)
        if self.compare:
            self.compare.draft(r)
        return Drafted(hidden, logits, hproj, nonfinite)

    def _select(self, r: RoundScratch, drafted: Drafted) -> Proposal:
        """DFlash2: the selector walk over the top-K lattice. DFlash: argmax (or sample).

        At temperature 0 the proposals are decided on the device; sampling draws on the host
        from the session's seeded generator, which needs the scores read back first.
        """
        proposal = self._drafter_select(r, drafted)
        if self.options.proposer is None:
            return proposal
        forced = tuple(int(t) for t in self.options.proposer(list(self.tokens), r.gamma))
        if len(forced) != r.gamma:
            raise ValueError(f"proposer returned {len(forced)} tokens for gamma {r.gamma}")
        # Forced proposals are verified greedily (no q); the drafter's walk stays visible.
        return replace(proposal, tokens=mx.array(forced, dtype=mx.int32), q=None, forced=forced)

    def _drafter_select(self, r: RoundScratch, drafted: Drafted) -> Proposal:
        temperature = self.options.temperature
        if self.config.is_dflash2:
            arrays = lattice_arrays(self.drafter.candidate_selector, drafted.hproj,
                                    drafted.logits, r.anchor, self.config.selector_top_k)
            if temperature <= 0:
                picks = greedy_walk(*arrays[1:3], arrays[3] if len(arrays) > 3 else None)
                tokens = picked_tokens(arrays[0], picks).astype(mx.int32)
                return Proposal(tokens, arrays, picks)
            self._wait(list(arrays))
            lattice = to_lattice(*(np.array(a) for a in arrays))
            picks, q_rows = walk(lattice, temperature, self.rng)
            tokens = lattice.candidates[np.arange(len(picks)), picks]
            return Proposal(mx.array(tokens, dtype=mx.int32), arrays, picks, q_rows)
        if temperature <= 0:
            return Proposal(mx.argmax(drafted.logits, axis=-1).astype(mx.int32))
        logits = drafted.logits.astype(mx.float32)
        self._wait([logits])
        q = softmax_rows(np.array(logits), temperature)
        tokens = [int(self.rng.choice(q.shape[1], p=row)) for row in q]
        return Proposal(mx.array(tokens, dtype=mx.int32), q=q)

    def _selection(self, r: RoundScratch, proposal: Proposal) -> Selected:
        """The select stage's part of the record, from its outputs read back."""
        if self.config.is_dflash2:
            lattice = to_lattice(*(np.array(a) for a in proposal.lattice))
            picks = proposal.picks
            picks = np.array(picks).tolist() if isinstance(picks, mx.array) else list(picks)
            proposals = tuple(lattice.candidates[np.arange(len(picks)), picks].tolist())
            self._remember_text(r, [*lattice.candidates.reshape(-1).tolist(), *proposals])
            selector = selector_record(lattice, picks, proposal.q, r.anchor)
            selected = Selected(Selection(proposals, selector), proposal.q, lattice.candidates)
        else:
            proposals = tuple(np.array(proposal.tokens).tolist())
            self._remember_text(r, proposals)
            selected = Selected(Selection(proposals), proposal.q, None)
        if proposal.forced is None:
            return selected
        self._remember_text(r, proposal.forced)
        return replace(selected, part=replace(selected.part, proposals=proposal.forced), q=None)

    def _verify(self, r: RoundScratch, proposal: Proposal, drafted: Drafted,
                sink: ProbeSink) -> Verification:
        """One target forward over [anchor, proposals], queued on the device."""
        gamma, temperature = r.gamma, self.options.temperature
        saved = self.target.checkpoint()
        ids = mx.concatenate([mx.array([r.anchor], dtype=mx.int32), proposal.tokens])
        logits, capture = self.target.forward(ids[None])
        logits = logits[0]
        sink("target_logits", None, logits)
        sink("capture", None, capture)
        target_argmax = mx.argmax(logits, axis=-1)
        if self.compare:
            self.compare.verify(r, logits, target_argmax)
        ranks = ()
        if self.options.ranks:
            ranks = rank_arrays(drafted.logits, logits[:gamma], target_argmax[:gamma], temperature)
        sampling = temperature > 0 and proposal.forced is None
        if sampling:
            logits = logits.astype(mx.float32)
        return Verification(logits, capture, target_argmax, ranks, saved, sampling)

    def _verdict(self, r: RoundScratch, selected: Selected, verification: Verification) -> Verified:
        """Decide the accepted prefix and the bonus token from the verify pass read back."""
        proposals = list(selected.part.proposals)
        targets = np.array(verification.argmax).tolist()
        if verification.sampling and selected.q is not None:
            probs = softmax_rows(np.array(verification.logits), self.options.temperature)
            accepted, bonus = rejection_sample(proposals, probs, self._dense_q(selected), self.rng)
        else:
            accepted, bonus = greedy_accept(proposals, targets)
        slots = ()
        if verification.ranks:
            values = rank_values(tuple(np.array(a) for a in verification.ranks),
                                 self.options.temperature)
            slots = slot_ranks(proposals, targets, accepted, selected.candidates, values)
        self._remember_text(r, {bonus, *targets, *(t.token for s in slots
                                                    for t in s.drafter_top + s.target_top)})
        return Verified(Verdict(tuple(targets), accepted, bonus, slots),
                        verification.capture, verification.saved)

    def _dense_q(self, selected: Selected) -> np.ndarray:
        """The drafter's q over the whole vocabulary (DFlash2's lives on its candidates)."""
        if selected.candidates is None:
            return selected.q
        dense = np.zeros((selected.q.shape[0], self.target.vocab_size))
        np.put_along_axis(dense, selected.candidates.astype(np.int64), selected.q, axis=1)
        return dense

    def _commit(self, r: RoundScratch, selected: Selected, verified: Verified) -> Commitment:
        """Append accepted + bonus; drop the target's rejected rows; keep their capture rows."""
        proposals = list(selected.part.proposals)
        accepted, bonus = verified.part.accepted, verified.part.bonus
        gamma = len(proposals)
        new = proposals[:accepted] + [bonus]
        keep = [r.anchor] + proposals[:accepted]
        rollback = Rollback()
        if accepted < gamma:
            if verified.saved is None:
                self.target.trim(gamma - accepted)
                rollback = Rollback("trim", gamma - accepted)
            else:
                self.target.restore_and_replay(verified.saved, gamma + 1, keep)
                rollback = Rollback("replay", len(keep))
        self.capture = verified.capture[:, : accepted + 1]
        self.capture_base = r.position
        # Stop at EOS and at the token budget (tokens past either are never committed).
        for i, token in enumerate(new):
            if token in self.eos_ids:
                new = new[: i + 1]
                break
        new = new[: self.options.max_tokens - len(self.generated)]
        self.tokens.extend(new)
        self._check_finished()
        self._text = self._committed_text()
        compare = self.compare.commit(r, selected, verified) if self.compare else None
        return Commitment(tuple(new), rollback, self._text, self.finish_reason, compare)

    def close(self) -> None:
        self.target.unhook()


class _StageClock:
    """Host time per stage of a chained round, which visits stages out of order (select and
    verify are read back after the one wait), with each stage's state before and after.
    `excluded` is a running total of seconds spent on something else within the stages
    (the --compare reference's seams), which their times leave out."""

    def __init__(self, state: Callable[[], EngineState], excluded: Callable[[], float]):
        self._state, self._excluded = state, excluded
        self._ms: dict[Stage, float] = {}
        self._before: dict[Stage, EngineState] = {}
        self._after: dict[Stage, EngineState] = {}
        self._running: Optional[Stage] = None
        self._t0 = 0.0

    def start(self, stage: Stage) -> None:
        self.stop()
        self._before[stage] = self._state()
        self.resume(stage)

    def resume(self, stage: Stage) -> None:
        self.stop()
        self._running, self._t0, self._x0 = stage, time.perf_counter(), self._excluded()

    def stop(self) -> None:
        if self._running is not None:
            stage = self._running
            seconds = time.perf_counter() - self._t0 - (self._excluded() - self._x0)
            self._ms[stage] = self._ms.get(stage, 0.0) + seconds * 1000
            # A stage moves the state when it is queued; reading it back moves nothing.
            self._after.setdefault(stage, self._state())
            self._running = None

    def records(self) -> list[StageRecord]:
        return [StageRecord(s.value, self._before[s], self._after[s], self._ms[s]) for s in Stage]
