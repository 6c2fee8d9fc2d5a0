"""Padded attention (engine/padded_attention.py), a route a session takes when asked, run
here on the CPU: the target's padded cache gives the unpadded forward's logits,
and a NaN in a row past the rows held (a rejected forward's, an earlier longer block's)
never leaks into attention. (A decode through it: tests/test_engine_attention_routes.py.)"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import KVCache

from greedy import load_reference

from dflash_tui.engine.context_cache import ContextCache
from dflash_tui.engine.padded_attention import STEP, PaddedKVCache

# On the CPU padded and unpadded attention run the same kernel: equal to rounding. On a CUDA
# GPU the unpadded one is another kernel whose float32 sums differ by up to ~7e-3 on these
# logits (measured on an H200); the decode itself is still held equal.
LOGITS_TOL = 1e-4 if mx.default_device() == mx.cpu else 2e-2


def _rows(rng, n, heads=2, dim=4):
    return mx.array(rng.normal(size=(1, heads, n, dim)).astype(np.float32))


def test_the_padded_kv_cache_gives_the_unpadded_logits(make_pair):
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    model, _ = load_reference(str(target_dir))
    plain, padded = [KVCache() for _ in model.layers], [PaddedKVCache() for _ in model.layers]
    # a forward of 6 rows trimmed to 1 (a rejection), then a 3-row forward, which leaves two
    # rejected rows past it, then a 1-row forward
    steps = [(list(range(1, 10)), 0), (list(range(10, 16)), 5), ([16, 17, 18], 0), ([19], 0)]
    for ids, rejected in steps:
        if len(ids) == 3:
            for c in padded:  # what a non-finite rejected row would leave behind
                c.keys[..., c.offset:c.written, :] = float("nan")
        ours = model(mx.array([ids]), cache=padded)
        theirs = model(mx.array([ids]), cache=plain)
        assert bool(mx.isfinite(ours).all())
        assert all(bool(mx.isfinite(c.keys).all()) for c in padded)  # zeroed, not only masked
        np.testing.assert_allclose(np.array(ours), np.array(theirs), rtol=LOGITS_TOL, atol=LOGITS_TOL)
        for c in (*plain, *padded):
            c.trim(rejected)
    assert padded[0].capacity == STEP and padded[0].offset == plain[0].offset == 14


def test_a_padded_context_cache_masks_what_it_does_not_hold():
    rng = np.random.default_rng(0)
    cache = ContextCache(padded=True)
    cache.append(_rows(rng, 10), _rows(rng, 10))
    cache.with_block(_rows(rng, 8), _rows(rng, 8))  # a long block, rows 10..17
    cache.append(_rows(rng, 2), _rows(rng, 2))  # two rows kept: the block's 12..17 are stale
    cache.keys[:, :, 12:18] = float("nan")
    keys, values, mask = cache.with_block(_rows(rng, 3), _rows(rng, 3))
    assert keys.shape[2] == cache.capacity == STEP and mask.shape == (1, STEP)
    assert np.array(mask)[0].tolist() == [True] * 15 + [False] * (STEP - 15)
    assert bool(mx.isfinite(keys).all())  # the stale row 15..17 was zeroed, not masked only
