"""The target's own greedy decode, computed independently of the engine through mlx-lm."""

from __future__ import annotations

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
