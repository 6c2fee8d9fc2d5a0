"""DFlash2's candidate selector: the lattice on the device, its record on the host.

The device computes everything that touches the vocabulary or the codebooks: the top-K
candidates of each slot's logits (unary scores) and the edge scores between consecutive
slots' candidates, `edge(prev, c) = sum_r pred[prev, r] * h[s, r] * succ[c, r]`, as one
1 x K row for slot 0 (the anchor is the only predecessor) and a K x K matrix per later slot.
At temperature 0 the walk over them runs on the device too (device_walk.py); sampling walks
here, in numpy, over the small matrices read back (its host time does not depend on the
vocabulary size). `selector_record` turns the lattice and the walk into the plain record the
selector panel shows. Scores are float32 sums everywhere, so the record's totals are exactly
what the walk compared.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np

from .drafter import CandidateSelector
from .records import Selector, SelectorSlot


@dataclass
class Lattice:
    candidates: np.ndarray  # [gamma, K] token ids, best unary first
    unary: np.ndarray  # [gamma, K] float32
    edges: list[np.ndarray]  # float32; slot 0: [1, K]; slot s > 0: [K, K] (rows: previous slot's candidates)


def lattice_arrays(selector: CandidateSelector, hproj: mx.array, logits: mx.array,
                   anchor: int, top_k: int) -> tuple[mx.array, ...]:
    """Device side. hproj: hidden_projection of the final-normed rows [gamma, r];
    logits [gamma, V]. Returns (candidates, unary, edges0 [1, K], edges [gamma-1, K, K]),
    unevaluated.
    """
    k = min(top_k, logits.shape[-1])
    candidates = mx.argpartition(-logits, kth=k - 1, axis=-1)[:, :k]
    unary = mx.take_along_axis(logits, candidates, axis=-1)
    order = mx.argsort(-unary, axis=-1)  # K values per slot: cheap, and a stable display order
    candidates = mx.take_along_axis(candidates, order, axis=-1)
    unary = mx.take_along_axis(unary, order, axis=-1).astype(mx.float32)
    hproj = hproj.astype(mx.float32)
    succ = selector.rows("successor_codebook", candidates).astype(mx.float32)  # [gamma, K, r]
    pred_anchor = selector.rows("predecessor_codebook", mx.array([anchor]))[0].astype(mx.float32)  # [r]
    edges0 = (pred_anchor * hproj[0])[None] @ succ[0].T  # [1, K]
    if logits.shape[0] == 1:
        # One slot has no slot-to-slot edges. No zero-size array either: MLX's CUDA backend
        # crashes converting one to numpy.
        return candidates, unary, edges0
    pred = selector.rows("predecessor_codebook", candidates[:-1]).astype(mx.float32)  # [gamma-1, K, r]
    edges = (pred * hproj[1:, None, :]) @ succ[1:].transpose(0, 2, 1)  # [gamma-1, K, K]
    return candidates, unary, edges0, edges


def to_lattice(candidates, unary, edges0, edges=None) -> Lattice:
    later = [] if edges is None else list(np.asarray(edges, dtype=np.float32))
    return Lattice(
        candidates=np.asarray(candidates),
        unary=np.asarray(unary, dtype=np.float32),
        edges=[np.asarray(edges0, dtype=np.float32)] + later,
    )


def softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - np.max(x))
    return z / z.sum()


def walk(lattice: Lattice, temperature: float, rng: np.random.Generator | None):
    """Host side: pick one candidate per slot, predecessor by predecessor.

    Returns (picked candidate index per slot, q rows [gamma, K] or None at temperature 0).
    """
    picks, q_rows = [], []
    prev = 0  # slot 0's single predecessor row: the anchor
    for unary, edges in zip(lattice.unary, lattice.edges):
        score = unary + edges[prev]
        if temperature > 0:
            q = softmax(score.astype(np.float64) / temperature)
            # inverse-CDF draw: same distribution as rng.choice, a tenth of its overhead
            prev = min(int(np.searchsorted(np.cumsum(q), rng.random(), side="right")), len(q) - 1)
            q_rows.append(q)
        else:
            prev = int(np.argmax(score))
        picks.append(prev)
    return picks, (np.stack(q_rows) if q_rows else None)


def selector_record(lattice: Lattice, picks: list[int], q_rows: np.ndarray | None,
                    anchor: int) -> Selector:
    """The walk as plain data: per slot, the candidates' scores from the predecessor the walk
    actually came from, and the whole lattice (every predecessor of the previous slot)."""
    slots = []
    prev_index, prev_token = 0, anchor
    for s, (unary, edges) in enumerate(zip(lattice.unary, lattice.edges)):
        cands = lattice.candidates[s].tolist()
        totals = unary + edges  # every predecessor's row; float32, as the walk summed them
        pick = picks[s]
        slots.append(SelectorSlot(
            slot=s, candidates=tuple(cands), unary=tuple(unary.tolist()),
            edge=tuple(edges[prev_index].tolist()), score=tuple(totals[prev_index].tolist()),
            chosen=cands[pick], argmax=cands[0], chosen_index=pick, argmax_index=0,
            predecessor=prev_token, lattice=tuple(map(tuple, totals.tolist())),
            q=None if q_rows is None else tuple(q_rows[s].tolist()),
        ))
        prev_index, prev_token = pick, cands[pick]
    return Selector(top_k=len(lattice.candidates[0]), slots=tuple(slots))
