"""Attention over whole cache buffers, masked, so its shapes change once per 256 rows.

MLX's CUDA backend plans its attention kernel for each shape it meets with more than one
query row, and a plan costs about 65 ms (measured on an H200, MLX 0.32.4:
benchmarks/profile_round.py, "attention, 8 queries, causal, new key length"); the same
shape again costs 0.15 ms. A decode meets a new key length every round, twice (the target's
verify of the block over its KV cache, and the drafter's block over its context), so on
CUDA an unpadded round would pay two plans: several times the round itself.

Padded, the keys are the cache's whole buffer, which grows in steps of 256 rows, and a
boolean mask hides the rows past the ones held. Masked keys get zero weight; to keep a
non-finite value in a masked row from leaking through (0 x NaN is NaN), rows past what a
forward wrote are zeros: a buffer starts zeroed and any stale row left past the newest
write is zeroed again. One-row forwards (the target decoding alone) keep the exact slice:
their kernel plans nothing per length.

Taken when asked (SessionOptions.attention="padded"; the tests run it on the CPU against the
unpadded forward). It was the CUDA default until engine/block_attention.py, which needs
neither plans nor padding, measured faster there at every context length
(docs/PERFORMANCE.md).
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import KVCache

from .context_cache import STEP, round_up  # one step for both caches' buffers


class PaddedKVCache(KVCache):
    """mlx-lm's KVCache, whose multi-row forwards attend over the whole buffer, masked.

    The buffer's capacity is always a multiple of STEP (mlx-lm's own grows from the rows
    held, which need not be), so a forward's key length is one of a few values per decode.
    """

    def __init__(self):
        super().__init__()
        self.written = 0  # rows past `offset` may hold a rejected forward's keys up to here

    @property
    def capacity(self) -> int:
        return 0 if self.keys is None else int(self.keys.shape[2])

    def _capacity_for(self, rows: int) -> int:
        return max(self.capacity, round_up(self.offset + rows))

    def update_and_fetch(self, keys: mx.array, values: mx.array):
        prev, rows = self.offset, keys.shape[2]
        size = self._capacity_for(rows)
        if size > self.capacity:
            more_k = mx.zeros((*keys.shape[:2], size - self.capacity, keys.shape[3]), keys.dtype)
            more_v = mx.zeros((*values.shape[:2], size - self.capacity, values.shape[3]), values.dtype)
            self.keys = more_k if self.keys is None else mx.concatenate([self.keys, more_k], axis=2)
            self.values = more_v if self.values is None else mx.concatenate([self.values, more_v], axis=2)
        self.offset += rows
        self.keys[..., prev:self.offset, :] = keys
        self.values[..., prev:self.offset, :] = values
        if self.written > self.offset:  # a longer rejected forward's rows, past this one's
            self.keys[..., self.offset:self.written, :] = 0
            self.values[..., self.offset:self.written, :] = 0
        self.written = self.offset
        if rows == 1:
            return self.keys[..., : self.offset, :], self.values[..., : self.offset, :]
        return self.keys, self.values

    def make_mask(self, rows: int, return_array: bool = False, window_size=None):
        """Called before update_and_fetch (offset: the rows held before this forward)."""
        if rows == 1 or window_size is not None:
            return super().make_mask(rows, return_array=return_array, window_size=window_size)
        query = self.offset + np.arange(rows)[:, None]
        key = np.arange(self._capacity_for(rows))[None, :]
        return mx.array(key <= query)

