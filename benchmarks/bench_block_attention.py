"""The block attention kernel's layouts at real shape, against MLX's attention (CUDA GPU only).

    python -m benchmarks.bench_block_attention [--lengths 300,1024,4096,16384] [--repeats 8]
        [--dtype bfloat16] [--layouts 0,2] [--json FILE]

For each layout (engine/block_attention.py, `Launch`: threads per block, keys in flight per
warp, query heads per block, keys per block before a row's range is split; or the tiled
kernel's query rows a warp) and each key length: the median time of one waited call at key
lengths never met before, and the time a call when a round's calls are queued and waited
for once (each over its own keys, as a round's layers are: what a round pays), for the
verify's block (8 rows, causal) and the drafter's (16 rows, all visible), at the real
target's heads (32 query / 8 KV, head size 128); whether five calls on the same inputs give
the same bits; and the largest error against float64 numpy. Beside them, MLX's own attention at a new key length (a plan), at the same length
again, and padded to a 512-row buffer under a mask (engine/padded_attention.py). A round of
the real-scale pair makes 36 verify calls and 5 drafter calls: `round ms` weighs them so.
(A waited call carries ~0.2 ms of launch and wait, which a queued round does not pay.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Optional

import mlx.core as mx
import numpy as np

from benchmarks import common
from benchmarks.synthetic import REAL
from dflash_tui.engine import block_attention
from dflash_tui.engine.block_attention import Launch, attend, visible

LAYOUTS = (Launch(256, 512, unroll=4), Launch(256, 512, unroll=8), Launch(256, 256), Launch(512, 1024),
           Launch(chunk=512, tiled=True), Launch(chunk=256, tiled=True), Launch(chunk=128, tiled=True),
           Launch(threads=128, queries=8, chunk=256, tiled=True))
SHAPES = ((8, True), (16, False))  # (rows, causal): the verify's block, the drafter's
CALLS = {8: 36, 16: 5}  # calls of each shape in a real-scale round


def _inputs(rows: int, keys: int, dtype, seed: int = 0):
    rng = np.random.default_rng(seed)
    q = mx.array(rng.normal(size=(1, REAL.heads, rows, REAL.head_dim)).astype(np.float32)).astype(dtype)
    k, v = (mx.array(rng.normal(size=(1, REAL.kv_heads, keys, REAL.head_dim)).astype(np.float32)).astype(dtype)
            for _ in range(2))  # values apart from keys: a value row is not in cache for a key's load
    mx.eval(q, k, v)
    return q, k, v


def _waited_ms(call) -> float:
    t0 = time.perf_counter()
    mx.eval(call())
    return (time.perf_counter() - t0) * 1000


def _error(q, k, v, out, causal: bool) -> float:
    """Largest |out - attention in float64| (values as the kernel read them)."""
    q64, k64, v64 = (np.array(t.astype(mx.float32)).astype(np.float64) for t in (q, k, v))
    k64, v64 = (np.repeat(t, q64.shape[1] // t.shape[1], axis=1) for t in (k64, v64))
    scores = q64 @ k64.transpose(0, 1, 3, 2) * REAL.head_dim ** -0.5
    scores = np.where(visible(k64.shape[2], q64.shape[2], causal), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    expected = (weights / weights.sum(-1, keepdims=True)) @ v64
    return float(np.abs(np.array(out.astype(mx.float32)) - expected).max())


def _queued_ms(rows: int, keys: int, causal: bool, launch: Launch, dtype) -> float:
    """ms a call when a round's calls of this shape are queued together, each over its own
    layer's keys (as the verify's 36 layers are), and waited for once: no launch or wait per
    call, and no key row left in L2 by the call before."""
    calls = CALLS[rows]
    q_shape, kv_shape = (1, REAL.heads, rows, REAL.head_dim), (1, REAL.kv_heads, keys, REAL.head_dim)
    layers = [tuple(mx.random.normal(shape, key=mx.random.key(3 * i + j)).astype(dtype)
                    for j, shape in enumerate((q_shape, kv_shape, kv_shape))) for i in range(calls)]
    mx.eval(layers)  # made on the device: numpy's generator would take longer than the calls
    scale = REAL.head_dim ** -0.5
    mx.eval([attend(q, k, v, scale, causal, launch=launch) for q, k, v in layers])  # warm
    t0 = time.perf_counter()
    mx.eval([attend(q, k, v, scale, causal, launch=launch) for q, k, v in layers])
    return (time.perf_counter() - t0) * 1000 / calls


def _layout(launch: Launch) -> str:
    chunks = f"chunks of {launch.chunk} keys" if launch.chunk else "no chunks"
    if launch.tiles(REAL.head_dim):
        return (f"tiled: {launch.threads} threads, {launch.queries} query rows a warp, "
                f"tiles of {block_attention.TILE_KEYS} keys, {chunks}")
    return (f"{launch.threads} threads, {launch.unroll} keys in flight, "
            f"{launch.heads_per_block(REAL.heads // REAL.kv_heads, REAL.head_dim)} heads a block, {chunks}")


def kernel_rows(args, dtype) -> list[dict]:
    scale = REAL.head_dim ** -0.5
    rows_out = []
    for launch in [LAYOUTS[i] for i in args.layouts]:
        row = {"layout": _layout(launch), "ms": {}, "queued ms": {}}
        for rows, causal in SHAPES:
            q, k, v = _inputs(rows, 290, dtype)
            mx.eval(attend(q, k, v, scale, causal, launch=launch))  # its compilation
            for base in args.lengths:
                times = []
                for i in range(args.repeats):
                    q, k, v = _inputs(rows, base + i, dtype, seed=i)
                    times.append(_waited_ms(lambda: attend(q, k, v, scale, causal, launch=launch)))
                row["ms"][f"{rows} rows, {base} keys"] = statistics.median(times)
                row["queued ms"][f"{rows} rows, {base} keys"] = _queued_ms(rows, base, causal, launch, dtype)
            q, k, v = _inputs(rows, 1000, dtype)
            first = attend(q, k, v, scale, causal, launch=launch)
            row[f"{rows} rows deterministic"] = all(
                bool(mx.array_equal(attend(q, k, v, scale, causal, launch=launch), first)) for _ in range(5))
            row[f"{rows} rows max error"] = _error(q, k, v, first, causal)
        row["round ms"] = {base: sum(CALLS[r] * row["ms"][f"{r} rows, {base} keys"] for r, _ in SHAPES)
                           for base in args.lengths}
        row["round ms, queued"] = {base: sum(CALLS[r] * row["queued ms"][f"{r} rows, {base} keys"]
                                             for r, _ in SHAPES) for base in args.lengths}
        rows_out.append(row)
    return rows_out


def mlx_rows(args, dtype) -> dict:
    scale, out = REAL.head_dim ** -0.5, {}
    for rows, causal in SHAPES:
        mask = "causal" if causal else None
        new = []
        for i in range(args.repeats):
            q, k, v = _inputs(rows, 300 + i, dtype, seed=i)
            new.append(_waited_ms(lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)))
        again = [_waited_ms(lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask))
                 for _ in range(args.repeats)]
        q, k, v = _inputs(rows, 512, dtype)
        padded = []
        for i in range(args.repeats):
            held = mx.array(visible(512, rows, causal) & (np.arange(512)[None] < 300 + i + rows))
            padded.append(_waited_ms(lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=held)))
        out[f"{rows} rows"] = {"new key length": statistics.median(new),
                               "same length again": statistics.median(again[1:]),
                               "padded to 512, masked": statistics.median(padded[1:])}
    return out


def run(args) -> dict:
    dtype = getattr(mx, args.dtype)
    return {"mlx": mx.__version__, "dtype": args.dtype, "lengths": args.lengths,
            "kernel": kernel_rows(args, dtype), "mlx_attention": mlx_rows(args, dtype)}


def report(result: dict) -> str:
    lines = [f"block attention, MLX {result['mlx']}, {result['dtype']}, heads {REAL.heads}/"
             f"{REAL.kv_heads}, head size {REAL.head_dim}; ms per waited call, new key lengths"]
    for row in result["kernel"]:
        times = ", ".join(f"{name} {ms:.3f}" for name, ms in row["ms"].items())
        checks = ", ".join(f"{r} rows: {'same bits' if row[f'{r} rows deterministic'] else 'NOT deterministic'}"
                           f", error {row[f'{r} rows max error']:.1e}" for r, _ in SHAPES)
        rounds = ", ".join(f"{base} keys {ms:.2f}" for base, ms in row["round ms"].items())
        queued = ", ".join(f"{name} {ms:.4f}" for name, ms in row["queued ms"].items())
        queued_rounds = ", ".join(f"{base} keys {ms:.2f}" for base, ms in row["round ms, queued"].items())
        lines += [f"{row['layout']}: {times}", f"    {checks}; a round's attention: {rounds} ms",
                  f"    queued, ms a call: {queued}; a round's attention: {queued_rounds} ms"]
    for shape, row in result["mlx_attention"].items():
        lines.append(f"MLX attention, {shape}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()))
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    parser.add_argument("--json", type=Path, help="write the numbers here")
    parser.add_argument("--lengths", default="300,1024,4096,16384",
                        type=lambda text: [int(n) for n in text.split(",")])
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--layouts", default=",".join(str(i) for i in range(len(LAYOUTS))),
                        type=lambda text: [int(n) for n in text.split(",")],
                        help="which of LAYOUTS to time (indices; default all)")
    args = parser.parse_args(argv)
    if any(not 0 <= i < len(LAYOUTS) for i in args.layouts):
        parser.error(f"--layouts {','.join(map(str, args.layouts))}: LAYOUTS has {len(LAYOUTS)} "
                     f"layouts, 0 to {len(LAYOUTS) - 1}")
    if not block_attention.available():
        print("bench_block_attention: the kernel runs on a CUDA GPU only; this machine computes "
              f"on {mx.default_device()}", file=sys.stderr)
        raise SystemExit(2)
    return common.finish(run(args), report, args.json)


if __name__ == "__main__":
    main()
