"""The fused CUDA probe kernel against the MLX-op statistics (probes._stats) it replaces on
a GPU: buffers of every float type, odd and empty sizes, transposed (non-contiguous) views,
planted NaNs and infinities, and one vocabulary-sized buffer. CUDA only: skipped elsewhere
(CI has no GPU; docs/PERFORMANCE.md says where it was run)."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from dflash_tui.engine import probe_kernel
from dflash_tui.engine.probes import ProbeSink, _stats

cuda = pytest.mark.skipif(not probe_kernel.available(), reason="needs a CUDA GPU")


def _buffers() -> list[mx.array]:
    rng = np.random.default_rng(0)
    out = []
    for dtype in (mx.float32, mx.float16, mx.bfloat16):
        for shape in [(1,), (7,), (3, 5), (16, 4096), (1, 8, 16, 128)]:
            out.append(mx.array(rng.normal(scale=3.0, size=shape).astype(np.float32)).astype(dtype))
    out.append(mx.array(rng.normal(size=(4, 6, 16)).astype(np.float32)).transpose(2, 0, 1))
    out.append(mx.zeros((0, 4)))
    planted = rng.normal(size=(9, 33)).astype(np.float32)
    planted[1, 2], planted[3, 4], planted[5, 6], planted[7, 8] = np.nan, np.inf, -np.inf, np.nan
    out.append(mx.array(planted).astype(mx.bfloat16))
    out.append(mx.array(np.full((5,), np.nan, dtype=np.float32)))
    out.append(mx.array(rng.normal(size=(15, 151_936)).astype(np.float32)).astype(mx.bfloat16))
    return out


def _chunk_stats(values: np.ndarray) -> list[float]:
    """What one block of the kernel computes over its chunk, in numpy."""
    finite = values[np.isfinite(values)]
    return [np.isnan(values).sum(), (values == np.inf).sum(), (values == -np.inf).sum(),
            finite.size, finite.min(initial=np.inf), finite.max(initial=-np.inf),
            finite.sum(), np.square(finite).sum()]


def test_chunks_cover_every_buffer_and_combine_into_whole_buffer_statistics():
    """The host's half, on any device: chunking and combining, against one pass over each
    buffer."""
    rng = np.random.default_rng(1)
    sizes = [0, 1, probe_kernel.CHUNK, probe_kernel.CHUNK + 1, 3 * probe_kernel.CHUNK + 17]
    buffers = [rng.normal(size=n).astype(np.float32) for n in sizes]
    buffers[3][5], buffers[3][-1], buffers[4][probe_kernel.CHUNK] = np.nan, np.inf, -np.inf
    blocks = probe_kernel.chunks(sizes)
    assert blocks[:, 0].tolist() == [0, 1, 2, 3, 3, 4, 4, 4, 4]
    partials = np.array([_chunk_stats(buffers[b][s:s + probe_kernel.CHUNK]) for b, s in blocks])
    combined = probe_kernel.combine(partials, blocks[:, 0])
    for buffer, row in zip(buffers, combined):
        expected = _chunk_stats(buffer)
        np.testing.assert_array_equal(row[:6], expected[:6])
        np.testing.assert_allclose(row[6:], expected[6:], rtol=1e-6)


@cuda
def test_one_launch_gives_what_the_mlx_ops_give():
    buffers = _buffers()
    stats, owners = probe_kernel.stage_stats(buffers)
    fused = probe_kernel.combine(np.array(stats), owners)
    for i, buffer in enumerate(buffers):
        if buffer.size == 0:  # _stats cannot reduce nothing; the kernel says: nothing counted
            np.testing.assert_array_equal(fused[i], [0, 0, 0, 0, np.inf, -np.inf, 0, 0])
            continue
        expected = np.array(_stats(buffer.reshape(1, -1)))[0]
        np.testing.assert_array_equal(fused[i, :4], expected[:4])  # counts: exact
        if expected[3] > 0:
            np.testing.assert_array_equal(fused[i, 4:6], expected[4:6])  # min, max: exact
            values = np.array(buffer.astype(mx.float32))
            scale = np.abs(values[np.isfinite(values)]).sum()
            assert abs(fused[i, 6] - expected[6]) <= 1e-5 * max(scale, 1.0), i
            np.testing.assert_allclose(fused[i, 7], expected[7], rtol=1e-5)


@cuda
def test_a_sink_on_the_gpu_reports_the_planted_values():
    sink = ProbeSink("draft")
    x = np.ones((4, 8), dtype=np.float32)
    x[2, 3] = np.nan
    sink("x", 0, mx.array(x).astype(mx.bfloat16))
    sink("y", 0, mx.arange(10, dtype=mx.float32))
    mx.eval(sink.pending())
    x_row, y_row = sink.rows()
    assert (x_row.nan, x_row.posinf, x_row.neginf) == (1, 0, 0)
    assert x_row.min == x_row.max == x_row.mean == 1.0
    assert (y_row.min, y_row.max, y_row.mean) == (0.0, 9.0, 4.5)


@cuda
def test_a_session_probes_the_same_with_and_without_the_kernel(monkeypatch):
    from benchmarks.synthetic import TINY, synthetic_pair
    from dflash_tui.engine.session import Session, SessionOptions

    def probe_rows():
        session = Session(synthetic_pair(TINY, "float32"), list(range(1, 20)),
                          options=SessionOptions(gamma=4, max_tokens=12))
        session.prefill()
        rows = [p for record in session.run(2) for p in record.probes]
        session.close()
        return rows

    fused = probe_rows()
    monkeypatch.setattr(probe_kernel, "available", lambda: False)
    ops = probe_rows()
    assert [(r.stage, r.layer, r.name) for r in fused] == [(r.stage, r.layer, r.name) for r in ops]
    for a, b in zip(fused, ops):
        assert (a.nan, a.posinf, a.neginf, a.min, a.max) == (b.nan, b.posinf, b.neginf, b.min, b.max)
        assert a.mean == pytest.approx(b.mean, rel=1e-4, abs=1e-6)
        assert a.rms == pytest.approx(b.rms, rel=1e-4)
