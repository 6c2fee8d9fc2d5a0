"""A speculative decode that can be stepped one stage at a time (DESIGN.md section 4).

A round is five stages, in order, each a method below: context -> draft -> select ->
verify -> commit. Each stage reads and writes the session's state, probes its buffers and
returns the round's record so far. Only plain data leaves: every MLX array stays here.

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
from typing import Callable, Iterator, Optional

import mlx.core as mx
import numpy as np

from .acceptance import greedy_accept, rejection_sample, softmax_rows
from .draft_config import DraftConfig
from .drafter import DraftModel, block_masks
from .errors import InputError
from .probes import ProbeSink, first_nonfinite
from .quantize import describe as describe_quantization
from .records import (
    EngineState, PrefillRecord, Rollback, RoundRecord, SelectorSlot, Selector, SessionInfo,
    SlotRank, StageRecord, TopToken,
)
from .selector import lattice_arrays, to_lattice, walk
from .target import Target, backend

TOP_TOKENS = 5


class Stage(str, Enum):
    CONTEXT = "context"
    DRAFT = "draft"
    SELECT = "select"
    VERIFY = "verify"
    COMMIT = "commit"


STAGES = tuple(Stage)


class SessionFinished(Exception):
    """Stepping a session that already hit EOS or its token budget."""


@dataclass
class SessionOptions:
    gamma: Optional[int] = None  # proposals per round; default: the drafter's block_size - 1
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 256
    probes: bool = True
    keep_raw: bool = False
    layer_offset: int = 0
    # Forced proposals, for tests and what-if debugging: called with the committed tokens
    # and gamma, returns the gamma proposals to verify instead of the drafter's. The drafter
    # still runs, so its probes, ranks and selector stay visible.
    proposer: Optional[Callable[[list[int], int], list[int]]] = None


class ContextCache:
    """One drafter layer's context keys/values. Sliding layers keep only window - 1 rows."""

    def __init__(self, keep: Optional[int]):
        self.keep = keep
        self.keys: Optional[mx.array] = None
        self.values: Optional[mx.array] = None

    def append(self, k: mx.array, v: mx.array) -> None:
        if self.keys is not None:
            k = mx.concatenate([self.keys, k], axis=2)
            v = mx.concatenate([self.values, v], axis=2)
        if self.keep is not None and k.shape[2] > self.keep:
            k, v = k[:, :, -self.keep:], v[:, :, -self.keep:]
        self.keys, self.values = k, v

    @property
    def length(self) -> int:
        return 0 if self.keys is None else int(self.keys.shape[2])


def check_pair(target: Target, config: DraftConfig, layer_offset: int, where: str) -> tuple[int, ...]:
    """Refuse a drafter that cannot run on this target; returns the capture layer ids."""
    if config.hidden_size != target.hidden_size:
        raise InputError(
            f"{where}: drafter hidden_size {config.hidden_size} does not match the target's "
            f"hidden size {target.hidden_size}"
        )
    if config.vocab_size != target.vocab_size:
        raise InputError(
            f"{where}: drafter vocab_size {config.vocab_size} does not match the target's "
            f"vocabulary of {target.vocab_size}"
        )
    if not 0 <= config.mask_token_id < target.vocab_size:
        raise InputError(
            f"{where}: mask_token_id {config.mask_token_id} is out of range for a vocabulary "
            f"of {target.vocab_size} (expected 0..{target.vocab_size - 1})"
        )
    ids = tuple(i + layer_offset for i in config.target_layer_ids)
    for n, (given, shifted) in enumerate(zip(config.target_layer_ids, ids)):
        if not 0 <= shifted < target.num_layers:
            shift = f" + layer offset {layer_offset}" if layer_offset else ""
            raise InputError(
                f"{where}: target_layer_ids[{n}] = {given}{shift} is out of range for a target "
                f"with {target.num_layers} layers (expected 0..{target.num_layers - 1})"
            )
    return ids


