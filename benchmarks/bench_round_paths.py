"""One round as each command runs it, in one process: what the debugger's engine costs over
the bench's loop, what probes add, and how much of a round is the host's Python.

    LD_PRELOAD=$(python -c 'from dflash_tui.blas import openblas_path; print(openblas_path())') \
        python -m benchmarks.bench_round_paths [MODEL --draft DIR] [--rounds 16] [--repeats 3]
            [--block 15] [--warm-up 2] [--profile] [--json F]

(from the repository root; LD_PRELOAD only on a Linux CPU, as the console script sets it.
No MODEL: the bundled sample with its drafter and its default prompt, the block `./run
probe` uses, 15.)

Four sessions of the same prompt and block step in turn, round by round, each owning the
target's cache while it steps (benchmarks/bench_engine.py's `interleaved`), so a machine
that slows mid-run slows all four alike. They commit the same tokens (checked), so round i
is the same round on every path:

  bench              step_round, probes and ranks off (`dflash-tui bench`)
  probe --no-probes  step_round, ranks on, and the round's printed line (`probe --no-probes`)
  probe              step_round, probes and ranks on, and the line (`dflash-tui probe`)
  tui engine         step_stage five times, each stage waited for, probes and ranks on (the
                     TUI's engine thread; drawing is not counted: docs/TUI.md, bench_tui)

Per round: wall ms, and of it the time inside mx.async_eval and mx.eval (MLX computing; on a
CPU async_eval runs much of the queued work before it returns) and the rest, `python`: graph
building, read-backs, records, the printed line. Each repeat opens fresh sessions and takes
medians over its rounds; the report gives the median of the repeats' medians and their
range (min-max), and each path's round time over the bench's, per repeat. --profile adds,
per path, the project's functions by their own time over one more repeat (cProfile does not
see inside MLX's calls: their time lands on the caller, so read `_chained_round` and
`_wait` as MLX).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Callable, Optional

import mlx.core as mx

from benchmarks import common
from benchmarks.bench_engine import interleaved
from dflash_tui import sample
from dflash_tui.engine import SessionOptions, load_pair
from dflash_tui.engine.records import STAGE_ORDER
from dflash_tui.probe import Tally, round_line

BENCH, NO_PROBES, PROBE, TUI = "bench", "probe --no-probes", "probe", "tui engine"
MLX_CALLS = ("async_eval", "eval")


@contextmanager
def mlx_clock(clock: dict):
    """Add the seconds spent inside mx.async_eval and mx.eval to clock['mlx']."""
    originals = {name: getattr(mx, name) for name in MLX_CALLS}

    def timed(f):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                clock["mlx"] += time.perf_counter() - t0
        return wrapper

    for name in MLX_CALLS:
        setattr(mx, name, timed(originals[name]))
    try:
        yield
    finally:
        for name in MLX_CALLS:
            setattr(mx, name, originals[name])


def stepper(clock: dict, whole_round: Callable, printed: bool) -> Callable:
    """step(session) -> (wall ms, mlx ms, committed tokens) of one round."""
    tally = Tally()

    def step(session):
        before, t0 = clock["mlx"], time.perf_counter()
        record = whole_round(session)
        if printed:  # what `probe` does with a round besides writing it (no --out here)
            tally.add(record)
            round_line(record)
        wall = time.perf_counter() - t0
        return wall * 1000, (clock["mlx"] - before) * 1000, tuple(record.committed_tokens)
    return step


def stepped(session):
    record = session.step_stage()
    for _ in STAGE_ORDER[1:]:
        record = session.step_stage()
    return record


def paths(block: int) -> dict[str, tuple[SessionOptions, Callable, bool]]:
    base = SessionOptions(gamma=block, max_tokens=10 ** 6, probes=False, ranks=False)
    both = replace(base, probes=True, ranks=True)
    chained = lambda s: s.step_round()  # noqa: E731
    return {BENCH: (base, chained, False), NO_PROBES: (replace(base, ranks=True), chained, True),
            PROBE: (both, chained, True), TUI: (both, stepped, False)}


def one_repeat(pair, prompt: str, block: int, rounds: int, warm_up: int) -> dict:
    clock = {"mlx": 0.0}
    configs = paths(block)
    with mlx_clock(clock):
        out = interleaved(pair, {n: c[0] for n, c in configs.items()}, rounds,
                          {n: stepper(clock, c[1], c[2]) for n, c in configs.items()},
                          prompt=prompt, warm_up=warm_up)
    rows_by_round = list(zip(*out.values()))
    parted = next((i for i, rows in enumerate(rows_by_round) if len({r[2] for r in rows}) > 1), None)
    if parted is not None:  # then the paths were not timing the same rounds
        raise SystemExit(f"bench_round_paths: the paths committed different tokens at counted "
                         f"round {parted}: " + ", ".join(f"{n} {rows[parted][2]}" for n, rows in out.items()))
    result = {}
    for name, rows in out.items():
        wall = statistics.median(r[0] for r in rows)
        mlx_ms = statistics.median(r[1] for r in rows)
        python = statistics.median(r[0] - r[1] for r in rows)
        result[name] = {"round_ms": wall, "mlx_ms": mlx_ms, "python_ms": python}
    return result


def report(result: dict) -> str:
    lines = [f"{result['model']}, block {result['block']}, {result['rounds']} rounds x "
             f"{result['repeats']} repeats (median of each repeat's median; min-max over repeats)",
             f"  {'path':18} {'round ms':>18} {'x bench':>16} {'in MLX ms':>10} {'python ms':>10} "
             f"{'python %':>8}"]
    for name, row in result["paths"].items():
        ratios = row["x_bench"]
        lines.append(
            f"  {name:18} {row['round_ms']:8.1f} ({row['round_ms_range'][0]:.0f}-"
            f"{row['round_ms_range'][1]:.0f}) {statistics.median(ratios):6.3f} ({min(ratios):.2f}-"
            f"{max(ratios):.2f}) {row['mlx_ms']:10.1f} {row['python_ms']:10.1f} "
            f"{100 * row['python_ms'] / row['round_ms']:7.1f}%")
    for name, text in result.get("profile", {}).items():
        lines += [f"--- {name}: the project's functions by own time", text]
    return "\n".join(lines)


def profile(pair, prompt: str, block: int, rounds: int, top: int) -> dict[str, str]:
    """Each path alone for `rounds` rounds under cProfile (after one unprofiled round)."""
    out = {}
    for name, (options, whole_round, printed) in paths(block).items():
        session = pair.open(prompt, options=options)
        step = stepper({"mlx": 0.0}, whole_round, printed)
        step(session)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(rounds):
            step(session)
        profiler.disable()
        session.close()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(
            r"(engine|dflash_tui|panels)/", top)
        out[name] = "\n".join(line for line in text.getvalue().splitlines()
                              if "/" in line or "ncalls" in line)
    return out


def main(argv: Optional[list[str]] = None) -> dict:
    parser = common.parser(__doc__, "float32")
    parser.set_defaults(block=15)
    parser.add_argument("model", nargs="?", help="target (default: the bundled sample)")
    parser.add_argument("--draft", type=Path)
    parser.add_argument("--prompt", default=None, help="default: the sample's prompt")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warm-up", type=int, default=2, help="rounds per path not counted")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-top", type=int, default=14)
    args = parser.parse_args(argv)
    model, draft = sample.resolve(args.model, args.draft)
    pair = load_pair(model, draft, dtype=args.dtype)
    prompt = args.prompt if args.prompt is not None else sample.DEFAULT_PROMPT
    repeats = [one_repeat(pair, prompt, args.block, args.rounds, args.warm_up)
               for _ in range(args.repeats)]
    rows = {}
    for name in repeats[0]:
        per = [r[name] for r in repeats]
        rows[name] = {key: statistics.median(p[key] for p in per) for key in per[0]}
        rows[name]["round_ms_range"] = [min(p["round_ms"] for p in per),
                                        max(p["round_ms"] for p in per)]
        rows[name]["x_bench"] = [p["round_ms"] / r[BENCH]["round_ms"] for p, r in zip(per, repeats)]
    result = {"model": str(model), "block": args.block, "rounds": args.rounds,
              "repeats": args.repeats, "paths": rows, "per_repeat": repeats}
    if args.profile:
        result["profile"] = profile(pair, prompt, args.block, args.rounds, args.profile_top)
    return common.finish(result, report, args.json)


if __name__ == "__main__":
    main()
