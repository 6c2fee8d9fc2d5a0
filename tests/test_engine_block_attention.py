"""The block attention route (engine/block_attention.py): its key ranges are the engine's own
masks and only the engine's caches take it (a decode through it:
tests/test_engine_attention_routes.py). On a CUDA GPU the kernel itself is checked against
attention written out in float64 numpy (views, every float type, grouped heads, windows,
planted NaNs) and for giving the same bits every time; CI has no GPU, so those run where
docs/PERFORMANCE.md says."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.cache import KVCache

from greedy import load_reference

from dflash_tui.engine import SessionOptions, load_pair
from dflash_tui.engine import block_attention
from dflash_tui.engine.block_attention import KernelKVCache, Launch, attend, route_target_attention, visible
from dflash_tui.engine.drafter import block_masks, layer_visibility
from dflash_tui.engine.errors import ParameterError

cuda = pytest.mark.skipif(not block_attention.available(), reason="needs a CUDA GPU")
PROMPT = "Seven times eight is"
LOGITS_TOL = 1e-4 if not block_attention.available() else 5e-2  # as in test_engine_attention_routes


def test_the_key_ranges_are_the_drafters_masks(make_pair):
    config = load_pair(*make_pair("llama", "DFlash2DraftModel", sliding=True)).drafter.config
    rows = 8
    kinds = set()
    for ctx_len in (3, 23, 40):  # short of, at and past the window of 24
        masks = block_masks(config, [ctx_len] * config.num_hidden_layers, rows)
        for layer, mask in enumerate(masks):
            causal, window = layer_visibility(config, layer)
            kinds.add((causal, window))
            expected = np.ones((rows, ctx_len + rows), bool) if mask is None else np.array(mask)
            assert (visible(ctx_len + rows, rows, causal, window) == expected).all()
    assert kinds == {(False, 0), (True, 24)}


def test_causal_ranges_are_mlx_lms_causal_mask():
    from mlx_lm.models.base import create_causal_mask

    for offset, rows in [(0, 5), (11, 8)]:
        mask = np.array(create_causal_mask(rows, offset))
        assert (visible(offset + rows, rows, causal=True) == mask).all()


def test_only_a_kernel_cache_takes_the_route(make_pair, monkeypatch):
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    model, _ = load_reference(str(target_dir))
    route_target_attention(model)
    route_target_attention(model)  # twice: one wrapper, not two
    calls = []
    real = block_attention.attend
    monkeypatch.setattr(block_attention, "attend", lambda *a, **k: calls.append(a[0].shape) or real(*a, **k))
    ids = mx.array([list(range(1, 9))])
    plain = model(ids, cache=[KVCache() for _ in model.layers])
    assert calls == []
    routed = model(ids, cache=[KernelKVCache() for _ in model.layers])
    assert len(calls) == len(model.layers)
    np.testing.assert_allclose(np.array(routed), np.array(plain), rtol=LOGITS_TOL, atol=LOGITS_TOL)
    calls.clear()
    model(mx.array([[9]]), cache=[KernelKVCache() for _ in model.layers])  # one row: MLX's own
    assert calls == []


def test_a_session_attends_through_the_kernel_by_default_on_a_gpu_only(make_pair):
    pair = load_pair(*make_pair("llama", "DFlash2DraftModel"))
    session = pair.open(PROMPT, options=SessionOptions(max_tokens=4))
    on_gpu = block_attention.available()
    assert session.attention == ("kernel" if on_gpu else "mlx")
    assert any(isinstance(c, KernelKVCache) for c in pair.target.cache) == on_gpu
    session.close()


def test_an_unknown_attention_is_refused(make_pair):
    pair = load_pair(*make_pair("llama", "DFlash2DraftModel"))
    with pytest.raises(ParameterError, match="attention"):
        pair.open(PROMPT, options=SessionOptions(attention="flash"))


# ---- the kernel itself (a CUDA GPU) --------------------------------------------------------


def _reference(q, k, v, scale, causal, window) -> np.ndarray:
    """The same attention in numpy, float64, written out: softmax over each row's range."""
    q, k, v = (np.array(t.astype(mx.float32)).astype(np.float64) for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scores = q @ k.transpose(0, 1, 3, 2) * scale
    scores = np.where(visible(k.shape[2], q.shape[2], causal, window), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ v


KERNELS = [pytest.param({"tiled": False}, id="key-by-key"), pytest.param({"tiled": True}, id="tiled")]


@cuda
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16])
@pytest.mark.parametrize("dim", [16, 64, 128, 256])
def test_the_kernel_is_mlxs_attention(dtype, dim, kernel):
    rng = np.random.default_rng(dim)
    tol = 1e-5 if dtype == mx.float32 else 2e-2  # float32 sums; a 16-bit output's rounding
    for rows, keys, heads, kv_heads, causal, window in [
            (1, 1, 4, 4, False, 0), (8, 8, 4, 2, True, 0), (8, 300, 32, 8, True, 0),
            (16, 1500, 8, 8, False, 0), (16, 40, 4, 1, True, 24), (5, 3000, 4, 2, False, 64)]:
        q = mx.array(rng.normal(size=(1, rows, heads, dim)).astype(np.float32)).astype(dtype)
        q = q.transpose(0, 2, 1, 3)  # a view, as the models make it
        buffer = rng.normal(size=(2, 1, kv_heads, keys + 256, dim)).astype(np.float32)
        k, v = (mx.array(b).astype(dtype)[:, :, :keys] for b in buffer)  # views of a buffer
        ours = attend(q, k, v, dim ** -0.5, causal, window, launch=Launch(**kernel))
        assert ours.dtype == dtype and ours.shape == q.shape
        theirs = _reference(q, k, v, dim ** -0.5, causal, window)
        np.testing.assert_allclose(np.array(ours.astype(mx.float32)), theirs,
                                   rtol=tol, atol=tol, err_msg=f"{rows} rows over {keys} keys")


