"""Deciding how many proposals the target accepts (host side, numpy).

Greedy: the longest prefix where each proposal equals the target's argmax one row earlier;
the bonus is the target's argmax after it. Temperature > 0: standard speculative rejection
sampling against the drafter's q (for DFlash2, q lives on the selector's K candidates), so
the committed tokens follow the target's own sampling distribution.
"""

from __future__ import annotations

import numpy as np


def greedy_accept(proposals: list[int], target_argmax: list[int]) -> tuple[int, int]:
    accepted = 0
    while accepted < len(proposals) and proposals[accepted] == target_argmax[accepted]:
        accepted += 1
    return accepted, int(target_argmax[accepted])


def softmax_rows(logits: np.ndarray, temperature: float) -> np.ndarray:
    """Each row's distribution at `temperature`. A row of logits holding NaN or +Inf (an
    overflowed model) has none: it becomes the greedy pick's one-hot, so sampling goes on
    as a temperature of 0 would (numpy's sampler refuses NaN probabilities with a
    traceback) and the probes still show where the NaN began."""
    z = logits.astype(np.float64) / temperature
    with np.errstate(invalid="ignore", over="ignore"):
        z -= z.max(axis=-1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=-1, keepdims=True)
    bad = ~np.isfinite(p).all(axis=-1)
    if bad.any():
        p[bad] = 0.0
        p[bad, np.argmax(logits[bad], axis=-1)] = 1.0
    return p


def rejection_sample(proposals: list[int], target_probs: np.ndarray, q_dense: np.ndarray,
                     rng: np.random.Generator) -> tuple[int, int]:
    """target_probs [gamma+1, V]; q_dense [gamma, V]: the drafter's probability of every
    token in each slot (zero off the candidates for DFlash2)."""
    gamma = len(proposals)
    for i, token in enumerate(proposals):
        p, q = target_probs[i, token], q_dense[i, token]
        if rng.uniform() * q < p:
            continue
        residual = np.maximum(target_probs[i] - q_dense[i], 0.0)
        total = residual.sum()
        dist = residual / total if total > 0 else target_probs[i]
        return i, int(rng.choice(len(dist), p=dist))
    return gamma, int(rng.choice(target_probs.shape[1], p=target_probs[gamma]))
