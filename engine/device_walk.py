"""DFlash2's selector walk at temperature 0, on the device.

The greedy walk picks, slot by slot, the candidate with the best `unary + edge(previous
pick, candidate)`. Each step needs only the previous pick's row of the slot's edge matrix,
so the whole walk is a short chain of device ops (a gather, an add and an argmax per slot)
that the verify pass can consume before anything is read back: no host wait between
drafting and verifying. Sampling (temperature > 0) walks on the host instead
(selector.walk), where the session's seeded numpy generator draws.

Scores are float32 sums, as the host walk's (selector.walk) are, so both pick the same
candidate, ties included (argmax takes the first best on both).
"""

from __future__ import annotations

from typing import Optional

import mlx.core as mx


def greedy_walk(unary: mx.array, edges0: mx.array, edges: Optional[mx.array]) -> mx.array:
    """unary [gamma, K] float32; edges0 [1, K] (from the anchor); edges [gamma-1, K, K]
    (rows: the previous slot's candidates) or None for one slot. Returns the picked
    candidate index per slot, [gamma] uint32, unevaluated."""
    pick = mx.argmax(unary[0] + edges0[0])
    picks = [pick]
    for s in range(1, unary.shape[0]):
        pick = mx.argmax(unary[s] + edges[s - 1][pick])
        picks.append(pick)
    return mx.stack(picks)


def picked_tokens(candidates: mx.array, picks: mx.array) -> mx.array:
    """The token each slot's pick stands for: [gamma] from candidates [gamma, K]."""
    return mx.take_along_axis(candidates, picks[:, None].astype(mx.int32), axis=1)[:, 0]
