"""Every probed buffer of a stage reduced in one CUDA kernel launch.

On a GPU a round's cost is the number of ops dispatched, not their arithmetic
(docs/PERFORMANCE.md): reducing each buffer with MLX ops costs a reshape (often a copy), a
share of a concatenation and four reductions per buffer, ~250 dispatches for a real-scale
draft stage. This kernel takes all of a stage's buffers as inputs and gives one block of
a chunk of at most CHUNK values to each block of threads (one block alone on a
vocabulary-sized buffer would be bound by its memory latency), in one pass computing for its
chunk exactly what `probes._stats` computes: counts of NaN, +inf, -inf and finite values, and
min, max, sum and sum of squares over the finite values. The host combines each buffer's
chunks (`combine`, float64 sums). Being exact, it needs no second pass for a NaN.

CUDA only (`mx.fast.cuda_kernel`); other devices keep the MLX-op path in probes.py. The
kernel's source depends on how many buffers there are and their types, so one is built per
such signature and kept (a stage's signature repeats every round).
"""

from __future__ import annotations

import functools
import hashlib

import mlx.core as mx

import numpy as np

THREADS = 256
CHUNK = 16 * 1024  # values per block of threads
COLUMNS = 8  # nan, +inf, -inf, finite count, min, max, sum, sum of squares

_HEADER = """
template <typename T>
__device__ void probe_accumulate(const T* x, long n, int tid, float& lo, float& hi,
                                 float& sum, float& squares, int& nans, int& posinf,
                                 int& neginf) {
  for (long i = tid; i < n; i += blockDim.x) {
    float v = static_cast<float>(x[i]);
    if (isnan(v)) {
      nans += 1;
    } else if (isinf(v)) {
      if (v > 0) posinf += 1; else neginf += 1;
    } else {
      lo = fminf(lo, v);
      hi = fmaxf(hi, v);
      sum += v;
      squares += v * v;
    }
  }
}
"""

_BODY = """
  __shared__ float s_lo[THREADS], s_hi[THREADS], s_sum[THREADS], s_sq[THREADS];
  __shared__ int s_nan[THREADS], s_pos[THREADS], s_neg[THREADS];
  int block = blockIdx.x;
  int tid = threadIdx.x;
  float lo = __int_as_float(0x7f800000), hi = -lo, sum = 0.0f, squares = 0.0f;  // +-inf
  int nans = 0, posinf = 0, neginf = 0;
  int buffer = (int)chunks[2 * block];
  long start = chunks[2 * block + 1];
  long n = sizes[buffer] - start < CHUNK ? sizes[buffer] - start : CHUNK;
  switch (buffer) {
CASES
  }
  s_lo[tid] = lo; s_hi[tid] = hi; s_sum[tid] = sum; s_sq[tid] = squares;
  s_nan[tid] = nans; s_pos[tid] = posinf; s_neg[tid] = neginf;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (tid < half) {
      s_lo[tid] = fminf(s_lo[tid], s_lo[tid + half]);
      s_hi[tid] = fmaxf(s_hi[tid], s_hi[tid + half]);
      s_sum[tid] += s_sum[tid + half];
      s_sq[tid] += s_sq[tid + half];
      s_nan[tid] += s_nan[tid + half];
      s_pos[tid] += s_pos[tid + half];
      s_neg[tid] += s_neg[tid + half];
    }
    __syncthreads();
  }
  if (tid == 0) {
    float* row = stats + block * 8;
    int bad = s_nan[0] + s_pos[0] + s_neg[0];
    row[0] = s_nan[0];
    row[1] = s_pos[0];
    row[2] = s_neg[0];
    row[3] = (float)(n > 0 ? n - bad : 0);
    row[4] = s_lo[0];
    row[5] = s_hi[0];
    row[6] = s_sum[0];
    row[7] = s_sq[0];
  }
"""


def available() -> bool:
    """Whether arrays are computed on a CUDA GPU (where this kernel runs)."""
    return mx.default_device() == mx.gpu and mx.cuda.is_available()


@functools.lru_cache(maxsize=64)
def _kernel(signature: tuple[str, ...]):
    names = [f"b{i}" for i in range(len(signature))]
    cases = "\n".join(
        f"    case {i}: probe_accumulate({name} + start, n, tid, lo, hi, sum, squares, nans, posinf, neginf); break;"
        for i, name in enumerate(names))
    # The signature is part of the name: MLX caches a compiled kernel by its name.
    digest = hashlib.sha1(",".join(signature).encode()).hexdigest()[:12]
    name = f"probe_stats_{len(signature)}_{digest}"
    return mx.fast.cuda_kernel(
        name=name, input_names=["sizes", "chunks", *names], output_names=["stats"],
        source=_BODY.replace("CASES", cases), header=_HEADER)


def chunks(sizes: list[int]) -> np.ndarray:
    """[blocks, 2] int64: the buffer and first value of each block's chunk (an empty buffer
    still gets one block, which counts nothing)."""
    return np.array([(i, start) for i, size in enumerate(sizes)
                     for start in range(0, max(size, 1), CHUNK)], dtype=np.int64).reshape(-1, 2)


def stage_stats(tensors: list[mx.array]) -> tuple[mx.array, np.ndarray]:
    """Per chunk statistics [blocks, 8] float32, laid out as probes._stats lays out a row,
    unevaluated, from one kernel launch (non-contiguous buffers are copied inside it, not as
    graph ops); and the chunks' buffers, for `combine`."""
    signature = tuple(str(t.dtype).replace("mlx.core.", "") for t in tensors)
    sizes = [t.size for t in tensors]
    blocks = chunks(sizes)
    (stats,) = _kernel(signature)(
        inputs=[mx.array(sizes, dtype=mx.int64), mx.array(blocks), *tensors],
        template=[("THREADS", THREADS), ("CHUNK", CHUNK)],
        grid=(THREADS * len(blocks), 1, 1), threadgroup=(THREADS, 1, 1),
        output_shapes=[(len(blocks), COLUMNS)], output_dtypes=[mx.float32])
    return stats, blocks[:, 0]


def combine(partials: np.ndarray, owners: np.ndarray) -> np.ndarray:
    """Each buffer's statistics [buffers, 8] (float64) from its chunks' rows, which come in
    buffer order (`owners`: each row's buffer)."""
    partials = partials.astype(np.float64)
    first = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
    out = np.add.reduceat(partials, first, axis=0)  # counts, sums and squares add up
    out[:, 4] = np.minimum.reduceat(partials[:, 4], first)
    out[:, 5] = np.maximum.reduceat(partials[:, 5], first)
    return out
