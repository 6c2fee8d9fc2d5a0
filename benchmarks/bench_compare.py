"""What `--compare` costs a round (not a test): round time with and without a reference.

    LD_PRELOAD=$(python -c 'from dflash_tui.blas import openblas_path; print(openblas_path())') \\
        python -m benchmarks.bench_compare [--fixture] [--rounds 12] [--block 7] [SPEC ...]
                                                            (from the repository root)

On the sample target and drafter (or, with --fixture, the tiny llama fixture of the tests),
three sessions decode the same prompt with the rounds interleaved one by one (each with its
own copy of the target's cache), so a machine that slows down slows all three alike:

  plain       step_round without a reference (the bench's and the CLI's way)
  compare     step_round with the reference SPEC
  stepped     without a reference, stage by stage: each stage's own time (its verify)
  reference   the reference's drafter alone, stage by stage: its own draft pass (context +
              draft + select), which for a quantized or float16 reference on a CPU costs
              more than the float drafter's

The claim to hold: a compared round costs at most one more draft pass (the reference's) and
one more verify, i.e. ratio <= bound = 1 + (reference's draft side + verify) / plain round.
Wall clock only: process CPU time means nothing here (OpenBLAS's threads spin while they
wait).
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
    alone = Pair(compared.target, compared.reference.drafter, compared.reference.draft_dir)
    options = SessionOptions(gamma=gamma, max_tokens=10**6, probes=False, ranks=False)
    target = compared.target
    sessions, caches = {}, {}
    # the compare session last: its prefill hooks the reference's layers too
    for name, pair in (("plain", plain), ("stepped", plain), ("reference", alone),
                       ("compare", compared)):
        sessions[name] = pair.open(PROMPT, options=options)
        caches[name] = target.cache
    times = {name: [] for name in sessions}
    stages: dict[tuple[str, str], list[float]] = {}
    reverified = 0
    for i in range(rounds + WARM_UP):
        order = list(sessions) if i % 2 == 0 else list(reversed(sessions))
        for name in order:
            target.cache = caches[name]
            t0 = time.perf_counter()
            if name in ("stepped", "reference"):
                record = sessions[name].step_stage()
                while not record.complete:
                    record = sessions[name].step_stage()
            else:
                record = sessions[name].step_round()
            elapsed = (time.perf_counter() - t0) * 1000
            caches[name] = target.cache
            if i < WARM_UP:
                continue
            times[name].append(elapsed)
            if name in ("stepped", "reference"):
                for stage, ms in record.timings_ms.items():
                    stages.setdefault((name, stage), []).append(ms)
            if name == "compare":
                reverified += record.compare.reverified
    for session in sessions.values():
        session.close()
    median = {name: statistics.median(t) for name, t in times.items()}
    stage = {s: statistics.median(t) for s, t in stages.items()}
    draft_side = sum(stage[("reference", s)] for s in ("context", "draft", "select"))
    verify = stage[("stepped", "verify")]
    return {
        "spec": spec, "rounds": rounds, "gamma": gamma,
        "backend":
        sessions["plain"].info.backend,
        "plain_ms": median["plain"], "compare_ms": median["compare"],
        "ratio": median["compare"] / median["plain"],
        "draft_side_ms": draft_side, "verify_ms": verify,
        "bound": 1 + (draft_side + verify) / median["plain"],
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
              "{plain_ms:.1f} ms/round without, {compare_ms:.1f} with, ratio {ratio:.2f}; bound "
              "{bound:.2f} (the reference's draft side {draft_side_ms:.1f} ms + verify {verify_ms:.1f} "
              "ms); "
              "second verify in {reverified} of {rounds} rounds".format(
                  where="fixture" if args.fixture else "sample", **r))


if __name__ == "__main__":
    main()
