"""What a quantized drafter's round costs on the CPU, with MLX's quantized kernels and
dequantized at load (the loader's default there, engine/quantize.py, dequantize_for_cpu),
against the same drafter in float.

    python -m benchmarks.bench_quantized_drafter [MODEL] [--draft DIR] [--bits 8]
        [--rounds 20] [--repeats 3] [--block 7] [--json F]

(from the repository root; the `dflash-tui` console script preloads OpenBLAS, so run with
LD_PRELOAD set as benchmarks/bench_engine.py says.) One target (MODEL, default the sample's,
dequantized as always on the CPU) and three drafters made from DIR (default: MODEL/draft,
or with no MODEL the bundled sample's): in float (a quantized DIR's dequantized values),
quantized in memory to --bits and kept so, and the same quantized weights in float. Each
repeat decodes --rounds rounds of the sample prompt with each drafter in turn (the first
two rounds not counted), so drift hits all alike. Reports each drafter's
median round, its ratio to the float drafter's, and its mean accepted length (the two
quantized ones hold the same weights, so theirs should agree).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from benchmarks import common
from benchmarks.common import finish
from dflash_tui import sample
from dflash_tui.engine import SessionOptions
from dflash_tui.engine.api import Pair
from dflash_tui.engine.checkpoint import load_drafter
from dflash_tui.engine.quantize import dequantize_drafter, quantize_drafter
from dflash_tui.engine.target import DTYPES, load_target

WARM_UP = 2


def drafters(directory: Path, bits: int, dtype: str) -> dict:
    """The three drafters the benchmark compares, by name. A drafter stored quantized (the
    sample may ship so) is first read back as the float values it holds, as
    `--compare bits=N` does (engine/compare.py): that is the float one here."""

    def load(quantize: bool):
        drafter = load_drafter(directory, DTYPES[dtype])
        dequantize_drafter(drafter)
        if quantize:
            quantize_drafter(drafter, bits, where=str(directory))
        return drafter

    dequantized = load(quantize=True)
    dequantize_drafter(dequantized)
    return {"float": load(quantize=False), f"q{bits} kernels": load(quantize=True),
            f"q{bits} dequantized": dequantized}


def measure(model: Path, directory: Path, bits: int, rounds: int, repeats: int, gamma: int,
            dtype: str) -> dict:
    target = load_target(model, dtype)
    pairs = {name: Pair(target, drafter, directory)
             for name, drafter in drafters(directory, bits, dtype).items()}
    seconds = {name: [] for name in pairs}
    accepted = {name: [] for name in pairs}
    options = SessionOptions(gamma=gamma, probes=False, ranks=False, max_tokens=4096)
    for _ in range(repeats):
        for name, pair in pairs.items():
            session = pair.open(sample.DEFAULT_PROMPT, options=options)
            for i in range(rounds + WARM_UP):
                start = time.perf_counter()
                record = session.step_round()
                if i >= WARM_UP:
                    seconds[name].append(time.perf_counter() - start)
                    accepted[name].append(record.accepted)
            session.close()
    base = statistics.median(seconds["float"])
    rows = {}
    for name, times in seconds.items():
        median = statistics.median(times)
        rows[name] = {"median_round_ms": round(1000 * median, 1),
                      "ratio_to_float": round(median / base, 3),
                      "mean_accepted": round(sum(accepted[name]) / len(accepted[name]), 3)}
    return {"draft": str(directory), "bits": bits, "block": gamma, "rounds": rounds,
            "repeats": repeats, "drafters": rows}


def report(result: dict) -> str:
    lines = [f"{result['draft']}, block {result['block']}: median round over "
             f"{result['rounds']} rounds x {result['repeats']} repeats"]
    for name, row in result["drafters"].items():
        lines.append(f"  {name:16s} {row['median_round_ms']:7.1f} ms  "
                     f"{row['ratio_to_float']:.3f} of float  accepted {row['mean_accepted']:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = common.parser(__doc__, "float32")
    parser.add_argument("model", nargs="?", type=Path, help="target (default: the bundled sample)")
    parser.add_argument("--draft", type=Path)
    parser.add_argument("--bits", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    model = args.model or sample.sample_target()
    draft = args.draft or (args.model / "draft" if args.model else sample.sample_drafter())
    result = measure(model, draft, args.bits, args.rounds, args.repeats, args.block, args.dtype)
    return finish(result, report, args.json)


if __name__ == "__main__":
    main()
