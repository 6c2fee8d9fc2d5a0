"""The target decoding alone, and the check that speculative decoding changed nothing.

`target_decode` is the reference a speculative decode is judged against, for text and for
speed: the target's own forward, one token at a time, no drafter, no capture hooks. It
stops exactly where a Session stops (EOS included, or the token budget) and is timed the
same way the bench times a Session: prefill apart, then the decode loop on the wall clock.

`compare` finds the first position where a speculative decode left the target's greedy
text and measures the target's own logit margin (top1 - top2) there, so a report can tell
a real bug (a large margin) from float noise between batched and one-token forwards (a
near tie). Plain data out; no Textual, no rich.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import mlx.core as mx
import numpy as np

from .acceptance import softmax_rows
from .target import PREFILL_CHUNK, Target


@dataclass(frozen=True)
class BaselineRun:
    tokens: tuple[int, ...]  # generated tokens; the first comes from the prefill logits
    prefill_s: float
    decode_s: float  # every token after the first, one forward each
    finish_reason: str  # "eos" | "length" | "context"
    # the first generated token picked from logits that held NaN or Inf (None: none did): a
    # target that overflows (float16) decodes its own garbage, which a speculative decode
    # then matches, so equality with it checks nothing from there on
    nonfinite_at: Optional[int] = None

    @property
    def decode_tokens(self) -> int:
        """Tokens the timed decode loop produced (all but the prefill's first)."""
        return max(len(self.tokens) - 1, 0)


@dataclass(frozen=True)
class Margin:
    """The target's view of one position: its two best tokens and the gap between them."""

    top1: int
    top1_logit: float
    top2: int
    top2_logit: float

    @property
    def margin(self) -> float:
        return self.top1_logit - self.top2_logit


@dataclass(frozen=True)
class Divergence:
    index: int  # first differing generated token, 0-based
    position: int  # its absolute position (prompt tokens + index)
    reference: Optional[int]  # the target's greedy token there (None: reference ended)
    candidate: Optional[int]  # what the speculative decode committed (None: it ended)
    target: Margin  # the target's logits there, recomputed from the common prefix
    candidate_logit: Optional[float]  # the target's logit of the candidate token

    @property
    def margin(self) -> float:
        return self.target.margin


def eos_ids(target: Target) -> set[int]:
    """The same stop set a Session uses."""
    return set(getattr(target.tokenizer, "eos_token_ids", ()) or ())


def _prefill(target: Target, ids: Sequence[int]) -> mx.array:
    """Fresh cache, prompt in chunks as Target.prefill does; returns the last row's logits."""
    target.reset()
    logits = None
    for start in range(0, len(ids), PREFILL_CHUNK):
        logits, _ = target.forward(mx.array([list(ids[start:start + PREFILL_CHUNK])]))
        mx.eval(logits, [c.state for c in target.cache])
    return logits[0, -1]


def target_decode(target: Target, prompt_ids: Sequence[int], max_tokens: int, *,
                  temperature: float = 0.0, seed: int = 0,
                  on_token: Callable[[int], None] = lambda n: None) -> BaselineRun:
    """Decode with the target alone. Greedy at temperature 0 (the losslessness reference);
    sampled otherwise (a speed reference only: a sampled text is not comparable).
    `on_token(1)` is called per generated token (progress; the Session side reports per round)."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    # The capture wrappers would record every layer output the drafter needs; the target
    # decoding alone has no drafter, so it runs without them.
    target.unhook()
    stop = eos_ids(target)
    rng = np.random.default_rng(seed)

    tokens: list[int] = []
    nonfinite_at = None

    def take(logits: mx.array) -> None:
        """Append the next token, noting the first one picked from NaN/Inf logits."""
        nonlocal nonfinite_at
        finite = mx.isfinite(logits).all()  # evaluated with the pick: no extra wait
        if temperature <= 0:
            token = mx.argmax(logits)
            mx.eval(token, finite)
            tokens.append(int(token.item()))
        else:
            mx.eval(logits, finite)
            p = softmax_rows(np.array(logits.astype(mx.float32))[None], temperature)[0]
            tokens.append(int(rng.choice(len(p), p=p)))
        if nonfinite_at is None and not finite.item():
            nonfinite_at = len(tokens) - 1

    t0 = time.perf_counter()
    take(_prefill(target, prompt_ids))
    t1 = time.perf_counter()
    on_token(1)
    # the next forward runs at position len(prompt_ids) + len(tokens) - 1: inside the
    # context the target declares (a Session stops there too, as "context")
    limit = target.context_length
    room = lambda: limit is None or len(prompt_ids) + len(tokens) <= limit  # noqa: E731
    while tokens[-1] not in stop and len(tokens) < max_tokens and room():
        logits, _ = target.forward(mx.array([[tokens[-1]]]))
        take(logits[0, -1])
        on_token(1)
    t2 = time.perf_counter()
    reason = "eos" if tokens[-1] in stop else "length" if len(tokens) >= max_tokens else "context"
    return BaselineRun(tuple(tokens), t1 - t0, t2 - t1, reason, nonfinite_at)


def first_divergence(reference: Sequence[int], candidate: Sequence[int]) -> Optional[int]:
    """Index of the first differing token; a decode that stops early or runs on differs at
    the shorter one's length. None when they are equal."""
    for i, (a, b) in enumerate(zip(reference, candidate)):
        if a != b:
            return i
    if len(reference) != len(candidate):
        return min(len(reference), len(candidate))
    return None


def logit_margin(target: Target, prompt_ids: Sequence[int], prefix: Sequence[int],
                 token: Optional[int] = None) -> tuple[Margin, Optional[float]]:
    """The target's two best next tokens after prompt + prefix (one fresh forward), and its
    logit of `token` there. Resets the target's cache."""
    target.unhook()
    logits = _prefill(target, list(prompt_ids) + list(prefix)).astype(mx.float32)
    top = mx.argpartition(-logits, kth=1)[:2]
    mx.eval(logits, top)
    values = np.array(logits)
    a, b = (int(t) for t in np.array(top))
    if values[b] > values[a]:
        a, b = b, a
    margin = Margin(a, float(values[a]), b, float(values[b]))
    return margin, None if token is None else float(values[token])


def compare(target: Target, prompt_ids: Sequence[int], reference: Sequence[int],
            candidate: Sequence[int]) -> Optional[Divergence]:
    """None when the candidate decode equals the reference; otherwise where and how it left."""
    index = first_divergence(reference, candidate)
    if index is None:
        return None
    ref = reference[index] if index < len(reference) else None
    cand = candidate[index] if index < len(candidate) else None
    margin, cand_logit = logit_margin(target, prompt_ids, reference[:index], cand)
    return Divergence(index=index, position=len(prompt_ids) + index, reference=ref,
                      candidate=cand, target=margin, candidate_logit=cand_logit)
