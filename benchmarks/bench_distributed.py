"""Distributed benchmark (not a test): the same probe in one process and on N ranks.

    python -m benchmarks.bench_distributed [MODEL] [--draft DIR] [--ranks 2] [--backend ring]
        [--max-tokens 48] [--block G] [--prompt TEXT] [--dtype float32]   (from the repository root)

Runs `dflash-tui probe` in one process, then under `mlx.launch -n N --backend B -- dflash-tui
probe ... --distributed`, with the same prompt and settings, and reports:
  - whether the two committed the same tokens with the same accepted length every round;
  - decode tokens/s of each, and the ratio (the N-rank run over the one process);
  - per round, the mean time, its verify stage (one target forward: on N ranks, 1/N of the
    work plus the all_sums) and the part spent communicating (docs/DISTRIBUTED.md): the
    lockstep check (measured) and the target's all_sums (counted, at the cost of one all_sum
    calibrated when the target loaded: an estimate).
Without MODEL: the bundled sample (SmolLM2-135M; its 9 heads split over 1, 3 or 9 ranks).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# Through this interpreter, so it runs wherever the packages are importable (the GPU machine
# installs them without console scripts on PATH).
DFLASH_TUI = [sys.executable, "-m", "dflash_tui"]
MLX_LAUNCH = [sys.executable, "-c", "from mlx._distributed_utils.launch import main; main()"]


def probe(command_prefix: list[str], args, out: Path, extra: list[str]) -> dict:
    argv = [*command_prefix, *DFLASH_TUI, "probe"]
    if args.model:
        argv.append(args.model)
    if args.draft:
        argv += ["--draft", args.draft]
    argv += ["--prompt", args.prompt, "--max-tokens", str(args.max_tokens), "--dtype", args.dtype,
             "--out", str(out), "--no-probes", *extra]
    if args.block:
        argv += ["--block", str(args.block)]
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    summary = out / "summary.json"
    if not summary.exists():
        sys.exit(f"bench_distributed: {' '.join(argv)} wrote no summary:\n{done.stderr[-3000:]}")
    rounds = [json.loads(p.read_text()) for p in sorted(out.glob("round-*.json"))]
    return {**json.loads(summary.read_text()), "round_files": rounds}


def describe(name: str, run: dict) -> str:
    rounds = run["round_files"]
    round_ms = [sum(r["timings_ms"].values()) + (r["comm"]["lockstep_ms"] if r.get("comm") else 0)
                for r in rounds]
    line = (f"{name:>10}: {len(run['tokens'])} tokens in {run['rounds']} rounds, {run['seconds']:.2f} s "
            f"({len(run['tokens']) / run['seconds']:.2f} tok/s); round {statistics.mean(round_ms):.1f} ms")
    verify = statistics.mean(r["timings_ms"]["verify"] for r in rounds)
    line += f" (verify stage {verify:.1f} ms)"
    comms = [r["comm"] for r in rounds if r.get("comm")]
    if comms:
        lockstep = statistics.mean(c["lockstep_ms"] for c in comms)
        target = statistics.mean(c["target_est_ms"] for c in comms)
        share = (lockstep + target) / statistics.mean(round_ms)
        line += (f", of which lockstep check {lockstep:.1f} ms (measured) + target all_sums "
                 f"{target:.1f} ms (estimated, {comms[0]['target_collectives']} per round) "
                 f"= {share:.0%}")
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--draft")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--backend", default="ring", choices=("ring", "nccl", "mpi"))
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--block", type=int)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--prompt", default="Write a Python function that checks whether a "
                                            "number is prime, with a short docstring.")
    args = parser.parse_args()
    launcher = [*MLX_LAUNCH, "-n", str(args.ranks), "--backend", args.backend, "--"]
    with tempfile.TemporaryDirectory() as tmp:
        one = probe([], args, Path(tmp) / "one", [])
        group = probe(launcher, args, Path(tmp) / "group", ["--distributed"])
    info = group["session"]["distributed"]
    print(f"target {group['session']['target_path']} on {group['session']['backend']}, "
          f"{info['world_size']} ranks ({info['backend']}, {info['sharding']}: {info['per_rank']}); "
          f"one all_sum {info['all_sum_us']:.0f} us (+{info['all_sum_us_per_row']:.1f} us per row)")
    print(describe("1 process", one))
    print(describe(f"{args.ranks} ranks", group))
    same = (one["tokens"] == group["tokens"]
            and one["accepted_per_round"] == group["accepted_per_round"])
    speed = (len(group["tokens"]) / group["seconds"]) / (len(one["tokens"]) / one["seconds"])
    print(f"same tokens and accepted per round: {same}; {args.ranks} ranks / 1 process: "
          f"{speed:.2f}x tokens/s")


if __name__ == "__main__":
    main()
