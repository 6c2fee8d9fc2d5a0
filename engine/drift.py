"""How far two configurations' buffers are apart (the compare lab's drift table), computed on
the device from both sides' tensors, never from their summary statistics.

Per pair of buffers (primary a, reference b, one shape): max |a - b| over the values finite
on both sides, the reference's absmax over its finite values, the sums of squares of a - b
and of b over the values finite on both sides, and whether a value is finite on one side
only. As the probes do (engine/probes.py), buffers of one size are stacked and reduced
together, and the common case takes the fewest device ops: six reductions (max |a - b|,
max |b|, the sum of a, the sum of b, the sums of squares) show a pair with no non-finite
value (all six finite); only a pair where one comes back non-finite is measured again
exactly, in a round where something has already gone wrong.

Two relative errors come of them. `rel_err`, max |a - b| / absmax(b), is what
--compare-tol judges. It reads a buffer by its largest value: SmolLM2's capture holds three
values near 25,000 among values of rms 117, so a drafter reading target layer 15 for 14 (a
fifth of the capture changed) reads 0.0010 there, below bfloat16's rounding (0.0024).
`rms_rel_err`, rms(a - b) / rms(b), weighs every value: 0.0068 for that shift, 0.0045 for
bfloat16. It is shown beside rel_err, not judged: every tolerance in docs/COMPARE.md was
measured on rel_err ("Why two relative errors" there has the numbers).
"""

from __future__ import annotations

from typing import Optional

import mlx.core as mx
import numpy as np

from .records import BufferDrift

Key = tuple[str, Optional[int], str]  # (stage, layer, buffer)


class Drift:
    """The drift of `keys`' buffer pairs, queued on the device at construction."""

    def __init__(self, keys: list[Key], primary: list[mx.array], reference: list[mx.array]):
        self.keys = keys
        self._pairs = list(zip(primary, reference))
        groups: dict[int, list[int]] = {}
        for i, a in enumerate(primary):
            groups.setdefault(a.size, []).append(i)
        tables, order = [], []
        for members in groups.values():
            a = _rows([primary[i] for i in members])
            b = _rows([reference[i] for i in members])
            d = a - b
            tables.append(mx.stack([mx.abs(d).max(axis=1), mx.abs(b).max(axis=1),
                                    a.sum(axis=1), b.sum(axis=1),
                                    mx.square(d).sum(axis=1), mx.square(b).sum(axis=1)], axis=1))
            order += members
        self._table = None
        if tables:
            table = mx.concatenate(tables) if len(tables) > 1 else tables[0]
            self._table = table[mx.array(np.argsort(order))]

    def pending(self) -> list[mx.array]:
        return [] if self._table is None else [self._table]

    def rows(self) -> tuple[BufferDrift, ...]:
        if self._table is None:
            return ()
        fast = np.array(self._table)
        unhealthy = np.flatnonzero(~np.isfinite(fast).all(axis=1))
        # diff, absmax, the sums of squares of diff and of the reference, values finite on
        # the reference side only, on the primary side only
        table = np.column_stack([fast[:, :2], fast[:, 4:], np.zeros((len(fast), 2))])
        if unhealthy.size:
            exact = mx.stack([_exact(*self._pairs[i]) for i in unhealthy])
            table[unhealthy] = np.array(exact)
        return tuple(_row(key, stats) for key, stats in zip(self.keys, table))


def _rows(tensors: list[mx.array]) -> mx.array:
    rows = [t.reshape(1, -1) for t in tensors]
    return (mx.concatenate(rows) if len(rows) > 1 else rows[0]).astype(mx.float32)


def _exact(a: mx.array, b: mx.array) -> mx.array:
    a, b = a.reshape(-1).astype(mx.float32), b.reshape(-1).astype(mx.float32)
    fa, fb = mx.isfinite(a), mx.isfinite(b)
    both = fa & fb
    d = mx.where(both, a - b, 0.0)
    return mx.stack([mx.abs(d).max(), mx.where(fb, mx.abs(b), 0.0).max(),
                     mx.square(d).sum(), mx.where(both, mx.square(b), 0.0).sum(),
                     (fb & ~fa).sum().astype(mx.float32), (fa & ~fb).sum().astype(mx.float32)])


def _row(key: Key, stats: np.ndarray) -> BufferDrift:
    stage, layer, name = key
    diff, absmax, diff_squares, squares, primary_bad, reference_bad = (float(v) for v in stats)
    side = {(True, False): "primary", (False, True): "reference",
            (True, True): "both"}.get((primary_bad > 0, reference_bad > 0))
    if side is not None or (diff > 0 and absmax == 0):
        rel = None
    else:
        rel = diff / absmax if absmax > 0 else 0.0
    return BufferDrift(stage, layer, name, diff, rel, side,
                       rms_rel_err=_rms_ratio(diff_squares, squares) if side is None else None)


def _rms_ratio(diff_squares: float, squares: float) -> Optional[float]:
    """rms(a - b) / rms(b) from the sums of squares over the same values; None when it is
    no number (an all-zero reference that differs, squares past float32's range)."""
    if not (np.isfinite(diff_squares) and np.isfinite(squares)):
        return None
    if squares == 0:
        return 0.0 if diff_squares == 0 else None
    return float(np.sqrt(diff_squares / squares))