def test_a_range_is_split_in_chunks_only_when_longer_than_one():
    launch = Launch(chunk=256)
    assert launch.chunks(256, 8) == 1 and launch.chunks(257, 8) == 2
    assert launch.chunks(4096, 16, window=64) == 1  # a window bounds every row's range
    assert launch.chunks(4096, 16, window=300) == 2  # 300 + 15 keys for the first row
    assert Launch(chunk=0).chunks(100_000, 8) == 1


def test_the_tiled_kernel_takes_heads_its_shared_memory_holds():
    """Its query rows and a tile of keys and values, float32, in 48 KB: up to head size 128
    at 8 warps of 4 query rows; a longer head takes the key-by-key kernel."""
    assert Launch(tiled=True).tiles(128) and Launch(tiled=True).tiles(16)
    assert not Launch(tiled=True).tiles(256) and not Launch(tiled=True).tiles(66)
    assert Launch(tiled=True, threads=128).tiles(256) is False  # 16 rows + 64 keys of 256: 80 KB
    assert not Launch(tiled=False).tiles(128)


@cuda
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", [mx.float32, mx.bfloat16])
def test_a_range_split_in_chunks_is_the_whole_range(dtype, kernel):
    """Chunks of 64 keys, combined by a second kernel, some of them empty for some rows (a
    causal row's range ends before the last chunk, 260 keys in 5; a window's last row fits in
    the first)."""
    rng = np.random.default_rng(3)
    tol = 1e-5 if dtype == mx.float32 else 2e-2
    for rows, keys, causal, window in [(8, 260, True, 0), (16, 1000, False, 0), (16, 1000, False, 60),
                                       (8, 500, True, 70), (3, 65, False, 0)]:
        q = mx.array(rng.normal(size=(1, 8, rows, 128)).astype(np.float32)).astype(dtype)
        k, v = (mx.array(rng.normal(size=(1, 2, keys, 128)).astype(np.float32)).astype(dtype)
                for _ in range(2))
        theirs = _reference(q, k, v, 128 ** -0.5, causal, window)
        launch = Launch(chunk=64, **kernel)
        chunked = attend(q, k, v, 128 ** -0.5, causal, window, launch=launch)
        assert launch.chunks(keys, rows, window) > 1
        np.testing.assert_allclose(np.array(chunked.astype(mx.float32)), theirs, rtol=tol, atol=tol,
                                   err_msg=f"{rows} rows over {keys} keys, window {window}")
        assert bool(mx.array_equal(attend(q, k, v, 128 ** -0.5, causal, window, launch=launch), chunked))


