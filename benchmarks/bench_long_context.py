"""Long context: round time at a long context against a short one, and memory over many
rounds, with a drafter whose layers slide (all but the last, which attends to everything).

    python -m benchmarks.bench_long_context           # the full shape: a GPU (H200: ~3 min)
    python -m benchmarks.bench_long_context --tiny    # CPU-sized (a minute or two)
        [--contexts 1024,16384] [--rounds 16] [--block 7] [--window 2048]
        [--memory-rounds 300] [--attention mlx|padded|kernel] [--dtype bfloat16] [--json FILE]

The pair is benchmarks/synthetic.py's (REAL or TINY) with sliding-window drafter layers. Per
context length: a prompt of that many random tokens, prefilled, then rounds with the
drafter's own (random) proposals, probes and ranks off, chained (`step_round`); the median
round time after two warm-up rounds. Goal: the longest context's round <= 1.3x the
shortest's (the target's own attention still grows with the context; the drafter's sliding
layers do not).

Then, at the longest context, `--memory-rounds` more rounds, sampling every tenth: the K/V
buffers held (a sliding layer's must stay flat; the drafter's full layer and the target
grow by the rows committed, in steps), MLX's active memory less those buffers (must stay
flat), MLX's cache of freed buffers (bounded, engine/memory.py) and the process's RSS.
"""

from __future__ import annotations

import statistics
from typing import Optional

import mlx.core as mx
import numpy as np

from benchmarks import common
from benchmarks.common import Clock, finish
from benchmarks.synthetic import REAL, TINY, synthetic_pair, with_shape
from dflash_tui.engine.api import Pair
from dflash_tui.engine.records import STAGE_ORDER
from dflash_tui.engine.session import ATTENTION_KINDS, Session, SessionOptions

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


def open_session(pair: Pair, length: int, block: int, seed: int,
                 attention: Optional[str] = None) -> Session:
    vocab = pair.target.vocab_size
    prompt = np.random.default_rng(seed).integers(0, vocab - 1, length).tolist()
    session = Session(pair, prompt, options=SessionOptions(
        gamma=block, max_tokens=10 ** 9, probes=False, ranks=False, attention=attention))
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


def stage_times(session: Session, rounds: int) -> dict[str, float]:
    """Median ms of each stage, stepped and waited for one by one: where a longer context
    costs (drafter: context, draft; target: verify)."""
    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        for stage in STAGE_ORDER:
            times.setdefault(stage, []).append(session.step_stage().stages[-1].ms)
    return {stage: statistics.median(v) for stage, v in times.items()}


def cache_bytes(session: Session) -> dict[str, int]:
    """Bytes of the K/V buffers held: the drafter's sliding and full layers, the target's."""
    out = {"sliding": 0, "full": 0, "target": 0}
    for cache in session.ctx_caches:
        kind = "full" if cache.keep is None else "sliding"
        out[kind] += sum(int(b.nbytes) for b in (cache.keys, cache.values) if b is not None)
    for cache in session.target.cache:
        out["target"] += sum(int(b.nbytes) for b in (getattr(cache, "keys", None),
                                                     getattr(cache, "values", None)) if b is not None)
    return out


def memory(session: Session, rounds: int) -> dict:
    """Sampled every tenth round after a first tenth of warm-up: the caches' buffers, MLX's
    active memory less those buffers (what must stay flat), its cache of freed buffers, RSS."""
    samples = []
    for index in range(rounds):
        session.step_round()
        if index >= rounds // 10 and (index % 10 == 0 or index == rounds - 1):
            held = cache_bytes(session)
            samples.append({"round": index, "committed": len(session.tokens), "held": held,
                            "active_less_caches": mx.get_active_memory() - sum(held.values()),
                            "buffer_cache": mx.get_cache_memory(), "rss_mib": rss_mib()})
    first, last = samples[0], samples[-1]
    return {
        "rounds": rounds, "committed_rows": last["committed"] - first["committed"],
        "samples": samples,
        "sliding_cache_bytes": (first["held"]["sliding"], last["held"]["sliding"]),
        "full_cache_bytes": (first["held"]["full"], last["held"]["full"]),
        "target_cache_bytes": (first["held"]["target"], last["held"]["target"]),
        "active_less_caches": (first["active_less_caches"], last["active_less_caches"]),
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
        session = open_session(pair, length, args.block, seed=i, attention=args.attention)
        round_ms, host_ms = round_times(session, args.rounds)
        rows[length] = {"round_ms": round_ms, "host_ms": host_ms,
                        "stage_ms": stage_times(session, max(args.rounds // 2, 1))}
    result = {
        "shape": shape.describe(), "dtype": args.dtype, "block": args.block,
        "backend": "gpu" if mx.default_device() == mx.gpu else "cpu", "mlx": mx.__version__,
        "attention": session.attention, "contexts": rows,
        "ratio": rows[contexts[-1]]["round_ms"] / rows[contexts[0]]["round_ms"],
        "memory": memory(session, args.memory_rounds),
    }
    session.close()
    return result


def report(result: dict) -> str:
    lines = [result["shape"], f"{result['backend']} (MLX {result['mlx']}), {result['dtype']}, "
             f"block {result['block']}, attention {result.get('attention')}, probes and ranks off"]
    for length, row in result["contexts"].items():
        stages = ", ".join(f"{k} {v:.1f}" for k, v in row["stage_ms"].items())
        lines.append(f"context {int(length):>6}: round {row['round_ms']:8.2f} ms (host "
                     f"{row['host_ms']:.2f}); stage by stage: {stages}")
    first = min(result["contexts"], key=int)
    lines.append(f"longest / {first}-token round time: {result['ratio']:.3f}")
    m = result["memory"]

    def mib(pair):
        return f"{pair[0] / MiB:.2f} -> {pair[1] / MiB:.2f} MiB"

    lines.append(f"over {m['rounds']} more rounds ({m['committed_rows']} rows committed while "
                 f"sampled): drafter sliding layers {mib(m['sliding_cache_bytes'])}, full layer "
                 f"{mib(m['full_cache_bytes'])}, target K/V {mib(m['target_cache_bytes'])}")
    lines.append(f"MLX active memory less those buffers {mib(m['active_less_caches'])}; "
                 f"buffer cache {mib(m['buffer_cache_bytes'])}")
    if m["rss_mib"][0] is not None:
        lines.append(f"RSS {m['rss_mib'][0]:.1f} -> {m['rss_mib'][1]:.1f} MiB")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> dict:
    parser = common.parser(__doc__, "bfloat16")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--contexts", default="1024,16384")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--window", type=int, help="sliding window (default 2048; 64 with --tiny)")
    parser.add_argument("--memory-rounds", type=int, default=600)
    parser.add_argument("--attention", choices=ATTENTION_KINDS,
                        help="the attention route (default: the session's, kernel on a CUDA GPU)")
    args = parser.parse_args(argv)
    return finish(run(args), report, args.json)


if __name__ == "__main__":
    main()
