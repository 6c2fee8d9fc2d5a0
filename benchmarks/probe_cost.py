"""Where the probes' cost lands in a chained round: the host's pieces timed inside rounds.

    python -m benchmarks.probe_cost            # the full shape: a GPU (H200: ~1 min)
    python -m benchmarks.probe_cost --tiny     # CPU-sized, to check the script runs
        [--rounds 24] [--repeats 2] [--json FILE]

The real-scale pair of benchmarks/synthetic.py (random drafter: rounds of one accepted
token), chained rounds (`step_round`), ranks off. Per round, medians of:

  round        the round's wall time
  host         the round less the time in its one wait
  async_eval   time inside mx.async_eval: MLX encoding the queued kernels on the host
  eval         time inside mx.eval (encoding what is left, then waiting)
  pending      ProbeSink.pending: building the probes' reductions
  rows         ProbeSink.rows: reading them back and building the probe rows

for probes off, probes on, and two probes-on variants that replace the reductions
(`probes._moments`): sums only (no min and max), and none at all (a zero table: the cost
of everything around the reductions). Settings alternate within each repeat. The
variants give wrong probe rows: they exist only to split the cost.
"""

from __future__ import annotations

import statistics
import time
from contextlib import contextmanager
from typing import Optional

import mlx.core as mx

from benchmarks import common
from benchmarks.synthetic import REAL, TINY, synthetic_pair
from dflash_tui.engine import probes
from dflash_tui.engine.session import Session, SessionOptions

PIECES = ("async_eval", "eval", "pending", "rows")


def _sums_only(rows: mx.array) -> mx.array:
    x = rows.astype(mx.float32)
    zeros = mx.zeros(rows.shape[:1])
    return mx.stack([x.sum(axis=1), mx.square(x).sum(axis=1), zeros, zeros], axis=1)


VARIANTS = {
    "probes off": (False, probes._moments),
    "probes on": (True, probes._moments),
    "probes on, sums only": (True, _sums_only),
    "probes on, no reductions": (True, lambda rows: mx.zeros((rows.shape[0], 4))),
}


@contextmanager
def timers(clock: dict):
    """Wrap each piece in a timer that adds to clock[piece]; restore them afterwards."""
    owners = {"async_eval": mx, "eval": mx, "pending": probes.ProbeSink, "rows": probes.ProbeSink}
    originals = {name: getattr(owner, name) for name, owner in owners.items()}

    def timed(name, f):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                clock[name] += time.perf_counter() - t0
        return wrapper

    for name, owner in owners.items():
        setattr(owner, name, timed(name, originals[name]))
    try:
        yield
    finally:
        for name, owner in owners.items():
            setattr(owner, name, originals[name])


def run(args) -> dict:
    pair = synthetic_pair(TINY if args.tiny else REAL, args.dtype)
    clock = dict.fromkeys(PIECES, 0.0)
    out: dict[str, list] = {name: [] for name in VARIANTS}
    original = probes._moments
    try:
        with timers(clock):
            for _ in range(args.repeats):
                for name, (probed, moments) in VARIANTS.items():
                    probes._moments = moments
                    out[name].append(_rounds(pair, probed, clock, args))
    finally:
        probes._moments = original
    return {"shape": (TINY if args.tiny else REAL).describe(), "dtype": args.dtype,
            "block": args.block, "rounds": args.rounds,
            "backend": "gpu" if mx.default_device() == mx.gpu else "cpu", "mlx": mx.__version__,
            "ms": out}


def _rounds(pair, probed: bool, clock: dict, args) -> dict:
    session = Session(pair, list(range(1, 129)), options=SessionOptions(
        gamma=args.block, max_tokens=10 ** 6, probes=probed, ranks=False))
    session.prefill()
    for _ in range(3):  # warm-up: first shapes compile their kernels
        session.step_round()
    rows = []
    for _ in range(args.rounds):
        for piece in clock:
            clock[piece] = 0.0
        waited, t0 = session.waits.seconds, time.perf_counter()
        session.step_round()
        wall = time.perf_counter() - t0
        rows.append({"round": wall, "host": wall - (session.waits.seconds - waited), **clock})
    session.close()
    return {k: 1000 * statistics.median(r[k] for r in rows) for k in rows[0]}


def report(result: dict) -> str:
    lines = [result["shape"], f"{result['backend']} (MLX {result['mlx']}), {result['dtype']}, "
             f"block {result['block']}; medians of {result['rounds']} chained rounds, ms",
             f"{'setting':26} {'round':>7} {'host':>7} " + " ".join(f"{p:>10}" for p in PIECES)]
    for name, repeats in result["ms"].items():
        for row in repeats:
            lines.append(f"{name:26} {row['round']:7.2f} {row['host']:7.2f} "
                         + " ".join(f"{row[p]:10.2f}" for p in PIECES))
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> dict:
    parser = common.parser(__doc__, "bfloat16")
    parser.add_argument("--tiny", action="store_true", help="CPU-sized shapes")
    parser.add_argument("--rounds", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    return common.finish(run(args), report, args.json)


if __name__ == "__main__":
    main()