class Session:
    def __init__(self, target: Target, drafter: DraftModel, prompt_ids: list[int], *,
                 options: SessionOptions = SessionOptions(), prompt_text: str = "",
                 drafter_path: str = "", dtype: str = "float32"):
        config = drafter.config
        self.target, self.drafter, self.config = target, drafter, config
        self.options = options
        self.layer_ids = check_pair(target, config, options.layer_offset, drafter_path or "drafter")
        if not prompt_ids:
            raise InputError("the prompt is empty (give --prompt TEXT or --prompt-file F)")
        self.gamma = self._check_gamma(config.block_size - 1 if options.gamma is None else options.gamma)
        self.prompt_ids = list(prompt_ids)
        self.eos_ids = set(getattr(target.tokenizer, "eos_token_ids", ()) or ())
        self.rng = np.random.default_rng(options.seed)
        self.embed_scale = target.embed_scale * config.input_embedding_scale
        self.dtype = dtype
        self.info = SessionInfo(
            target_path=str(target.spec.path), target_kind=target.spec.kind,
            target_layers=target.num_layers, target_hidden=target.hidden_size,
            vocab_size=target.vocab_size, drafter_path=str(drafter_path),
            drafter_kind=config.kind_label, drafter_layers=config.num_hidden_layers,
            drafter_hidden=config.hidden_size, block_size=config.block_size,
            target_layer_ids=self.layer_ids, layer_offset=options.layer_offset,
            mask_token_id=config.mask_token_id,
            top_k=config.selector_top_k if config.is_dflash2 else None,
            dtype=dtype, backend=backend(),
            rollback_kind="trim" if target.trimmable else "replay",
            temperature=options.temperature, seed=options.seed, prompt=prompt_text,
            prompt_tokens=len(prompt_ids), max_tokens=options.max_tokens,
            notes=self._notes(), drafter_quantization=describe_quantization(drafter),
        )
        self._token_text: dict[int, str] = {}
        self.prefill_record: Optional[PrefillRecord] = None
        self.rounds: list[RoundRecord] = []

    # ---- setup ---------------------------------------------------------------------------

    def _check_gamma(self, gamma: int) -> int:
        if gamma < 1:
            raise InputError(f"--block {gamma}: expected at least 1 proposal per round")
        window = self.config.sliding_window
        if "sliding_attention" in self.config.layer_types and gamma + 1 > window:
            raise InputError(
                f"--block {gamma}: a block of {gamma + 1} rows exceeds the drafter's "
                f"sliding_window {window}; its sliding layers cannot see their own block"
            )
        return gamma

    def _notes(self) -> tuple[str, ...]:
        notes = list(self.config.notes)
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
        self.gamma = self._check_gamma(gamma)
        return self.gamma

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
        """Display text of each token id (a token that is part of a UTF-8 character shows
        its bytes, e.g. '\\xe2', rather than a replacement character)."""
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
        t0 = time.perf_counter()
        self.target.reset()
        self.target.hook(self.layer_ids)
        self.ctx_caches = [
            ContextCache(self.config.sliding_window - 1 if t == "sliding_attention" else None)
            for t in self.config.layer_types
        ]
        self.cursor, self.capture_base, self.capture = 0, 0, None
        self.tokens = list(self.prompt_ids)
        self.finish_reason: Optional[str] = None
        self._next = Stage.CONTEXT
        self._round: Optional[RoundRecord] = None
        self.rounds = []
        self.rng = np.random.default_rng(self.options.seed)

        sink = ProbeSink("prefill", self.options.probes)
        logits, capture = self.target.prefill(self.prompt_ids)
        sink("capture", None, capture)
        sink("target_logits", None, logits[None])
        mx.eval(capture, *sink.pending())
        first = self._sample_target(np.array(logits.astype(mx.float32)))
        self.capture = capture
        self.tokens.append(first)
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

    # ---- stepping ------------------------------------------------------------------------

    def step_stage(self) -> RoundRecord:
        if self.finish_reason is not None:
            raise SessionFinished(self.finish_reason)
        stage = self._next
        if stage is Stage.CONTEXT:
            self._begin_round()
        before = self.state()
        t0 = time.perf_counter()
        sink = ProbeSink(stage.value, self.options.probes, self.options.keep_raw)
        fields = getattr(self, f"_{stage.value}")(sink) or {}
        rows = sink.rows()
        ms = (time.perf_counter() - t0) * 1000
        after = self.state()
        record = self._round
        probes = record.probes + tuple(rows)
        raw = record.raw
        if self.options.keep_raw:
            raw = {**(raw or {}), **sink.raw()}
        self._round = replace(
            record, **fields,
            stages=record.stages + (StageRecord(stage.value, before, after, ms),),
            probes=probes, first_nonfinite=first_nonfinite(probes), state_after=after, raw=raw,
        )
        index = STAGES.index(stage)
        self._next = STAGES[(index + 1) % len(STAGES)]
        if stage is Stage.COMMIT:
            self.rounds.append(self._round)
        return self._round

    def step_round(self) -> RoundRecord:
        """Run the rest of the current round (a whole round from its start)."""
        record = self.step_stage()
        while not record.complete:
            record = self.step_stage()
        return record

    def run(self, rounds: Optional[int] = None) -> Iterator[RoundRecord]:
        done = 0
        while self.finish_reason is None and (rounds is None or done < rounds):
            yield self.step_round()
            done += 1

    @property
    def current(self) -> Optional[RoundRecord]:
        return self._round

    def _begin_round(self) -> None:
        budget = self.options.max_tokens - len(self.generated)
        state = self.state()
        self._round = RoundRecord(
            round=len(self.rounds), position=len(self.tokens) - 1, anchor=self.tokens[-1],
            gamma=min(self.gamma, budget), state_before=state, state_after=state,
            committed_text=self._committed_text(),
            token_text=self.token_text([self.tokens[-1]]),
        )

    def _committed_text(self) -> str:
        return self.target.tokenizer.decode(self.generated)

    # ---- the five stages -----------------------------------------------------------------

    def _context(self, sink: ProbeSink) -> dict:
        """Write the capture rows into every drafter layer's context cache."""
        ctx = self.drafter.project_context(self.capture, sink)
        kv = self.drafter.context_kv(ctx, self.capture_base, sink)
        for cache, (k, v) in zip(self.ctx_caches, kv):
            cache.append(k, v)
        mx.eval([(c.keys, c.values) for c in self.ctx_caches], *sink.pending())
        self.cursor += int(self.capture.shape[1])
        self.capture_base, self.capture = self.cursor, None
        assert self.cursor == len(self.tokens) - 1, "context: cursor must reach the anchor"
        return {}

    def _draft(self, sink: ProbeSink) -> dict:
        """The block forward: [anchor, mask x gamma] at positions p .. p+gamma."""
        gamma, position = self._round.gamma, self._round.position
        block = mx.array([[self._round.anchor] + [self.config.mask_token_id] * gamma])
        x = self.target.embed_tokens(block) * self.embed_scale
        x = x.astype(self.drafter.dtype)
        kv = [(c.keys, c.values) for c in self.ctx_caches]
        masks = block_masks(self.config, [c.length for c in self.ctx_caches], gamma + 1)
        hidden = self.drafter.block_hidden(x, kv, position, masks, sink)[0, 1:]
        sink("final_normed", None, hidden)
        logits = self.drafter.logits(hidden, self.target.lm_head)
        sink("logits", None, logits)
        self._hidden, self._logits, self._hproj = hidden, logits, None
        if self.config.is_dflash2:
            self._hproj = self.drafter.candidate_selector.hidden_projection(hidden)
            sink("hproj", None, self._hproj)
        mx.eval(hidden, logits, self._hproj if self._hproj is not None else [], *sink.pending())
        return {}

    def _select(self, sink: ProbeSink) -> dict:
        """DFlash2: the selector walk over the top-K lattice. DFlash: argmax (or sample)."""
        fields = self._drafter_select()
        if self.options.proposer is not None:
            forced = [int(t) for t in self.options.proposer(list(self.tokens), self._round.gamma)]
            if len(forced) != self._round.gamma:
                raise ValueError(f"proposer returned {len(forced)} tokens for gamma {self._round.gamma}")
            self._q = None  # forced proposals are verified greedily
            fields["proposals"] = tuple(forced)
            fields["token_text"] = {**fields["token_text"], **self.token_text(forced)}
        return fields

    def _drafter_select(self) -> dict:
        temperature = self.options.temperature
        self._candidates = None
        if self.config.is_dflash2:
            arrays = lattice_arrays(
                self.drafter.candidate_selector, self._hproj, self._logits,
                self._round.anchor, self.config.selector_top_k,
            )
            mx.eval(*arrays)
            lattice = to_lattice(*(np.array(a) for a in arrays))
            picks, q_rows = walk(lattice, temperature, self.rng)
            proposals = [int(lattice.candidates[s, i]) for s, i in enumerate(picks)]
            self._candidates = lattice.candidates
            self._q = q_rows
            selector = self._selector_record(lattice, picks, q_rows)
            ids = [int(t) for t in lattice.candidates.reshape(-1)]
            return {"proposals": tuple(proposals), "selector": selector,
                    "token_text": {**self._round.token_text, **self.token_text(ids + proposals)}}
        if temperature > 0:
            probs = softmax_rows(np.array(self._logits.astype(mx.float32)), temperature)
            proposals = [int(self.rng.choice(probs.shape[1], p=row)) for row in probs]
            self._q = probs
        else:
            proposals = [int(t) for t in np.array(mx.argmax(self._logits, axis=-1))]
            self._q = None
        return {"proposals": tuple(proposals),
                "token_text": {**self._round.token_text, **self.token_text(proposals)}}

    def _selector_record(self, lattice, picks, q_rows) -> Selector:
        slots = []
        prev_index, prev_token = 0, self._round.anchor
        for s, (unary, edges) in enumerate(zip(lattice.unary, lattice.edges)):
            edge = edges[prev_index]
            score = unary + edge
            cands = lattice.candidates[s]
            slots.append(SelectorSlot(
                slot=s, candidates=tuple(int(c) for c in cands),
                unary=tuple(float(u) for u in unary), edge=tuple(float(e) for e in edge),
                score=tuple(float(v) for v in score),
                chosen=int(cands[picks[s]]), argmax=int(cands[0]),
                chosen_index=int(picks[s]), argmax_index=0, predecessor=int(prev_token),
                lattice=tuple(tuple(float(v) for v in unary + row) for row in edges),
                q=None if q_rows is None else tuple(float(v) for v in q_rows[s]),
            ))
            prev_index, prev_token = picks[s], int(cands[picks[s]])
        return Selector(top_k=int(lattice.candidates.shape[1]), slots=tuple(slots))

    def _verify(self, sink: ProbeSink) -> dict:
        """One target forward over [anchor, proposals]; decide the accepted prefix and bonus."""
        proposals = list(self._round.proposals)
        gamma = len(proposals)
        self._saved = self.target.checkpoint()
        logits, capture = self.target.forward(mx.array([[self._round.anchor] + proposals]))
        logits = logits[0]
        sink("target_logits", None, logits)
        sink("capture", None, capture)
        target_argmax = mx.argmax(logits, axis=-1)
        rank_arrays = _rank_arrays(self._logits, logits[:gamma], target_argmax[:gamma],
                                   self.options.temperature)
        mx.eval(logits, capture, target_argmax, *rank_arrays, *sink.pending())
        self._verify_capture = capture
        targets = [int(t) for t in np.array(target_argmax)]
        if self.options.temperature > 0 and self._q is not None:
            probs = softmax_rows(np.array(logits.astype(mx.float32)), self.options.temperature)
            accepted, bonus = rejection_sample(proposals, probs, self._dense_q(), self.rng)
        else:
            accepted, bonus = greedy_accept(proposals, targets)
        ranks = self._ranks(proposals, targets, accepted, *(np.array(a) for a in rank_arrays))
        ids = {bonus, *targets}
        for r in ranks:
            ids.update(t.token for t in r.drafter_top + r.target_top)
        return {"target_tokens": tuple(targets), "accepted": accepted, "bonus": bonus,
                "ranks": ranks, "token_text": {**self._round.token_text, **self.token_text(ids)}}

    def _dense_q(self) -> np.ndarray:
        if not self.config.is_dflash2:
            return self._q
        dense = np.zeros((self._q.shape[0], self.target.vocab_size))
        np.put_along_axis(dense, self._candidates.astype(np.int64), self._q, axis=1)
        return dense

    def _ranks(self, proposals, targets, accepted, rank, p_target, d_ids, d_logits, d_probs,
               t_ids, t_logits, t_probs) -> tuple[SlotRank, ...]:
        out = []
        for s, proposal in enumerate(proposals):
            in_cands = None
            if self._candidates is not None:
                in_cands = bool(targets[s] in self._candidates[s])
            out.append(SlotRank(
                slot=s, proposal=proposal, target=targets[s], rank=int(rank[s]),
                p_target=float(p_target[s]), in_candidates=in_cands,
                after_rejection=s > accepted, accepted=s < accepted,
                drafter_top=tuple(TopToken(int(i), float(l), float(p))
                                  for i, l, p in zip(d_ids[s], d_logits[s], d_probs[s])),
                target_top=tuple(TopToken(int(i), float(l), float(p))
                                 for i, l, p in zip(t_ids[s], t_logits[s], t_probs[s])),
            ))
        return tuple(out)

    def _commit(self, sink: ProbeSink) -> dict:
        """Append accepted + bonus; drop the target's rejected rows; keep their capture rows."""
        proposals = list(self._round.proposals)
        accepted, bonus = self._round.accepted, self._round.bonus
        gamma = len(proposals)
        new = proposals[:accepted] + [bonus]
        keep = [self._round.anchor] + proposals[:accepted]
        rollback = Rollback()
        if accepted < gamma:
            if self._saved is None:
                self.target.trim(gamma - accepted)
                rollback = Rollback("trim", gamma - accepted)
            else:
                self.target.restore_and_replay(self._saved, gamma + 1, keep)
                rollback = Rollback("replay", len(keep))
        self._saved = None
        self.capture = self._verify_capture[:, : accepted + 1]
        self.capture_base = self._round.position
        self._verify_capture = None
        # Stop at EOS and at the token budget (tokens past either are never committed).
        for i, token in enumerate(new):
            if token in self.eos_ids:
                new = new[: i + 1]
                break
        new = new[: self.options.max_tokens - len(self.generated)]
        self.tokens.extend(new)
        self._check_finished()
        return {"committed_tokens": tuple(new), "rollback": rollback,
                "committed_text": self._committed_text(), "finish_reason": self.finish_reason}

    def close(self) -> None:
        self.target.unhook()


