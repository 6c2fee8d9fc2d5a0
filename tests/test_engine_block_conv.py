"""DFlash2's block convolution against the definition, written out in numpy loop by loop:
row t, channel c = sum over taps j of (base[side, j, c] + coeff[t, side, j, group(c)]) *
x[t - j, c], zero before the block's first row. Blocks shorter and longer than the kernel,
and a batch of blocks (training's shape)."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from dflash_tui.engine.drafter import BlockConv


def by_definition(x, coeffs, base, side, group_size):
    n, rows, hidden = x.shape
    kernel = base.shape[1]
    out = np.zeros_like(x, dtype=np.float64)
    for b in range(n):
        for t in range(rows):
            for c in range(hidden):
                for j in range(kernel):
                    if t - j >= 0:
                        weight = base[side, j, c] + coeffs[b, t, side, j, c // group_size]
                        out[b, t, c] += weight * x[b, t - j, c]
    return out


@pytest.mark.parametrize("n, rows", [(1, 2), (1, 8), (3, 5)])
@pytest.mark.parametrize("side", [0, 1])
def test_block_conv_matches_its_definition(n, rows, side):
    hidden, kernel, group = 12, 4, 4
    conv = BlockConv(hidden, kernel, group)
    rng = np.random.default_rng(rows * 10 + side)
    base = rng.normal(size=(2, kernel, hidden)).astype(np.float32)
    conv.base_kernel = mx.array(base)
    x = rng.normal(size=(n, rows, hidden)).astype(np.float32)
    coeffs = rng.normal(size=(n, rows, 2, kernel, hidden // group)).astype(np.float32)
    ours = np.array(conv.convolve(mx.array(x), mx.array(coeffs), side))
    np.testing.assert_allclose(ours, by_definition(x, coeffs, base, side, group), rtol=1e-5, atol=1e-5)


def test_a_nan_stays_in_its_own_rows_and_channel():
    """A debugger must see where a NaN starts: x[t, c] reaches rows t..t+K-1 of channel c only."""
    conv = BlockConv(8, 4, 4)
    x = np.ones((1, 10, 8), dtype=np.float32)
    x[0, 3, 5] = np.nan
    out = np.array(conv.convolve(mx.array(x), mx.ones((1, 10, 2, 4, 2)), 0))
    bad = np.argwhere(np.isnan(out))
    assert sorted(map(tuple, bad.tolist())) == [(0, t, 5) for t in range(3, 7)]
