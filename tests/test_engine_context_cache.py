"""The drafter's context cache (engine/context_cache.py) against plain concatenation: the
rows attention sees, their order, the sliding window's boundary, and a whole drafter
forward, bit for bit; and a sliding layer's memory stays flat however long the decode."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from dflash_tui.engine import load_pair
from dflash_tui.engine.context_cache import STEP, ContextCache
from dflash_tui.engine.drafter import block_masks

HEADS, DIM = 2, 8
# Context writes of a decode: a prompt, then rounds of 1..8 rows, one write past a buffer
# step, and a prompt longer than the sliding window on its own.
WRITES = [37, 1, 8, 3, 5, STEP + 3, 2, 8, 1, 1, 4]


def _rows(rng, n):
    return mx.array(rng.standard_normal((1, HEADS, n, DIM)).astype(np.float32))


@pytest.mark.parametrize("keep", [None, 5, 23, 300])
def test_cache_equals_concatenation(keep):
    rng = np.random.default_rng(0)
    cache = ContextCache(keep)
    ref_k = ref_v = None
    for rows in WRITES:
        k, v = _rows(rng, rows), _rows(rng, rows)
        cache.append(k, v)
        ref_k = k if ref_k is None else mx.concatenate([ref_k, k], axis=2)
        ref_v = v if ref_v is None else mx.concatenate([ref_v, v], axis=2)
        if keep is not None:
            ref_k, ref_v = ref_k[:, :, -keep:], ref_v[:, :, -keep:]
        block_k, block_v = _rows(rng, 8), _rows(rng, 8)
        keys, values, _ = cache.with_block(block_k, block_v)
        assert cache.length == ref_k.shape[2]
        assert np.array_equal(np.array(keys), np.array(mx.concatenate([ref_k, block_k], axis=2)))
        assert np.array_equal(np.array(values), np.array(mx.concatenate([ref_v, block_v], axis=2)))


def test_block_rows_are_not_kept():
    rng = np.random.default_rng(1)
    cache = ContextCache()
    first = _rows(rng, 4)
    cache.append(first, first)
    cache.with_block(_rows(rng, 3), _rows(rng, 3))
    second = _rows(rng, 2)
    cache.append(second, second)
    keys, _, _ = cache.with_block(_rows(rng, 1), _rows(rng, 1))
    assert np.array_equal(np.array(keys[:, :, :6]),
                          np.array(mx.concatenate([first, second], axis=2)))


def test_sliding_memory_is_flat_in_the_number_of_rounds():
    rng = np.random.default_rng(2)
    cache = ContextCache(keep=63)
    k = _rows(rng, 8)
    capacities = []
    for round_index in range(2000):
        cache.append(k[:, :, : 1 + round_index % 8], k[:, :, : 1 + round_index % 8])
        cache.with_block(k, k)
        capacities.append(cache.capacity)
    assert cache.length == 63
    assert max(capacities) == capacities[100] <= 63 + 2 * STEP


def test_full_layer_grows_in_steps():
    rng = np.random.default_rng(3)
    cache = ContextCache()
    for _ in range(3 * STEP):
        cache.append(_rows(rng, 1), _rows(rng, 1))
    assert cache.length == 3 * STEP
    assert cache.capacity % STEP == 0 and cache.capacity <= 4 * STEP


def test_drafter_forward_through_the_cache_equals_concatenation(make_pair):
    """A drafter with a sliding layer (window 24), round after round past the window: its
    block logits through the session's caches equal the concatenating (training) path."""
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel", sliding=True)
    pair = load_pair(target_dir, draft_dir)
    drafter, config = pair.drafter, pair.drafter.config
    rng = np.random.default_rng(4)
    keeps = [config.sliding_window - 1 if t == "sliding_attention" else None
             for t in config.layer_types]
    caches = [ContextCache(keep) for keep in keeps]
    plain: list = [None] * len(caches)
    position, gamma = 0, 7
    for rows in [13, 5, 8, 1, 8, 8, 3, 8]:  # crosses the window by the third write
        capture = mx.array(rng.standard_normal(
            (1, rows, len(config.target_layer_ids) * config.hidden_size)).astype(np.float32))
        kv = drafter.context_kv(drafter.project_context(capture), position)
        for i, (cache, (k, v)) in enumerate(zip(caches, kv)):
            cache.append(k, v)
            if plain[i] is not None:
                k = mx.concatenate([plain[i][0], k], axis=2)
                v = mx.concatenate([plain[i][1], v], axis=2)
            if keeps[i] is not None:
                k, v = k[:, :, -keeps[i]:], v[:, :, -keeps[i]:]
            plain[i] = (k, v)
        position += rows
        block = mx.array(rng.standard_normal((1, gamma + 1, config.hidden_size)).astype(np.float32))
        masks = block_masks(config, [c.length for c in caches], gamma + 1)
        ours = drafter.block_hidden(block, caches, position, masks)
        theirs = drafter.block_hidden(block, plain, position, masks)
        assert np.array_equal(np.array(ours), np.array(theirs))
    assert caches[0].length == config.sliding_window - 1 < caches[1].length
