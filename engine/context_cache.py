"""A drafter layer's context keys/values, kept in a buffer that is written in place.

The drafter attends over [context rows, the block's own rows]. Concatenating them copies
the whole context every round, and so does concatenating each round's new context rows
onto the cache: a round would cost O(context) in copies alone. So, as mlx-lm's KVCache
does, the rows live in a preallocated buffer that grows in steps of `STEP` rows:

    buffer  [ ...dropped... | kept context rows | block rows (scratch) | spare ... ]
                            start               end

`append` writes new context rows at `end`; `with_block` writes the block's K/V into the
rows after `end` and returns one slice over context and block, in the order the
concatenation had, so attention computes exactly what it computed on the concatenated
arrays. The block rows are never kept: the next `append` writes over them.

A sliding layer keeps only its last `keep` (window - 1) rows. Its buffer grows as a full
layer's does until it holds `keep + STEP` rows plus room for a block; when the rows run out,
the kept rows move to the front (a copy of `keep` rows once every ~STEP appended rows), so
its memory stays flat however long the decode runs. Rows keep their temporal order, which a ring buffer would not (attention over
reordered rows sums in another order: close, not equal).

Padded (`padded=True`: engine/padded_attention.py), `with_block`
returns the whole buffer and a mask that hides the rows past the block, so attention's
shapes change only when the buffer grows; a sliding layer whose window is full already has
one shape (its window and the block) and keeps the exact slice. With `kernel=True` the
rows are the exact slice and the drafter's attention goes through engine/block_attention.py,
whose kernel plans nothing per length (the default on a CUDA GPU).
"""

from __future__ import annotations

from typing import Optional

import mlx.core as mx
import numpy as np

STEP = 256  # rows added to a buffer at a time, as mlx-lm's KVCache


def round_up(rows: int) -> int:
    """`rows` rounded up to whole steps (buffer sizes)."""
    return (rows + STEP - 1) // STEP * STEP


class ContextCache:
    """One drafter layer's context K/V, [1, kv heads, rows, head dim] each."""

    def __init__(self, keep: Optional[int] = None, padded: bool = False, kernel: bool = False):
        self.keep = keep  # sliding layers: rows kept (window - 1); None keeps every row
        self.padded = padded
        self.kernel = kernel  # the block attends over the exact rows in engine/block_attention.py
        self.written = 0  # rows past end+block may hold an earlier, longer block up to here
        self.keys: Optional[mx.array] = None  # buffers; rows start..end are the context
        self.values: Optional[mx.array] = None
        self.start = 0
        self.end = 0

    @property
    def length(self) -> int:
        """Context rows held (what attention sees before the block)."""
        return self.end - self.start

    @property
    def capacity(self) -> int:
        return 0 if self.keys is None else int(self.keys.shape[2])

    def append(self, k: mx.array, v: mx.array) -> None:
        """Add context rows (at the positions after the ones held)."""
        if self.keep is not None and k.shape[2] > self.keep:
            k, v = k[:, :, -self.keep:], v[:, :, -self.keep:]
        rows = k.shape[2]
        self._make_room(k, rows)
        self.keys[:, :, self.end:self.end + rows] = k
        self.values[:, :, self.end:self.end + rows] = v
        self.end += rows
        if self.keep is not None:
            self.start = max(self.start, self.end - self.keep)

    def with_block(self, k: mx.array, v: mx.array, mask: Optional[mx.array] = None):
        """Keys, values and mask to attend with: the context rows, then the block's (written
        into the scratch rows after the context, not kept). `mask` is over those rows
        ([block rows, context + block rows], or None: all visible); padded, over the whole
        buffer."""
        rows = k.shape[2]
        self._make_room(k, rows)
        last = self.end + rows
        self.keys[:, :, self.end:last] = k
        self.values[:, :, self.end:last] = v
        if not self.padded or self.start > 0:
            return self.keys[:, :, self.start:last], self.values[:, :, self.start:last], mask
        if self.written > last:  # an earlier block reached further: no stale row may be NaN
            self.keys[:, :, last:self.written] = 0
            self.values[:, :, last:self.written] = 0
        self.written = last
        if mask is None:
            visible = np.zeros((1, self.capacity), dtype=bool)
            visible[:, :last] = True
            mask = mx.array(visible)
        else:
            mask = mx.pad(mask, [(0, 0), (0, self.capacity - last)], constant_values=False)
        return self.keys, self.values, mask

    def _make_room(self, like: mx.array, rows: int) -> None:
        """Make `rows` free rows after `end`: allocate the buffers, or move the held rows to
        the front of larger ones (a full layer grows by whole steps; a sliding layer's
        buffer keeps its size and only drops the rows it no longer keeps)."""
        size = round_up(self._floor() + rows)
        if self.keys is None:
            shape = (1, like.shape[1], size, like.shape[3])
            self.keys, self.values = mx.zeros(shape, like.dtype), mx.zeros(shape, like.dtype)
            return
        if self.end + rows <= self.capacity:
            return
        held, size = self.length, max(size, self.capacity)

        def move(buffer: mx.array) -> mx.array:
            spare = mx.zeros((*buffer.shape[:2], size - held, buffer.shape[3]), buffer.dtype)
            return mx.concatenate([buffer[:, :, self.start:self.end], spare], axis=2)

        self.keys, self.values = move(self.keys), move(self.values)
        self.start, self.end = 0, held

    def _floor(self) -> int:
        """Rows a buffer keeps room for besides the incoming ones: a full layer every row it
        holds; a sliding layer the rows it holds (at most its window) and a step, so once
        the window is full it moves rows once per step. Sized by what it holds, not by the
        window: a window of millions (as large as the drafter's positions may be) must not
        be allocated before a context fills it."""
        if self.keep is None:
            return self.end
        return min(self.keep, self.length) + STEP