@cuda
@pytest.mark.parametrize("kernel", KERNELS)
def test_the_kernel_reads_no_key_outside_a_rows_range(kernel):
    rng = np.random.default_rng(1)
    q = mx.array(rng.normal(size=(1, 4, 8, 64)).astype(np.float32))
    keys = rng.normal(size=(1, 2, 100, 64)).astype(np.float32)
    hidden, seen = keys.copy(), keys.copy()
    hidden[:, :, 10] = np.nan  # before every row's window of 24 (rows see 69.. 99)
    seen[:, :, 95] = np.nan  # the last rows see it; causal, the first rows do not
    v = mx.array(rng.normal(size=(1, 2, 100, 64)).astype(np.float32))
    hidden_v = np.array(v)
    hidden_v[:, :, 10] = np.nan
    for launch in (Launch(chunk=0, **kernel), Launch(chunk=32, **kernel)):  # whole; chunks of 32
        out = np.array(attend(q, mx.array(hidden), v, 0.125, causal=True, window=24, launch=launch))
        assert np.isfinite(out).all()
        out = np.array(attend(q, mx.array(keys), mx.array(hidden_v), 0.125, causal=True, window=24,
                              launch=launch))
        assert np.isfinite(out).all()
        out = np.array(attend(q, mx.array(seen), v, 0.125, causal=True, launch=launch))
        assert np.isfinite(out[:, :, :3]).all() and np.isnan(out[:, :, 3:]).all()


@cuda
@pytest.mark.parametrize("kernel", KERNELS)
def test_a_value_row_one_row_sees_does_not_reach_the_rows_that_do_not(kernel):
    """A causal block's rows load the same tile of keys, the last rows' keys among them: a NaN
    value in a key only the later rows see must leave the earlier rows finite (the tiled
    kernel weighs a key a row does not see by 0, and 0 * NaN is NaN, so it must skip it)."""
    rng = np.random.default_rng(4)
    q = mx.array(rng.normal(size=(1, 8, 8, 128)).astype(np.float32))
    k = mx.array(rng.normal(size=(1, 2, 300, 128)).astype(np.float32))
    values = rng.normal(size=(1, 2, 300, 128)).astype(np.float32)
    values[:, :, 296] = np.nan  # the key of row 4 of 8: rows 4..7 see it
    for launch in (Launch(chunk=0, **kernel), Launch(chunk=64, **kernel)):
        out = np.array(attend(q, k, mx.array(values), 128 ** -0.5, causal=True, launch=launch))
        assert np.isfinite(out[:, :, :4]).all() and np.isnan(out[:, :, 4:]).all()


@cuda
@pytest.mark.parametrize("kernel", KERNELS)
def test_the_kernel_gives_the_same_bits_every_time(kernel):
    """A combine whose order varied (atomic adds) flipped bfloat16 argmaxes between runs."""
    rng = np.random.default_rng(2)
    q = mx.array(rng.normal(size=(1, 32, 8, 128)).astype(np.float32)).astype(mx.bfloat16)
    k = mx.array(rng.normal(size=(1, 8, 1000, 128)).astype(np.float32)).astype(mx.bfloat16)
    for launch in (Launch(chunk=0, **kernel), Launch(chunk=128, **kernel)):
        first = attend(q, k, k, 128 ** -0.5, causal=True, launch=launch)
        assert all(bool(mx.array_equal(attend(q, k, k, 128 ** -0.5, causal=True, launch=launch), first))
                   for _ in range(8))
