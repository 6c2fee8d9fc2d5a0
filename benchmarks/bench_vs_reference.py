"""The engine against Z Lab's loop and the target alone: same weights, one process, greedy.

    LD_PRELOAD=$(python -c 'from dflash_tui.blas import openblas_path; print(openblas_path())') \
        python -m benchmarks.bench_vs_reference [MODEL] [--draft DIR] [--prompts 4] \
        [--tokens 80] [--repeats 2] [--block 7] [--dtype float32] [--json FILE]

(from the repository root; LD_PRELOAD only on a Linux CPU). MODEL defaults to the bundled
sample (SmolLM2-135M GGUF) and its shipped drafter. Four ways to decode the same prompt ids:

  target alone     mlx-lm's `generate_step`, greedy, on the engine's own model instance
                   (capture hooks removed): the reference text and speed
  Z Lab            `dflash==0.1.0` `stream_generate` (dflash/model_mlx.py), block + 1 rows,
                   on a second instance of the same target and Z Lab's own load of the
                   drafter's checkpoint (cast to --dtype, as the engine casts it)
  engine, speed    `Session.step_round` with probes and ranks off (the bench's setting)
  engine, TUI      probes and ranks on (what the TUI computes every round)

With `--compare-engine DIR`, another copy of the engine package (an older commit's, say:
`git archive COMMIT engine | tar -x -C /tmp/old`, then `--compare-engine /tmp/old/engine`)
runs beside this one, probes off and on (with whatever else that engine computes), on its
own instance of the same weights: a before/after measured in one process.

Methods are interleaved prompt by prompt (the order rotates), so a machine that slows down
mid-run slows all of them alike; each is warmed up once first. Every decode must equal
mlx-lm's greedy text: a mismatch is reported with its first differing token and the
target's logit margin (top1 - top2) there, which tells float noise (a near tie) from a bug.
Speed is decode only (prefill and the first token excluded on every side): tokens after
the first / seconds. CPU seconds of the process are reported beside it: on a machine other
processes load, they move less than the wall clock does.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

import mlx.core as mx

from benchmarks import common, zlab
from benchmarks.common import Clock, finish, mlx_lm_greedy
from dflash_tui import sample
from dflash_tui.bench.prompts import load_workloads
from dflash_tui.engine import SessionOptions, load_pair
from dflash_tui.engine.api import Pair
from dflash_tui.engine.baseline import compare, eos_ids
from dflash_tui.engine.session import Session
from dflash_tui.engine.target import encode_prompt, load_target

TARGET = "target alone (mlx-lm generate_step)"
ZLAB = "Z Lab dflash 0.1.0 stream_generate"
ENGINE_SPEED = "engine, probes + ranks off"
ENGINE_TUI = "engine, probes + ranks on"
COMPARED = "compared engine, probes off"
COMPARED_TUI = "compared engine, probes on"
WARM_UP_TOKENS = 12


@dataclass(frozen=True)
class Decode:
    method: str
    prompt: str
    tokens: tuple[int, ...]
    decode_s: float  # every token after the first, wall clock
    cpu_s: float  # the process's CPU seconds over the same span (all its threads)
    rounds: int = 0  # speculative methods: rounds run after the first token

    @property
    def decode_tokens(self) -> int:
        return max(len(self.tokens) - 1, 0)


def engine_loop(pair: Pair, options: SessionOptions, session_class=Session):
    def decode(ids: list[int], max_tokens: int):
        session = session_class(pair, ids, options=replace(options, max_tokens=max_tokens))
        session.prefill()
        clock = Clock()
        rounds = sum(1 for _ in session.run())
        elapsed = clock.read()
        session.close()
        return list(session.generated), elapsed, rounds

    return decode


def engine_copy(directory: Path):
    """Another copy of the engine package, imported under its own name beside this one.
    Returns its (api, session) modules."""
    import importlib
    import importlib.util
    import sys

    name = "engine_under_comparison"
    spec = importlib.util.spec_from_file_location(
        name, directory / "__init__.py", submodule_search_locations=[str(directory)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{name}.api"), importlib.import_module(f"{name}.session")


def pick_prompts(directory: Path, n: int) -> list[tuple[str, str]]:
    """n prompts, one workload after another (prose/01, code/01, math/01, prose/02, ...)."""
    workloads = load_workloads(directory)
    out = []
    for i in range(max(len(w.prompts) for w in workloads)):
        out += [(w.prompts[i].id, w.prompts[i].text) for w in workloads if i < len(w.prompts)]
    return out[:n]


def speed_options(block: int) -> dict[str, SessionOptions]:
    return {
        ENGINE_SPEED: SessionOptions(gamma=block, probes=False, ranks=False),
        ENGINE_TUI: SessionOptions(gamma=block, probes=True, ranks=True),
    }


def run(args) -> dict:
    model, draft = sample.resolve(args.model, args.draft)
    pair = load_pair(model, draft, dtype=args.dtype)
    target = pair.target
    stop = eos_ids(target)
    methods: dict[str, Callable] = {TARGET: mlx_lm_greedy(target.model, stop)}
    if not args.no_zlab:
        second = load_target(model, args.dtype)  # Z Lab patches its target's layers for good
        methods[ZLAB] = zlab.loop(second.model, zlab.drafter_from_dir(pair.draft_dir, args.dtype),
                                  second.tokenizer, args.block)
    for name, options in speed_options(args.block).items():
        methods[name] = engine_loop(pair, options)
    if args.compare_engine:
        api, session = engine_copy(Path(args.compare_engine).expanduser())
        other = api.load_pair(model, draft, dtype=args.dtype)
        for name, probes in ((COMPARED, False), (COMPARED_TUI, True)):
            options = session.SessionOptions(gamma=args.block, probes=probes)
            methods[name] = engine_loop(other, options, session.Session)

    prompts = [(pid, encode_prompt(target.tokenizer, text, None))
               for pid, text in pick_prompts(Path(args.prompt_dir), args.prompts)]
    for decode in methods.values():  # first calls pay one-off costs (kernels, allocations)
        decode(prompts[0][1], WARM_UP_TOKENS)

    names = list(methods)
    decodes: list[Decode] = []
    for repeat in range(args.repeats):
        for p, (pid, ids) in enumerate(prompts):
            shift = (repeat * len(prompts) + p) % len(names)
            for name in names[shift:] + names[:shift]:
                tokens, (seconds, cpu), rounds = methods[name](ids, args.tokens)
                decodes.append(Decode(name, pid, tuple(tokens), seconds, cpu, rounds))

    mismatches = []
    reference = {d.prompt: d.tokens for d in decodes if d.method == TARGET}
    ids_of = dict(prompts)
    for d in decodes:
        if d.tokens != reference[d.prompt]:
            div = compare(target, ids_of[d.prompt], reference[d.prompt], d.tokens)
            mismatches.append({"method": d.method, "prompt": d.prompt, "index": div.index,
                               "reference": div.reference, "candidate": div.candidate,
                               "margin": div.margin})
    return summarize(args, pair, names, decodes, mismatches)


def summarize(args, pair: Pair, names: list[str], decodes: list[Decode], mismatches) -> dict:
    rows = {}
    for name in names:
        runs = [d for d in decodes if d.method == name]
        tokens = sum(d.decode_tokens for d in runs)
        seconds = sum(d.decode_s for d in runs)
        rounds = sum(d.rounds for d in runs)
        rows[name] = {
            "decode_tokens": tokens, "decode_s": seconds, "tokens_per_s": tokens / seconds,
            "cpu_s": sum(d.cpu_s for d in runs),
            "rounds": rounds,
            "round_ms": 1000 * seconds / rounds if rounds else None,
            "tokens_per_round": tokens / rounds if rounds else None,
            # per prompt and repeat, against the target alone in the same repeat
            "median_speedup": statistics.median(
                (d.decode_tokens / d.decode_s) / _alone(decodes, i)
                for i, d in enumerate(decodes) if d.method == name),
        }
    return {
        "model": str(pair.target.spec.path), "drafter": str(pair.draft_dir),
        "backend": "gpu" if mx.default_device() == mx.gpu else "cpu", "mlx": mx.__version__,
        "dtype": args.dtype, "block": args.block, "prompts": args.prompts, "tokens": args.tokens,
        "repeats": args.repeats, "methods": rows, "identical": not mismatches,
        "mismatches": mismatches,
    }


def _alone(decodes: list[Decode], index: int) -> float:
    """tokens/s of the target-alone run of the same prompt nearest in time to decodes[index]."""
    prompt = decodes[index].prompt
    same = [i for i, x in enumerate(decodes) if x.method == TARGET and x.prompt == prompt]
    nearest = decodes[min(same, key=lambda i: abs(i - index))]
    return nearest.decode_tokens / nearest.decode_s


def report(result: dict) -> str:
    methods = result["methods"]
    alone = methods[TARGET]["tokens_per_s"]
    zlab = methods.get(ZLAB, {}).get("tokens_per_s")
    lines = [f"{result['model']} + {result['drafter']} on {result['backend']} (MLX {result['mlx']}), "
             f"{result['dtype']}, block {result['block']}, {result['prompts']} prompts x "
             f"{result['tokens']} tokens x {result['repeats']} repeats",
             f"{'method':38} {'tok/s':>8} {'x alone':>8} {'x Z Lab':>8} {'ms/round':>9} "
             f"{'tok/round':>9} {'CPU s':>7}"]
    for name, row in methods.items():
        vs_zlab = f"{row['tokens_per_s'] / zlab:.2f}" if zlab else "-"
        round_ms = f"{row['round_ms']:.1f}" if row["round_ms"] else "-"
        per_round = f"{row['tokens_per_round']:.2f}" if row["tokens_per_round"] else "-"
        lines.append(f"{name:38} {row['tokens_per_s']:8.2f} {row['tokens_per_s'] / alone:8.2f} "
                     f"{vs_zlab:>8} {round_ms:>9} {per_round:>9} {row['cpu_s']:7.1f}")
    on, off = methods.get(ENGINE_TUI), methods.get(ENGINE_SPEED)
    if on and off and on["rounds"] and off["rounds"]:
        lines.append(f"probes + ranks on / off, round time: {on['round_ms'] / off['round_ms']:.3f}")
    if result["identical"]:
        lines.append("every decode equals mlx-lm's greedy decode")
    for m in result["mismatches"]:
        lines.append(f"MISMATCH {m['method']} on {m['prompt']}: first difference at token "
                     f"{m['index']} (mlx-lm {m['reference']}, this {m['candidate']}); the target's "
                     f"logit margin there {m['margin']:.4g}")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> dict:
    parser = common.parser(__doc__, "float32")
    parser.add_argument("model", nargs="?", help="target (default: the bundled sample)")
    parser.add_argument("--draft")
    parser.add_argument("--prompt-dir", default=str(sample.PROMPTS_DIR))
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=80)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-zlab", action="store_true", help="skip Z Lab's loop")
    parser.add_argument("--compare-engine", help="another copy of the engine/ package to run beside")
    args = parser.parse_args(argv)
    return finish(run(args), report, args.json)


if __name__ == "__main__":
    main()
