"""Per-slot ranks: where the target's own token stood in the drafter's logits.

The rank at slot s is the number of drafter logits in slot s strictly greater than the logit
of the target's argmax at verify row s (0: the drafter's top choice was the target's). The
device computes ranks, the drafter's probability of the target token and both models' top
tokens in one go (`rank_arrays`); `slot_ranks` turns the evaluated arrays into records.
"""

from __future__ import annotations

from typing import Optional

import mlx.core as mx
import numpy as np

from .records import SlotRank, TopToken

TOP_TOKENS = 5


def rank_arrays(draft_logits: mx.array, target_logits: mx.array, target_tokens: mx.array,
                temperature: float) -> tuple[mx.array, ...]:
    """Device side, unevaluated: (rank, p_target, drafter top ids, logits, probs, target top
    ids, logits, probs), one row per slot. Probabilities are at `temperature` when > 0."""
    d = draft_logits.astype(mx.float32)
    t = target_logits.astype(mx.float32)
    scale = 1.0 / temperature if temperature > 0 else 1.0
    d_logp = d * scale - mx.logsumexp(d * scale, axis=-1, keepdims=True)
    t_logp = t * scale - mx.logsumexp(t * scale, axis=-1, keepdims=True)
    at_target = mx.take_along_axis(d, target_tokens[:, None], axis=-1)
    rank = (d > at_target).sum(axis=-1)
    p_target = mx.exp(mx.take_along_axis(d_logp, target_tokens[:, None], axis=-1))[:, 0]
    return (rank, p_target, *_top(d, d_logp), *_top(t, t_logp))


def _top(logits: mx.array, logp: mx.array, n: int = TOP_TOKENS):
    n = min(n, logits.shape[-1])
    ids = mx.argpartition(-logits, kth=n - 1, axis=-1)[:, :n]
    vals = mx.take_along_axis(logits, ids, axis=-1)
    order = mx.argsort(-vals, axis=-1)
    ids = mx.take_along_axis(ids, order, axis=-1)
    return ids, mx.take_along_axis(logits, ids, axis=-1), mx.exp(mx.take_along_axis(logp, ids, axis=-1))


def slot_ranks(proposals: list[int], targets: list[int], accepted: int,
               candidates: Optional[np.ndarray],
               arrays: tuple[np.ndarray, ...]) -> tuple[SlotRank, ...]:
    """Host side: one SlotRank per proposal from `rank_arrays`, evaluated. candidates: the
    DFlash2 selector's top-K per slot (None for DFlash)."""
    rank, p_target, d_ids, d_logits, d_probs, t_ids, t_logits, t_probs = arrays
    out = []
    for s, proposal in enumerate(proposals):
        out.append(SlotRank(
            slot=s, proposal=proposal, target=targets[s], rank=int(rank[s]),
            p_target=float(p_target[s]),
            in_candidates=None if candidates is None else bool(targets[s] in candidates[s]),
            after_rejection=s > accepted, accepted=s < accepted,
            drafter_top=_tops(d_ids[s], d_logits[s], d_probs[s]),
            target_top=_tops(t_ids[s], t_logits[s], t_probs[s]),
        ))
    return tuple(out)


def _tops(ids, logits, probs) -> tuple[TopToken, ...]:
    return tuple(TopToken(int(i), float(l), float(p)) for i, l, p in zip(ids, logits, probs))
