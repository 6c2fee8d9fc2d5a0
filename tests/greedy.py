"""The target's own greedy decode, computed independently of the engine through mlx-lm, and
forced proposals made from it."""

from __future__ import annotations

import random
from functools import lru_cache

import mlx.core as mx
from mlx_lm import load as mlx_lm_load
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache


@lru_cache(maxsize=8)
def load_reference(target_dir: str):
    """mlx-lm's own load of a fixture target (a separate model instance from the engine's)."""
    model, tokenizer = mlx_lm_load(target_dir)
    return model, tokenizer


def greedy_tokens(model, prompt_ids: list[int], max_tokens: int, eos_ids=()) -> list[int]:
    out = []
    cache = make_prompt_cache(model)
    for token, _ in generate_step(mx.array(prompt_ids), model, max_tokens=max_tokens,
                                  sampler=lambda logits: mx.argmax(logits, axis=-1),
                                  prompt_cache=cache):
        token = int(token)
        out.append(token)
        if token in eos_ids:
            break
    return out


def noisy_oracle(expected: list[int], prompt_len: int, seed: int):
    """Proposes the target's true continuation, with a wrong token at a random slot in most
    rounds, so every accepted length 0..gamma (and so every rollback size) is exercised."""
    rng = random.Random(seed)

    def propose(tokens: list[int], gamma: int) -> list[int]:
        done = len(tokens) - prompt_len
        truth = (expected[done:] + [0] * gamma)[:gamma]
        wrong_at = rng.randrange(gamma + 1)  # gamma: no wrong token this round
        return [t if i != wrong_at else (t + 1) % 64 for i, t in enumerate(truth)]

    return propose
