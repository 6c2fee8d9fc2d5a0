"""The target's own continuations, greedy (or sampled), many sequences at once.

Prompts are sorted by length and decoded in static batches. The prefill is mlx-lm's own
batched prompt processing (PromptProcessingBatch: right-padded chunks, then its caches
roll the padding to the left and remember it, for attention and recurrent caches alike);
the decode is a bare loop, one forward and one argmax per step for the whole batch, with
no per-sequence work on the host (mlx-lm's continuous batching spends most of a step on
the host at large batches: about 2,000 tokens/s at batch 512 on an H200 for a 135M
target). A greedy sequence that stops early leaves the batch at the next check once
enough others have (COMPACT_AT); a sampled one keeps decoding with the batch. Tokens after
a stop token are dropped. tests/test_distill_data.py holds the result to a one-sequence
greedy loop on both fixture targets (an attention model and a recurrent hybrid).

The stop token is kept at the end of a continuation that stopped: the drafter should
learn to propose it, since the engine commits it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Optional

import mlx.core as mx
import numpy as np

SYNC_EVERY = 16  # decode steps between checks whether the whole batch has stopped
# Share of a greedy batch's rows that must have stopped before they are dropped from it.
# Dropping copies the live rows' caches, about what one decode step reads, so it pays as
# soon as a few steps remain; the threshold only keeps it from happening every sync.
COMPACT_AT = 0.125
# A batch of `batch_size` rows may hold this many tokens a row (prompt and continuation, the
# longest row counting for all); longer prompts go in smaller batches. Counting rows alone,
# an H200 ran out of memory prefilling the 643 longest prompts of stage 6 at batch 1024.
ROW_TOKENS = 512


@dataclass
class Continuation:
    index: int  # position in the list of prompts given
    tokens: list[int]  # the generated tokens (the stop token included when it stopped)
    stopped: bool  # True: ended on a stop token; False: hit max_new_tokens


def _prefill(model, prompts: list[list[int]]):
    """Batched caches holding every prompt but its last token, and those last tokens."""
    from mlx_lm.generate import PromptProcessingBatch
    from mlx_lm.models.cache import make_prompt_cache

    batch = PromptProcessingBatch(model, list(range(len(prompts))),
                                  [make_prompt_cache(model) for _ in prompts])
    if any(len(p) > 1 for p in prompts):
        batch.prompt([p[:-1] for p in prompts])
    return batch.prompt_cache, mx.array([p[-1] for p in prompts])


def _compactable(cache) -> bool:
    """Whether rows can leave this batch: attention caches only (a recurrent layer's state
    has its own filter, which no test here holds to the one-sequence loop)."""
    from mlx_lm.models.cache import BatchKVCache

    return all(type(c) is BatchKVCache for c in cache)


def _decode_batch(model, prompts: list[list[int]], max_new_tokens: int, stops: np.ndarray,
                  should_stop: Callable[[], bool], temperature: float = 0.0,
                  key: Optional[mx.array] = None) -> Optional[np.ndarray]:
    """[len(prompts), steps] tokens, greedy or (temperature > 0) sampled from `key`;
    None if should_stop() interrupted it. A row's tokens after its stop token are junk.

    Greedy decoding drops the rows that have stopped from the batch (their caches too) once
    they are a COMPACT_AT share of it: a static batch otherwise runs every row to its
    longest one's end. Sampled decoding keeps the batch whole, so that a seed draws the
    same tokens as before."""
    cache, token = _prefill(model, prompts)
    compact = temperature == 0 and _compactable(cache)
    out = np.zeros((len(prompts), max_new_tokens), dtype=np.int64)
    live = np.arange(len(prompts))  # the batch's rows, as rows of `out`
    finished = np.zeros(len(prompts), dtype=bool)
    steps, first = [], 0  # tokens of the steps since the last sync, and its step number
    for step in range(max_new_tokens):
        logits = model(token[:, None], cache=cache)[:, -1, :]
        if temperature > 0:
            key, draw = mx.random.split(key)
            token = mx.random.categorical(logits.astype(mx.float32) / temperature, key=draw)
        else:
            token = mx.argmax(logits, axis=-1)
        steps.append(token)
        mx.async_eval(token)
        if (step + 1) % SYNC_EVERY and step + 1 != max_new_tokens:
            continue
        block = np.array(mx.stack(steps, axis=1))
        out[live, first:step + 1] = block
        finished[live] |= np.isin(block, stops).any(axis=1)
        steps, first = [], step + 1
        if finished[live].all():
            return out[:, :step + 1]
        if should_stop():
            return None
        done = finished[live]
        if compact and done.mean() >= COMPACT_AT and step + 1 < max_new_tokens:
            keep = np.flatnonzero(~done)
            rows = mx.array(keep)
            for c in cache:
                c.filter(rows)
            token, live = token[rows], live[keep]
    return out


def decode_continuations(model, prompts: list[list[int]], max_new_tokens: int,
                         stop_ids: Iterable[int], batch_size: int,
                         should_stop: Callable[[], bool] = lambda: False,
                         temperature: float = 0.0, seed: int = 0,
                         ) -> Iterable[Continuation]:
    """Yields each prompt's continuation, a batch at a time (not in prompt order).

    `should_stop()` is polled between decode steps; when it says so, the batch in flight is
    dropped and nothing more is yielded (a later call can redo those prompts). With
    temperature > 0 the tokens are sampled, each batch from its own key made from `seed`.
    """
    stops = np.array(sorted(set(int(t) for t in stop_ids)) or [-1])
    for number, chunk in enumerate(batches([len(p) for p in prompts], max_new_tokens, batch_size)):
        if should_stop():
            return
        key = mx.random.key(seed * 100_003 + number) if temperature > 0 else None
        tokens = _decode_batch(model, [list(prompts[i]) for i in chunk], max_new_tokens,
                               stops, should_stop, temperature, key)
        if tokens is None:
            return
        for row, index in enumerate(chunk):
            hits = np.flatnonzero(np.isin(tokens[row], stops))
            if len(hits):
                yield Continuation(index, tokens[row, :hits[0] + 1].tolist(), True)
            else:
                yield Continuation(index, tokens[row].tolist(), False)


def batches(lengths: list[int], max_new_tokens: int, batch_size: int) -> Iterable[list[int]]:
    """Prompt indices, shortest first, in batches of at most `batch_size` rows and at most
    `batch_size * ROW_TOKENS` tokens (rows x the longest row's prompt and continuation);
    a prompt too long for that still gets a batch of its own."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    budget = batch_size * ROW_TOKENS
    chunk: list[int] = []
    for i in order:
        row = lengths[i] + max_new_tokens  # sorted, so the newest row is the longest
        if chunk and (len(chunk) == batch_size or (len(chunk) + 1) * row > budget):
            yield chunk
            chunk = []
        chunk.append(i)
    if chunk:
        yield chunk


def stop_token_ids(tokenizer) -> list[int]:
    """EOS ids of an mlx-lm TokenizerWrapper (a set) or a plain tokenizer (an int)."""
    many = getattr(tokenizer, "eos_token_ids", None)
    ids = {int(many)} if isinstance(many, int) else set(int(t) for t in many or ())
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is not None:
        ids.add(int(eos))
    return sorted(ids)


def generate_texts(model, tokenizer, prompts: list[list[int]], max_new_tokens: int,
                   batch_size: int, should_stop: Callable[[], bool] = lambda: False,
                   temperature: float = 0.0, seed: int = 0, only_stopped: bool = False,
                   ) -> list[Optional[str]]:
    """Replies as text (stop token dropped); None for any not finished in time. Greedy, or
    sampled at `temperature`; with only_stopped, a reply cut off by max_new_tokens is ""."""
    stops = stop_token_ids(tokenizer)
    out: list[Optional[str]] = [None] * len(prompts)
    for c in decode_continuations(model, prompts, max_new_tokens, stops, batch_size, should_stop,
                                  temperature, seed):
        tokens = c.tokens[:-1] if c.stopped else c.tokens
        out[c.index] = "" if only_stopped and not c.stopped else tokenizer.decode(tokens)
    return out
