"""Long context: round time at a long context against a short one, and memory over many
rounds, with a drafter whose layers slide (all but the last, which attends to everything).

    python -m benchmarks.bench_long_context           # the full shape: a GPU (H200: ~3 min)
    python -m benchmarks.bench_long_context --tiny    # CPU-sized (a minute or two)
        [--contexts 1024,16384] [--rounds 16] [--block 7] [--window 2048]
        [--memory-rounds 300] [--dtype bfloat16] [--json FILE]

The pair is benchmarks/synthetic.py's (REAL or TINY) with sliding-window drafter layers. Per
context length: a prompt of that many random tokens, prefilled, then rounds with the
drafter's own (random) proposals, probes and ranks off, chained (`step_round`); the median
round time after two warm-up rounds. Goal: the longest context's round <= 1.3x the
shortest's (the target's own attention still grows with the context; the drafter's sliding
layers do not).

Then, at the longest context, `--memory-rounds` more rounds, sampling every tenth: the
drafter's context buffers (a sliding layer's must stay flat; the full layer's grows by the
rows committed), MLX's active memory (grows only by the committed rows' K/V, target and
drafter, worked out from the shapes), MLX's cache of freed buffers, and the process's RSS.
"""

from __future__ import annotations

import statistics
from typing import Optional

import mlx.core as mx
import numpy as np

from benchmarks import common
from benchmarks.common import Clock, finish
from benchmarks.synthetic import REAL, TINY, Shape, synthetic_pair, with_shape
from dflash_tui.engine.api import Pair
from dflash_tui.engine.session import Session, SessionOptions

MiB = 2 ** 20


def rss_mib() -> Optional[float]:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def open_session(pair: Pair, length: int, block: int, seed: int) -> Session:
    vocab = pair.target.vocab_size
    prompt = np.random.default_rng(seed).integers(0, vocab - 1, length).tolist()
    session = Session(pair, prompt, options=SessionOptions(
        gamma=block, max_tokens=10 ** 9, probes=False, ranks=False))
    session.prefill()
    return session


def round_times(session: Session, rounds: int) -> tuple[float, float]:
    """Median round and host (outside the wait) milliseconds, after two warm-up rounds."""
    walls, hosts = [], []
    for index in range(rounds + 2):
        waited = session.waits.seconds
        clock = Clock()
        session.step_round()
        wall = clock.read()[0]
        if index >= 2:
            walls.append(1000 * wall)
            hosts.append(1000 * (wall - (session.waits.seconds - waited)))
    return statistics.median(walls), statistics.median(hosts)


def cache_bytes(session: Session) -> dict[str, int]:
    out = {"sliding": 0, "full": 0}
    for cache in session.ctx_caches:
        kind = "full" if cache.keep is None else "sliding"
        out[kind] += sum(int(b.nbytes) for b in (cache.keys, cache.values) if b is not None)
    return out


def kv_bytes_per_token(shape: Shape, dtype_size: int) -> dict[str, int]:
    """K and V of one committed position: every target layer, the drafter's full layer."""
    row = 2 * shape.kv_heads * shape.head_dim * dtype_size
    full_draft = 1 if shape.sliding_window else shape.draft_layers
    return {"target": shape.layers * row, "drafter": full_draft * row}


def memory(session: Session, shape: Shape, rounds: int) -> dict:
    samples = []
    for index in range(rounds):
        session.step_round()
        if index % 10 == 0 or index == rounds - 1:
            samples.append({"round": index, "committed": len(session.tokens),
                            "cache": cache_bytes(session),
                            "active": mx.get_active_memory(), "buffer_cache": mx.get_cache_memory(),
                            "rss_mib": rss_mib()})
    first, last = samples[len(samples) // 2], samples[-1]  # the second half: past warm-up
    rows = max(last["committed"] - first["committed"], 1)
    per_token = kv_bytes_per_token(shape, session.drafter.norm.weight.dtype.size)

    def per_row(value):
        return value / rows

    return {
        "rounds": rounds, "committed_rows": rows, "samples": samples,
        "sliding_cache_bytes": (first["cache"]["sliding"], last["cache"]["sliding"]),
        "full_cache_bytes_per_row": per_row(last["cache"]["full"] - first["cache"]["full"]),
        "active_bytes_per_row": per_row(last["active"] - first["active"]),
        "expected_kv_bytes_per_row": per_token["target"] + per_token["drafter"],
        "buffer_cache_bytes": (first["buffer_cache"], last["buffer_cache"]),
        "rss_mib": (first["rss_mib"], last["rss_mib"]),
    }


def run(args) -> dict:
    base = TINY if args.tiny else REAL
    shape = with_shape(base, sliding_window=args.window or (64 if args.tiny else 2048))
    pair = synthetic_pair(shape, args.dtype)
    contexts = sorted(int(c) for c in args.contexts.split(","))
    rows = {}
    session = None
    for i, length in enumerate(contexts):
        if session is not None:
            session.close()
        session = open_session(pair, length, args.block, seed=i)
        round_ms, host_ms = round_times(session, args.rounds)
        rows[length] = {"round_ms": round_ms, "host_ms": host_ms}
    result = {
        "shape": shape.describe(), "dtype": args.dtype, "block": args.block,
        "backend": "gpu" if mx.default_device() == mx.gpu else "cpu", "mlx": mx.__version__,
        "contexts": rows,
        "ratio": rows[contexts[-1]]["round_ms"] / rows[contexts[0]]["round_ms"],
        "memory": memory(session, shape, args.memory_rounds),
    }
    session.close()
    return result


def report(result: dict) -> str:
    lines = [result["shape"], f"{result['backend']} (MLX {result['mlx']}), {result['dtype']}, "
             f"block {result['block']}, probes and ranks off"]
    for length, row in result["contexts"].items():
        lines.append(f"context {int(length):>6}: round {row['round_ms']:8.2f} ms "
                     f"(host {row['host_ms']:.2f})")
    first = min(result["contexts"], key=int)
    lines.append(f"longest / {first}-token round time: {result['ratio']:.3f}")
    m = result["memory"]
    sliding = m["sliding_cache_bytes"]
    lines.append(f"over {m['rounds']} more rounds ({m['committed_rows']} rows committed in the "
                 f"second half): sliding layers' buffers {sliding[0] / MiB:.2f} -> "
                 f"{sliding[1] / MiB:.2f} MiB; full layer +{m['full_cache_bytes_per_row']:.0f} B/row")
    lines.append(f"MLX active memory +{m['active_bytes_per_row']:.0f} B/row (the committed rows' "
                 f"K/V: {m['expected_kv_bytes_per_row']} B/row); buffer cache "
                 f"{m['buffer_cache_bytes'][0] / MiB:.1f} -> {m['buffer_cache_bytes'][1] / MiB:.1f} MiB")
    if m["rss_mib"][0] is not None:
        lines.append(f"RSS {m['rss_mib'][0]:.1f} -> {m['rss_mib'][1]:.1f} MiB")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> dict:
    parser = common.parser(__doc__, "bfloat16")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--contexts", default="1024,16384")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--window", type=int, help="sliding window (default 2048; 64 with --tiny)")
    parser.add_argument("--memory-rounds", type=int, default=300)
    args = parser.parse_args(argv)
    return finish(run(args), report, args.json)


if __name__ == "__main__":
    main()
