"""The target's own greedy continuations, many sequences at once.

mlx-lm's BatchGenerator does continuous batching: prompts of different lengths are
prefilled together (right-padded, its caches record the padding) and decoded together,
finished sequences leave and waiting ones join. Its default sampler is argmax, so every
continuation is the target's greedy choice at every step. tests/test_distill_data.py
holds it to that against a one-sequence greedy loop on both fixture targets (an attention
model and a recurrent hybrid).

The stop token is kept at the end of a continuation that stopped: the drafter should
learn to propose it, since the engine commits it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Optional


@dataclass
class Continuation:
    index: int  # position in the list of prompts given
    tokens: list[int]  # the generated tokens (the stop token included when it stopped)
    stopped: bool  # True: ended on a stop token; False: hit max_new_tokens


def greedy_continuations(model, prompts: list[list[int]], max_new_tokens: int,
                         stop_ids: Iterable[int], batch_size: int,
                         should_stop: Callable[[], bool] = lambda: False,
                         ) -> Iterable[Continuation]:
    """Yields each prompt's continuation as it finishes (not in prompt order).

    `should_stop()` is polled between decode steps; when it says so, the generator stops
    and the sequences still in flight are dropped (a later call can redo them).
    """
    from mlx_lm.generate import BatchGenerator

    if not prompts:
        return
    generator = BatchGenerator(
        model, max_tokens=max_new_tokens, stop_tokens=[[int(t)] for t in stop_ids],
        completion_batch_size=batch_size, prefill_batch_size=min(batch_size, 64),
    )
    try:
        uids = generator.insert([list(p) for p in prompts], [max_new_tokens] * len(prompts))
        index = {uid: i for i, uid in enumerate(uids)}
        produced: dict[int, list[int]] = {uid: [] for uid in uids}
        while not should_stop():
            responses = generator.next_generated()
            if not responses:
                break
            for response in responses:
                produced[response.uid].append(int(response.token))
                if response.finish_reason is not None:
                    yield Continuation(index[response.uid], produced.pop(response.uid),
                                       response.finish_reason == "stop")
    finally:
        generator.close()


def stop_token_ids(tokenizer) -> list[int]:
    """EOS ids of an mlx-lm TokenizerWrapper (a set) or a plain tokenizer (an int)."""
    many = getattr(tokenizer, "eos_token_ids", None)
    ids = {int(many)} if isinstance(many, int) else set(int(t) for t in many or ())
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is not None:
        ids.add(int(eos))
    return sorted(ids)


def generate_texts(model, tokenizer, prompts: list[list[int]], max_new_tokens: int,
                   batch_size: int, should_stop: Callable[[], bool] = lambda: False
                   ) -> list[Optional[str]]:
    """Greedy replies as text (stop token dropped); None for any not finished in time."""
    stops = stop_token_ids(tokenizer)
    out: list[Optional[str]] = [None] * len(prompts)
    for c in greedy_continuations(model, prompts, max_new_tokens, stops, batch_size, should_stop):
        tokens = c.tokens[:-1] if c.stopped else c.tokens
        out[c.index] = tokenizer.decode(tokens)
    return out
