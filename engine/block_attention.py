"""Attention of a block's few query rows over exact cache rows, in one CUDA kernel.

MLX's CUDA backend plans its attention kernel (cuDNN) for every shape with more than one
query row, and a plan costs 38-68 ms (H200, MLX 0.32.4: docs/PERFORMANCE.md); a decode
meets a new key length every round, twice (the target's verify over its KV cache, the
drafter's block over its context). Masked attention over a padded buffer avoids the plans
but runs MLX's unfused path, ~0.2 ms a call where a planned one costs ~0.09
(engine/padded_attention.py). A kernel of our own needs no plan: the key length is a
runtime value, not part of the kernel.

Two kernels, one interface. The tiled one (the default for head sizes up to 128: `_TILED`)
gives one thread block all the query rows of a KV head (its group's heads times the block's
rows) and walks their keys in tiles of 32 kept in shared memory: each key row is read once
per block, each lane scores one key, and each warp keeps an online softmax for its rows. The
key-by-key one (`_SOURCE`; longer heads, whose tiles would not fit shared memory) gives a
block one query row and a few heads, its warps splitting the row's keys. Both sum in a fixed
order: the same inputs give the same bits (a combine by atomic adds did not, and in bfloat16
that was enough to flip the target's argmax between two runs of one round). A range longer
than `Launch.chunk` keys is split over several blocks, whose partial rows a third kernel
combines, in a fixed order too: one block walking a 16k-token context is slow, and too few
blocks leave most of the GPU idle.

What a query row sees is one contiguous range of keys, which is every mask the engine
builds (drafter.block_masks, mlx-lm's "causal"): with N keys and L query rows, the last L
keys being the block's own,

    row i sees keys [lo_i, hi_i):  hi_i = N - L + i + 1 if causal else N
                                   lo_i = max(0, N - L + i - window + 1) if window else 0

Keys outside every row's range are never read, and a key outside one row's range never
enters that row's sums (the tiled kernel loads a key for the rows that see it and skips it
for the rest: a weight of 0 times a NaN value is NaN), so a non-finite value a row's range
excludes cannot leak into it; one inside it gives NaN, as MLX's attention does. Sums are float32 (off
float64 by ~1.6e-7 where MLX's own float32 attention on the GPU is off by ~3e-4).

`attend` runs the kernel on a CUDA GPU and, elsewhere, MLX's attention under the same ranges
as a mask, which is what the CPU tests run against the engine's own masks; on a GPU the
tests check the kernel against float64 numpy (tests/test_engine_block_attention.py). It is
a session's route on a CUDA GPU unless another is asked for (SessionOptions.attention): at
real scale on an H200 it beat the padded route at every context length measured, and the
tiled kernel took a quarter off the key-by-key one's round of attention at 16k keys
(docs/PERFORMANCE.md, "A block attention kernel").
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import mlx.core as mx
import numpy as np
from mlx_lm.models import base
from mlx_lm.models.cache import KVCache

MAX_ROWS = 64  # longer forwards (a prompt's prefill) keep MLX's attention: a plan is paid once
MAX_HEAD_DIM = 256  # each lane of a warp holds every 32nd value of a row
SHARED_BYTES = 32 * 1024  # the warps' partial rows, combined at the end
TILE_KEYS = 32  # keys the tiled kernel scores at once: one a lane


@dataclass(frozen=True)
class Launch:
    """How the kernel is laid out (benchmarks/bench_block_attention.py times the choices)."""

    threads: int = 256  # 8 warps a block
    chunk: int = 512  # keys a block takes; a longer range is split over blocks, 0: never
    tiled: bool = False  # all of a KV head's query rows in one block, over tiles of keys (_TILED)
    queries: int = 4  # tiled: query rows (of any head of the group) each warp takes
    unroll: int = 4  # key by key: keys (their key and value rows) a warp loads before it waits
    grouped: int = 4  # key by key: query heads of one KV head a block attends for

    def chunks(self, keys: int, rows: int, window: int = 0) -> int:
        """Blocks a row's range is split over: the longest range any row of the call has,
        in chunks (a long context would otherwise leave most of the GPU idle, one block
        walking thousands of keys per row and head group)."""
        longest = min(keys, window + rows - 1) if window else keys
        return 1 if self.chunk <= 0 else -(-longest // self.chunk)

    def tiles(self, dim: int) -> bool:
        """Whether a call of head size `dim` takes the tiled kernel: its query rows, key tile
        and value tile, all float32, fill at most the 48 KB of a block's static shared memory,
        and its threads load whole columns of a tile (a multiple of the head size)."""
        block_queries = self.threads // 32 * self.queries
        return (self.tiled and dim % 4 == 0 and self.threads % dim == 0
                and (block_queries + 2 * TILE_KEYS) * dim * 4 <= 48 * 1024)

    def heads_per_block(self, group: int, dim: int) -> int:
        """The most query heads of a KV head's `group` a block can take: a divisor of the
        group, within `grouped`, whose partial rows fit the shared memory."""
        return next(g for g in range(min(self.grouped, group), 0, -1)
                    if group % g == 0 and g * self.threads // 32 * dim * 4 <= SHARED_BYTES)


# The fastest layout measured (bench_block_attention, H200): tiled, chunks of 256 keys; a
# head longer than 128 takes the key-by-key kernel with the same chunks.
LAUNCH = Launch(chunk=256, tiled=True)

_SOURCE = """
  constexpr int WARPS = THREADS / 32;
  constexpr int PER_LANE = (D + 31) / 32;  // lane holds elements lane, lane + 32, ...
  const float neg_inf = __int_as_float(0xff800000);
  const int rows = q_shape[2];
  const int heads = q_shape[1];
  const int keys = k_shape[2];
  const int head0 = (blockIdx.x / rows) * HEADS;  // HEADS query heads of one KV head
  const int row = blockIdx.x % rows;
  const int batch = blockIdx.y;
  const int kv_head = head0 / (heads / k_shape[1]);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int last = keys - rows + row;  // the row's own key
  const int row_hi = CAUSAL ? last + 1 : keys;
  const int row_lo = WINDOW > 0 ? max(0, last - WINDOW + 1) : 0;
  // With CHUNK, block z takes the CHUNK keys of the row's range from row_lo + z * CHUNK on
  // (possibly none: its partial row then has max -inf and weight 0).
  const int lo = CHUNK > 0 ? row_lo + blockIdx.z * CHUNK : row_lo;
  const int hi = CHUNK > 0 ? min(row_hi, lo + CHUNK) : row_hi;

  const T* kp = k + batch * k_strides[0] + kv_head * k_strides[1];
  const T* vp = v + batch * v_strides[0] + kv_head * v_strides[1];
  // Scores in base 2 (q scaled by log2 e as well): exp2f is one instruction, expf several.
  const float sc = scale[0] * 1.4426950408889634f;
  float qv[HEADS][PER_LANE], acc[HEADS][PER_LANE], m[HEADS], l[HEADS];
  for (int g = 0; g < HEADS; ++g) {
    const T* qp = q + batch * q_strides[0] + (head0 + g) * q_strides[1] + row * q_strides[2];
    for (int e = 0; e < PER_LANE; ++e) {
      const int d = lane + 32 * e;
      qv[g][e] = d < D ? static_cast<float>(qp[d * q_strides[3]]) * sc : 0.0f;
      acc[g][e] = 0.0f;
    }
    m[g] = neg_inf;  // online softmax: the running max and sum of this warp's keys
    l[g] = 0.0f;
  }
  // Warp w takes keys lo + w, lo + w + WARPS, ..., UNROLL of them at a time, each key row
  // loaded once for the HEADS query heads that share it.
  for (int j0 = lo + warp; j0 < hi; j0 += UNROLL * WARPS) {
    float kf[UNROLL][PER_LANE], vf[UNROLL][PER_LANE], s[UNROLL][HEADS];
    for (int u = 0; u < UNROLL; ++u) {
      const int j = j0 + u * WARPS;
      const long long r = j < hi ? j : lo;  // past the range: a row that exists, never used
      const T* kr = kp + r * k_strides[2];
      const T* vr = vp + r * v_strides[2];
      for (int e = 0; e < PER_LANE; ++e) {
        const int d = lane + 32 * e;
        kf[u][e] = d < D ? static_cast<float>(kr[d * k_strides[3]]) : 0.0f;
        vf[u][e] = d < D ? static_cast<float>(vr[d * v_strides[3]]) : 0.0f;
      }
    }
    for (int u = 0; u < UNROLL; ++u) {
      for (int g = 0; g < HEADS; ++g) {
        float dot = 0.0f;
        for (int e = 0; e < PER_LANE; ++e) dot += qv[g][e] * kf[u][e];
        s[u][g] = dot;
      }
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      for (int u = 0; u < UNROLL; ++u) {
        for (int g = 0; g < HEADS; ++g) s[u][g] += __shfl_xor_sync(0xffffffff, s[u][g], offset);
      }
    }
    // The group's keys at once: one rescale of the running sums per group, not per key.
    const int n = min(UNROLL, (hi - j0 + WARPS - 1) / WARPS);  // the group's keys in range
    for (int g = 0; g < HEADS; ++g) {
      float m_new = m[g];
      for (int u = 0; u < n; ++u) m_new = fmaxf(m_new, s[u][g]);  // a NaN score leaves m ...
      const float correction = exp2f(m[g] - m_new);
      l[g] *= correction;
      for (int e = 0; e < PER_LANE; ++e) acc[g][e] *= correction;
      for (int u = 0; u < n; ++u) {
        const float p = exp2f(s[u][g] - m_new);  // ... and its p is NaN
        l[g] += p;
        for (int e = 0; e < PER_LANE; ++e) acc[g][e] += p * vf[u][e];
      }
      m[g] = m_new;
    }
  }
  // Combine the warps, in a fixed order (the same inputs give the same bits every time).
  __shared__ float s_max[HEADS][WARPS], s_sum[HEADS][WARPS], s_acc[HEADS][WARPS][D];
  for (int g = 0; g < HEADS; ++g) {
    if (lane == 0) {
      s_max[g][warp] = m[g];
      s_sum[g][warp] = l[g];
    }
    for (int e = 0; e < PER_LANE; ++e) {
      if (lane + 32 * e < D) s_acc[g][warp][lane + 32 * e] = acc[g][e];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < HEADS * D; i += THREADS) {
    const int g = i / D, d = i % D;
    float top = neg_inf;
    for (int w = 0; w < WARPS; ++w) top = fmaxf(top, s_max[g][w]);
    float num = 0.0f, den = 0.0f;
    for (int w = 0; w < WARPS; ++w) {
      const float f = s_max[g][w] == neg_inf ? 0.0f : exp2f(s_max[g][w] - top);  // an idle warp
      num += f * s_acc[g][w][d];
      den += f * s_sum[g][w];
    }
    const long long at = (long long)(batch * heads + head0 + g) * rows + row;
"""

# All query rows of one KV head (its group's heads times the block's rows: 32 for an 8-row
# verify of a 4-head group) in one block, which walks the range's keys in tiles of
# TILE_KEYS: the block loads a tile of key and value rows into shared memory once, each lane
# scores one key against each of its warp's QUERIES query rows (no shuffles: the dot is a
# lane's own), the warp's online softmax takes the tile at once (two reductions a query
# row a tile, not per key), and each lane then adds its share of the head's values. The
# key-by-key kernel above reads each key row once per query row and reduces every score
# across the warp, which a profile found to be most of its instructions.
_TILED = """
  constexpr int WARPS = THREADS / 32;
  constexpr int KT = 32;  // keys a tile (TILE_KEYS): one a lane when scoring
  constexpr int D4 = D / 4;
  constexpr int QB = WARPS * QUERIES;  // query rows a block
  constexpr int PER_LANE = (D + 31) / 32;  // lane holds value elements lane, lane + 32, ...
  const float neg_inf = __int_as_float(0xff800000);
  const int rows = q_shape[2];
  const int heads = q_shape[1];
  const int group = heads / k_shape[1];
  const int keys = k_shape[2];
  const int q_tiles = (group * rows + QB - 1) / QB;
  const int kv_head = blockIdx.x / q_tiles;
  const int q0 = (blockIdx.x % q_tiles) * QB;  // query i of the block is row i % rows of head i / rows
  const int batch = blockIdx.y;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  // The block's keys: every row's range together (the first row's start to the last row's
  // end), with CHUNK the z-th CHUNK of them (possibly none for some rows).
  const int first = WINDOW > 0 ? max(0, keys - rows - WINDOW + 1) : 0;
  const int lo = CHUNK > 0 ? first + blockIdx.z * CHUNK : first;
  const int hi = CHUNK > 0 ? min(keys, lo + CHUNK) : keys;
  const T* kp = k + batch * k_strides[0] + kv_head * k_strides[1];
  const T* vp = v + batch * v_strides[0] + kv_head * v_strides[1];

  __shared__ float4 qs[QB][D4];  // scaled to base 2: exp2f is one instruction, expf several
  __shared__ float4 ks[KT][D4];  // key j's group c of 4 at [j][(c + j) % D4]: lanes hit apart banks
  __shared__ float vs[KT][D];
  const float sc = scale[0] * 1.4426950408889634f;
  for (int i = threadIdx.x; i < QB * D; i += THREADS) {
    const int qi = q0 + i / D, d = i % D;
    float x = 0.0f;
    if (qi < group * rows) {
      const int head = kv_head * group + qi / rows, row = qi % rows;
      x = static_cast<float>(q[batch * q_strides[0] + head * q_strides[1] + row * q_strides[2]
                               + d * q_strides[3]]) * sc;
    }
    reinterpret_cast<float*>(qs)[i] = x;
  }
  // This warp's query rows: their ranges, and an online softmax each (running max, sum, values).
  int q_lo[QUERIES], q_hi[QUERIES];
  float m[QUERIES], l[QUERIES], acc[QUERIES][PER_LANE];
  int warp_lo = 0, warp_hi = keys;  // the keys every one of the warp's rows sees
  for (int u = 0; u < QUERIES; ++u) {
    const int qi = q0 + warp * QUERIES + u;
    q_lo[u] = 0;
    q_hi[u] = keys;  // a query past the last (never written) sees everything: no branch for it
    if (qi < group * rows) {
      const int last = keys - rows + qi % rows;  // the row's own key
      q_hi[u] = CAUSAL ? last + 1 : keys;
      q_lo[u] = WINDOW > 0 ? max(0, last - WINDOW + 1) : 0;
    }
    warp_lo = max(warp_lo, q_lo[u]);
    warp_hi = min(warp_hi, q_hi[u]);
    m[u] = neg_inf;
    l[u] = 0.0f;
    for (int e = 0; e < PER_LANE; ++e) acc[u][e] = 0.0f;
  }

  // Thread t loads element t % D of key rows t / D, t / D + THREADS / D, ... of each tile
  // (THREADS is a multiple of D). (Loading the next tile while this one is scored took 140
  // registers a thread, one block an SM, and was slower: docs/PERFORMANCE.md.)
  constexpr int LOADS = KT * D / THREADS;
  constexpr int ROW_STEP = THREADS / D;
  const int ld_d = threadIdx.x % D, ld_j = threadIdx.x / D;
  const T* k_col = kp + ld_d * k_strides[3];
  const T* v_col = vp + ld_d * v_strides[3];
  T k_next[LOADS], v_next[LOADS];
  for (int t0 = lo; t0 < hi; t0 += KT) {
    for (int n = 0; n < LOADS; ++n) {
      const long long key = t0 + ld_j + n * ROW_STEP;
      const bool in = key < hi;  // no key outside the block's ranges is read
      k_next[n] = in ? k_col[key * k_strides[2]] : static_cast<T>(0.0f);
      v_next[n] = in ? v_col[key * v_strides[2]] : static_cast<T>(0.0f);
    }
    __syncthreads();  // every warp is done with the last tile (and, the first time, qs is written)
    for (int n = 0; n < LOADS; ++n) {
      const int j = ld_j + n * ROW_STEP;
      reinterpret_cast<float*>(ks[j])[((ld_d / 4 + j) % D4) * 4 + ld_d % 4] = static_cast<float>(k_next[n]);
      vs[j][ld_d] = static_cast<float>(v_next[n]);
    }
    __syncthreads();
    // Lane j scores key t0 + j against each of the warp's query rows.
    const int key = t0 + lane;
    float s[QUERIES];
    for (int u = 0; u < QUERIES; ++u) s[u] = 0.0f;
    for (int c = 0; c < D4; ++c) {
      const float4 kx = ks[lane][(c + lane) % D4];
      for (int u = 0; u < QUERIES; ++u) {
        const float4 qx = qs[warp * QUERIES + u][c];
        s[u] += qx.x * kx.x + qx.y * kx.y + qx.z * kx.z + qx.w * kx.w;
      }
    }
    // The tile at once: one rescale of each row's running sums.
    float p[QUERIES];
    for (int u = 0; u < QUERIES; ++u) {
      const bool seen = key >= q_lo[u] && key < q_hi[u] && key < hi;
      float top = seen ? s[u] : neg_inf;  // a NaN score leaves the max ...
      for (int o = 16; o > 0; o /= 2) top = fmaxf(top, __shfl_xor_sync(0xffffffff, top, o));
      const float m_new = fmaxf(m[u], top);
      const float correction = m[u] == neg_inf ? 0.0f : exp2f(m[u] - m_new);  // 0: nothing seen yet
      p[u] = seen ? exp2f(s[u] - m_new) : 0.0f;  // ... and its p is NaN
      float sum = p[u];
      for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffff, sum, o);
      l[u] = l[u] * correction + sum;
      for (int e = 0; e < PER_LANE; ++e) acc[u][e] *= correction;
      m[u] = m_new;
    }
    // Each lane adds its elements of the tile's value rows, weighted by each key's p (held by
    // the key's lane). A row adds only the keys it sees: a value row it does not see may be
    // NaN (0 * NaN is NaN); the branch is the warp's own, so only a tile at a range's edge pays it.
    const bool whole = t0 + KT <= hi && t0 >= warp_lo && t0 + KT <= warp_hi;
    for (int j = 0; j < KT && t0 + j < hi; ++j) {
      float vx[PER_LANE];
      for (int e = 0; e < PER_LANE; ++e) vx[e] = lane + 32 * e < D ? vs[j][lane + 32 * e] : 0.0f;
      for (int u = 0; u < QUERIES; ++u) {
        if (!whole && (t0 + j < q_lo[u] || t0 + j >= q_hi[u])) continue;
        const float pj = __shfl_sync(0xffffffff, p[u], j);
        for (int e = 0; e < PER_LANE; ++e) acc[u][e] += pj * vx[e];
      }
    }
  }
  for (int u = 0; u < QUERIES; ++u) {
    const int qi = q0 + warp * QUERIES + u;
    if (qi >= group * rows) break;
    const int head = kv_head * group + qi / rows;
    const long long at = (long long)(batch * heads + head) * rows + qi % rows;
    for (int e = 0; e < PER_LANE; ++e) {
      const int d = lane + 32 * e;
      if (d >= D) break;
"""

# The tiled kernel's endings: the normalized row, or one chunk's partial row (_COMBINE).
_TILED_WHOLE = """      out[at * D + d] = static_cast<T>(acc[u][e] / l[u]);
    }
  }
"""

_TILED_PART = """      const long long part = at * gridDim.z + blockIdx.z;
      part_acc[part * D + d] = acc[u][e];
      if (d == 0) {
        part_ml[part * 2] = m[u];
        part_ml[part * 2 + 1] = l[u];
      }
    }
  }
