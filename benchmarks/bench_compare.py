"""What `--compare` costs a round (not a test): round time with and without a reference.

    LD_PRELOAD=$(python -c 'from dflash_tui.blas import openblas_path; print(openblas_path())') \\
        python -m benchmarks.bench_compare [--fixture] [--rounds 12] [--block 7] [SPEC ...]
                                                            (from the repository root)

On the sample target and drafter (or, with --fixture, the tiny llama fixture of the tests),
three sessions decode the same prompt with the rounds interleaved one by one (each with its
own copy of the target's cache), so a machine that slows down slows all three alike:

  plain     step_round without a reference (the bench's and the CLI's way)
  compare   step_round with the reference SPEC
  stepped   without a reference, stage by stage: each stage's own time, for the bound

The claim to hold: a compared round costs at most one more draft pass (context + draft +
select) and one more verify, i.e. ratio <= bound = 1 + (draft side + verify) / plain round.
Each round is timed on the wall clock and in process CPU time (all threads): on a machine
shared with other jobs the CPU time is the steadier of the two.
Default SPECs: the drafter itself (the reference never needs a second verify), bits=4 and
dtype=float16.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from dflash_tui import sample
from dflash_tui.engine import SessionOptions, load_pair
from dflash_tui.engine.api import Pair

PROMPT = "Write a Python function that checks whether a number is prime, with a short docstring."
WARM_UP = 2


def _pair(fixture: bool, spec: str):
    if fixture:
        from tests.fixtures import write_pair

        target, draft = write_pair(Path(tempfile.mkdtemp()) / "fixture")
    else:
        target, draft = sample.sample_target(), sample.sample_drafter()
    spec = str(draft) if spec == "self" else spec
    return load_pair(target, draft, compare=spec), spec


def measure(fixture: bool, spec: str, rounds: int, gamma: int) -> dict:
    compared, spec = _pair(fixture, spec)
    plain = Pair(compared.target, compared.drafter, compared.draft_dir)
    options = SessionOptions(gamma=gamma, max_tokens=10**6, probes=False, ranks=False)
    target = compared.target
    sessions, caches = {}, {}
    # the compare session last: its prefill hooks the reference's layers too
    for name, pair in (("plain", plain), ("stepped", plain), ("compare", compared)):
        sessions[name] = pair.open(PROMPT, options=options)
        caches[name] = target.cache
    times = {name: [] for name in sessions}
    cpu = {name: [] for name in sessions}
    stages: dict[str, list[float]] = {}
    reverified = 0
    for i in range(rounds + WARM_UP):
        order = list(sessions) if i % 2 == 0 else list(reversed(sessions))
        for name in order:
            target.cache = caches[name]
            t0, c0 = time.perf_counter(), time.process_time()
            if name == "stepped":
                record = sessions[name].step_stage()
                while not record.complete:
                    record = sessions[name].step_stage()
            else:
                record = sessions[name].step_round()
            elapsed = (time.perf_counter() - t0) * 1000
            cpu_ms = (time.process_time() - c0) * 1000
            caches[name] = target.cache
            if i < WARM_UP:
                continue
            times[name].append(elapsed)
            cpu[name].append(cpu_ms)
            if name == "stepped":
                for stage, ms in record.timings_ms.items():
                    stages.setdefault(stage, []).append(ms)
            if name == "compare":
                reverified += record.compare.reverified
    for session in sessions.values():
        session.close()
    median = {name: statistics.median(t) for name, t in times.items()}
    cpu_median = {name: statistics.median(t) for name, t in cpu.items()}
    stage = {s: statistics.median(t) for s, t in stages.items()}
    draft_side = stage["context"] + stage["draft"] + stage["select"]
    return {
        "spec": spec, "rounds": rounds, "gamma": gamma,
        "backend":
        sessions["plain"].info.backend,
        "plain_ms": median["plain"], "compare_ms": median["compare"],
        "ratio": median["compare"] / median["plain"],
        "cpu_plain_ms": cpu_median["plain"], "cpu_compare_ms": cpu_median["compare"],
        "cpu_ratio": cpu_median["compare"] / cpu_median["plain"],
        "draft_side_ms": draft_side, "verify_ms": stage["verify"],
        "bound": 1 + (draft_side + stage["verify"]) / median["plain"],
        "reverified": reverified,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("specs", nargs="*", metavar="SPEC",
                        help="compare SPECs ('self': the drafter's own directory)")
    parser.add_argument("--fixture", action="store_true", help="the tiny test fixture pair")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--block", type=int, default=7)
    args = parser.parse_args()
    for spec in args.specs or ["self", "bits=4", "dtype=float16"]:
        r = measure(args.fixture, spec, args.rounds, args.block)
        print("{where}, --compare {spec} ({backend}, block {gamma}, median of {rounds} rounds): "
              "{plain_ms:.1f} ms/round without, {compare_ms:.1f} with, ratio {ratio:.2f} (CPU time "
              "{cpu_plain_ms:.1f} / {cpu_compare_ms:.1f} ms, ratio {cpu_ratio:.2f}); bound "
              "{bound:.2f} (draft side {draft_side_ms:.1f} ms + verify {verify_ms:.1f} ms); "
              "second verify in {reverified} of {rounds} rounds".format(
                  where="fixture" if args.fixture else "sample", **r))


if __name__ == "__main__":
    main()