def _byte_decoder() -> dict[str, int]:
    """GPT-2 byte-level BPE's printable-character -> byte table."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) \
        + list(range(ord("\xae"), ord("\xff") + 1))
    chars, n = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


_BYTES = _byte_decoder()


def token_display(tokenizer, token: int) -> str:
    text = tokenizer.decode([token])
    if "\ufffd" not in text:
        return text
    piece = tokenizer.convert_ids_to_tokens(token)
    if isinstance(piece, str) and piece and all(ch in _BYTES for ch in piece):
        raw = bytes(_BYTES[ch] for ch in piece)
        return raw.decode("utf-8", errors="backslashreplace")
    return text


def _rank_arrays(draft_logits, target_logits, target_tokens, temperature):
    """Device side of the per-slot numbers: rank and probability of the target's token in the
    drafter's logits, and both models' top tokens."""
    d = draft_logits.astype(mx.float32)
    t = target_logits.astype(mx.float32)
    scale = 1.0 / temperature if temperature > 0 else 1.0
    d_logp = d * scale - mx.logsumexp(d * scale, axis=-1, keepdims=True)
    t_logp = t * scale - mx.logsumexp(t * scale, axis=-1, keepdims=True)
    at_target = mx.take_along_axis(d, target_tokens[:, None], axis=-1)
    rank = (d > at_target).sum(axis=-1)
    p_target = mx.exp(mx.take_along_axis(d_logp, target_tokens[:, None], axis=-1))[:, 0]
    return (rank, p_target, *_top(d, d_logp), *_top(t, t_logp))


def _top(logits, logp, n: int = TOP_TOKENS):
    n = min(n, logits.shape[-1])
    ids = mx.argpartition(-logits, kth=n - 1, axis=-1)[:, :n]
    vals = mx.take_along_axis(logits, ids, axis=-1)
    order = mx.argsort(-vals, axis=-1)
    ids = mx.take_along_axis(ids, order, axis=-1)
    return ids, mx.take_along_axis(logits, ids, axis=-1), mx.exp(mx.take_along_axis(logp, ids, axis=-1))