"""

# One block's whole range: the normalized row.
_WHOLE = """    out[at * D + d] = static_cast<T>(num / den);
  }
"""

# One chunk of the range: the partial row, unnormalized, with its max (base 2) and sum (_COMBINE).
_PART = """    const long long part = at * gridDim.z + blockIdx.z;
    part_acc[part * D + d] = num;
    if (d == 0) {
      part_ml[part * 2] = top;
      part_ml[part * 2 + 1] = den;
    }
  }
"""

# The chunks of each row, in a fixed order: one thread per output value.
_COMBINE = """
  const float neg_inf = __int_as_float(0xff800000);
  const int chunks = part_ml_shape[3];
  const long long total = (long long)part_ml_shape[0] * part_ml_shape[1] * part_ml_shape[2] * D;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const long long at = i / D;
  const int d = i % D;
  const float* ml = part_ml + at * chunks * 2;
  float top = neg_inf;
  for (int c = 0; c < chunks; ++c) top = fmaxf(top, ml[c * 2]);
  float num = 0.0f, den = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    const float f = ml[c * 2] == neg_inf ? 0.0f : exp2f(ml[c * 2] - top);  // a chunk with no keys
    num += f * part_acc[(at * chunks + c) * D + d];
    den += f * ml[c * 2 + 1];
  }
  out[i] = static_cast<T>(num / den);
