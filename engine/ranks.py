"""Per-slot ranks: where the target's own token stood in the drafter's logits.

The rank at slot s is the number of drafter logits in slot s strictly greater than the logit
of the target's argmax at verify row s (0: the drafter's top choice was the target's); a NaN
logit counts as above it, and a NaN at the target's token puts it last (`rank_of`). The
device computes ranks and both models' top tokens in one go (`rank_arrays`); `rank_values`
normalizes what it gathered into probabilities and `slot_ranks` makes the records.
"""

from __future__ import annotations

from typing import Optional

import mlx.core as mx
import numpy as np

from .records import SlotRank, TopToken

TOP_TOKENS = 5
BLOCK = 128  # values per block in top_ids' first pass


def rank_arrays(draft_logits: mx.array, target_logits: mx.array, target_tokens: mx.array,
                temperature: float, host_normalizer: Optional[bool] = None) -> tuple[mx.array, ...]:
    """Device side, unevaluated: (rank, logit at the target token, top ids, top logits,
    normalizer); `rank_values` turns them, evaluated, into ranks and probabilities. rank and
    the logit at the target have one row per slot; the top arrays have 2 x slots rows, the
    drafter's slots first, then the target's, TOP_TOKENS each, best first.

    Both models' rows go through one log-normalizer and one top-token search (on a GPU a
    round is bound by its op count: each op costs ~12 us of host time at real scale), and
    only the few gathered values are normalized, never the whole vocabulary. The normalizer
    is the rows' logsumexp at `temperature` ([2 x slots]), or, with `host_normalizer`, the
    float32 rows themselves ([2 x slots, V]) for numpy to reduce after the round's wait:
    MLX's exp on a CPU costs ~23 ns a value against numpy's ~2.5, 18 ms a round at the
    sample's vocabulary. None: on the host when MLX runs on the CPU.
    """
    if host_normalizer is None:
        host_normalizer = mx.default_device() == mx.cpu
    slots = draft_logits.shape[0]
    both = mx.concatenate([draft_logits.astype(mx.float32), target_logits.astype(mx.float32)])
    ids = top_ids(both, min(TOP_TOKENS, both.shape[-1]))
    values = mx.take_along_axis(both, ids, axis=-1)
    draft = both[:slots]
    at_target = mx.take_along_axis(draft, target_tokens[:, None], axis=-1)[:, 0]
    rank = rank_of(draft, at_target)
    if host_normalizer:
        normalizer = both
    else:
        normalizer = mx.logsumexp(both * _scale(temperature), axis=-1)
    return rank, at_target, ids, values, normalizer


def rank_of(logits: mx.array, at_target: mx.array) -> mx.array:
    """[rows, V] float32 logits and each row's logit at the target token -> the rank: logits
    strictly above it, a NaN counted as above (V - 1 where the target's own logit is NaN).
    A drafter whose logits went NaN proposes garbage; counting its NaNs as "not above" gave
    rank 0, "the argmax was right", to every slot of a collapsed drafter (argmax 100% beside
    acc 0% in the aggregates). V minus the logits at or below it is the same count in one
    comparison: NaN compares false both ways."""
    vocab = logits.shape[-1]
    return mx.minimum(vocab - (logits <= at_target[:, None]).sum(axis=-1), vocab - 1)


def rank_values(arrays: tuple[np.ndarray, ...], temperature: float) -> tuple[np.ndarray, ...]:
    """Host side: `rank_arrays`, evaluated -> (rank, p_target, top ids, top logits, top
    probs). Reduces the rows in place when the normalizer was left to the host."""
    rank, at_target, ids, values, normalizer = arrays
    scale = _scale(temperature)
    if normalizer.ndim == 2:
        normalizer = _logsumexp_in_place(normalizer, scale)
    probs = np.exp(values * scale - normalizer[:, None])
    p_target = np.exp(at_target * scale - normalizer[:len(rank)])
    return rank, p_target, ids, values, probs


def _logsumexp_in_place(rows: np.ndarray, scale: float) -> np.ndarray:
    """Each row's logsumexp of rows x scale, overwriting rows (in place: a fresh 3 MB
    temporary a round costs more than the exp)."""
    if scale != 1.0:
        rows *= scale
    peak = rows.max(axis=-1, keepdims=True)
    rows -= peak
    np.exp(rows, out=rows)
    return np.log(rows.sum(axis=-1)) + peak[:, 0]


def _scale(temperature: float) -> float:
    return 1.0 / temperature if temperature > 0 else 1.0


def top_ids(x: mx.array, n: int) -> mx.array:
    """[rows, V] -> [rows, n]: the ids of each row's n largest values, largest first.

    A partition over the whole vocabulary is the costly part on a CPU (~2.4 ms a row at
    150k), so it runs on two small problems: the n blocks of BLOCK values with the largest
    maxima hold every one of the n largest values (at most n - 1 blocks have a maximum above
    the n-th largest value, and each block picked with a maximum equal to it holds one copy
    of it), then the n largest among those n x BLOCK values. Ties may resolve to either id.
    """
    rows, vocab = x.shape
    blocks = -(-vocab // BLOCK)
    if blocks <= 2 * n:  # small vocabularies: one partition is already cheap
        ids = mx.argpartition(-x, kth=n - 1, axis=-1)[:, :n]
    else:
        if blocks * BLOCK != vocab:
            x = mx.pad(x, [(0, 0), (0, blocks * BLOCK - vocab)], constant_values=-mx.inf)
        tiled = x.reshape(rows, blocks, BLOCK)
        best = mx.argpartition(-tiled.max(axis=-1), kth=n - 1, axis=-1)[:, :n]  # [rows, n]
        values = mx.take_along_axis(tiled, best[:, :, None], axis=1).reshape(rows, n * BLOCK)
        local = mx.argpartition(-values, kth=n - 1, axis=-1)[:, :n]
        ids = mx.take_along_axis(best, local // BLOCK, axis=-1) * BLOCK + local % BLOCK
        # a padding id only wins when a row has fewer than n values above -inf (or NaNs)
        ids = mx.minimum(ids, vocab - 1)
    order = mx.argsort(-mx.take_along_axis(x, ids, axis=-1), axis=-1)
    return mx.take_along_axis(ids, order, axis=-1)


def slot_ranks(proposals: list[int], targets: list[int], accepted: int,
               candidates: Optional[np.ndarray],
               arrays: tuple[np.ndarray, ...]) -> tuple[SlotRank, ...]:
    """Host side: one SlotRank per proposal from `rank_values`. candidates: the DFlash2
    selector's top-K per slot (None for DFlash)."""
    rank, p_target, ids, logits, probs = arrays
    slots = len(rank)
    out = []
    for s, proposal in enumerate(proposals):
        out.append(SlotRank(
            slot=s, proposal=proposal, target=targets[s], rank=int(rank[s]),
            p_target=float(p_target[s]),
            in_candidates=None if candidates is None else bool(targets[s] in candidates[s]),
            after_rejection=s > accepted, accepted=s < accepted,
            drafter_top=_tops(ids[s], logits[s], probs[s]),
            target_top=_tops(ids[slots + s], logits[slots + s], probs[slots + s]),
        ))
    return tuple(out)


def _tops(ids, logits, probs) -> tuple[TopToken, ...]:
    return tuple(TopToken(int(i), float(l), float(p)) for i, l, p in zip(ids, logits, probs))