"""


def available() -> bool:
    """Whether arrays are computed on a CUDA GPU (where the kernel runs)."""
    return mx.default_device() == mx.gpu and mx.cuda.is_available()


def supports(q: mx.array, k: mx.array, v: mx.array, window: int = 0) -> bool:
    """Shapes the kernel takes: a block's few rows, a head of at most 256 values, one
    float type, whole groups of query heads per KV head, and a window no shorter than the
    block (a shorter one would hide block keys, which the engine's masks never do)."""
    rows = q.shape[2]
    return (1 <= rows <= MAX_ROWS and q.shape[-1] <= MAX_HEAD_DIM and k.shape[-1] == q.shape[-1]
            and v.shape[-1] == q.shape[-1] and q.dtype == k.dtype == v.dtype
            and q.dtype in (mx.float32, mx.float16, mx.bfloat16)
            and q.shape[1] % k.shape[1] == 0 and k.shape[2] >= rows
            and (window == 0 or window >= rows))


@functools.lru_cache(maxsize=2)
def _kernel(tiled: bool):
    return mx.fast.cuda_kernel(
        name="dflash_block_attention" + ("_tiled" if tiled else ""),
        input_names=["q", "k", "v", "scale"], output_names=["out"],
        source=_TILED + _TILED_WHOLE if tiled else _SOURCE + _WHOLE, ensure_row_contiguous=False)


@functools.lru_cache(maxsize=2)
def _chunk_kernel(tiled: bool):
    return mx.fast.cuda_kernel(
        name="dflash_block_attention_chunks" + ("_tiled" if tiled else ""),
        input_names=["q", "k", "v", "scale"], output_names=["part_acc", "part_ml"],
        source=_TILED + _TILED_PART if tiled else _SOURCE + _PART, ensure_row_contiguous=False)


@functools.lru_cache(maxsize=1)
def _combine_kernel():
    return mx.fast.cuda_kernel(
        name="dflash_block_attention_combine", input_names=["part_acc", "part_ml"],
        output_names=["out"], source=_COMBINE)


@functools.lru_cache(maxsize=16)
def _scale(value: float) -> mx.array:
    """The scale as a device array, made once (the kernel takes no scalar arguments)."""
    return mx.array([value], dtype=mx.float32)


def visible(keys: int, rows: int, causal: bool, window: int = 0) -> np.ndarray:
    """[rows, keys] bool: the ranges above, as a mask."""
    last = keys - rows + np.arange(rows)[:, None]
    key = np.arange(keys)[None]
    seen = key <= last if causal else np.ones((rows, keys), dtype=bool)
    if window:
        seen = seen & (key > last - window)
    return seen


def attend(q: mx.array, k: mx.array, v: mx.array, scale: float, causal: bool,
           window: int = 0, launch: Launch = LAUNCH) -> mx.array:
    """softmax(q k^T * scale) v over each row's range: q [B, Hq, L, D], k and v
    [B, Hkv, N, D] (views are read in place), out [B, Hq, L, D] in q's type."""
    if not available():
        mask = mx.array(visible(k.shape[2], q.shape[2], causal, window))
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
    batch, heads, rows, dim = q.shape
    kv_heads = k.shape[1]
    chunks = launch.chunks(k.shape[2], rows, window)
    tiled = launch.tiles(dim)
    template = [("T", q.dtype), ("D", dim), ("THREADS", launch.threads), ("CAUSAL", bool(causal)),
                ("WINDOW", int(window))]
    if tiled:
        block_queries = launch.threads // 32 * launch.queries
        template.append(("QUERIES", launch.queries))
        blocks = kv_heads * -(-(heads // kv_heads * rows) // block_queries) * launch.threads
    else:
        grouped = launch.heads_per_block(heads // kv_heads, dim)
        template += [("HEADS", grouped), ("UNROLL", launch.unroll)]
        blocks = heads // grouped * rows * launch.threads
    inputs = [q, k, v, _scale(float(scale))]
    if chunks == 1:
        (out,) = _kernel(tiled)(
            inputs=inputs, template=template + [("CHUNK", 0)], grid=(blocks, batch, 1),
            threadgroup=(launch.threads, 1, 1), output_shapes=[q.shape], output_dtypes=[q.dtype])
        return out
    parts = (batch, heads, rows, chunks)
    part_acc, part_ml = _chunk_kernel(tiled)(
        inputs=inputs, template=template + [("CHUNK", launch.chunk)], grid=(blocks, batch, chunks),
        threadgroup=(launch.threads, 1, 1), output_shapes=[parts + (dim,), parts + (2,)],
        output_dtypes=[mx.float32, mx.float32])
    values = batch * heads * rows * dim
    (out,) = _combine_kernel()(
        inputs=[part_acc, part_ml], template=[("T", q.dtype), ("D", dim)],
        grid=(-(-values // 256) * 256, 1, 1), threadgroup=(256, 1, 1),
        output_shapes=[q.shape], output_dtypes=[q.dtype])
    return out


# ---- the target's verify ------------------------------------------------------------------


class KernelKVCache(KVCache):
    """mlx-lm's KVCache, marking a cache whose few-row forwards attend through `attend`
    (`route_target_attention`); it holds and trims rows exactly as KVCache does."""


def _routed(original):
    def scaled_dot_product_attention(queries, keys, values, cache, scale, mask, sinks=None):
        causal = isinstance(mask, str) and mask == "causal"
        if (isinstance(cache, KernelKVCache) and sinks is None and (mask is None or causal)
                and queries.shape[2] > 1 and supports(queries, keys, values)):
            return attend(queries, keys, values, scale, causal)
        return original(queries, keys, values, cache=cache, scale=scale, mask=mask, sinks=sinks)

    return scaled_dot_product_attention


def route_target_attention(model) -> None:
    """Send the few-row attention of `model`'s layers through `attend` when their cache is a
    KernelKVCache. mlx-lm's attention modules call the `scaled_dot_product_attention` of
    their own model module (mlx_lm.models.llama, ...), so that name is wrapped there, once
    per module; the wrapper calls mlx-lm's own function for every other cache, so other
    models of the same family (a baseline decoding beside the engine) are untouched."""
    for module in model.modules():
        owner = sys.modules.get(type(module).__module__)
        attention = getattr(owner, "scaled_dot_product_attention", None)
        if attention is base.scaled_dot_product_attention:
            owner.scaled_dot_product_attention = _routed(attention)
