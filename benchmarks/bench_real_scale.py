"""Real scale: an 8B-class target with a DFlash2 drafter of the published shape, random
weights made on the device (nothing downloaded), every proposal accepted.

    python -m benchmarks.bench_real_scale            # the full shape: a GPU (H200: ~3 min)
    python -m benchmarks.bench_real_scale --tiny     # the same structure at CPU size (~1 min)
        [--block 7] [--tokens 128] [--prompt-tokens 128] [--repeats 3] [--split-rounds 12]
        [--dtype bfloat16] [--attention padded,kernel] [--projections plain|fused] [--zlab]
        [--json FILE]

benchmarks/synthetic.py builds the pair (REAL: hidden 4096, 36 layers, 32/8 heads,
intermediate 12288, vocabulary 151,936; DFlash2 drafter with 5 layers, block 16, top-16,
selector rank 256). Measured in one process, methods interleaved:

  target alone    mlx-lm's generate_step, greedy (one forward per token, pipelined)
  engine, speed   Session.step_round, probes and ranks off (the bench's setting)
  engine, TUI     probes and ranks on (what the TUI computes every round)

--settings off,probes,ranks,both times probes and ranks apart as well (default off,both).

--zlab also times Z Lab's loop (`dflash==0.1.0` stream_generate, benchmarks/zlab.py) on the
same arrays, interleaved with the rest: the reference the engine's speed is held to, at the
scale its users run. Its proposals are forced too (after its drafter's forward and selector
walk, which still run), to a text its own verify accepts whole.

With --attention A,B,... each engine method runs once per attention route
(SessionOptions.attention: mlx, padded, kernel), interleaved with the rest, and the split is
measured per route. Each route forces its own greedy text: two routes round bfloat16
near-ties apart as a block verify and a one-token forward do.

--projections fused fuses the target's q/k/v and gate/up projections into one matmul each
for the engine's forwards of more than one row (engine/fused_projections.py), as
load_target does on a GPU (the default there; plain on the CPU). The target alone decodes
one row at a time, through the plain projections either way.

Proposals are forced to the engine's own greedy text at this block (SessionOptions.proposer).
Not mlx-lm's: in bfloat16 a block verify and a one-token forward break near-ties
differently, so mlx-lm's text stops matching after a few dozen tokens. The engine's text
is found by decoding at gamma 1, then forcing that at the block and decoding again until a
decode accepts every proposal (the acceptance reached is reported: it should be every
proposal of every round).

Then the split: rounds stepped stage by stage (`step_stage`, each stage waited for), so
each stage's time is its whole cost; host time = the round minus the time spent waiting
for the device. And the chained rounds' host time (outside the one wait: an upper bound on
how long the device idles in a round).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
from dataclasses import replace
from typing import Callable, Optional

import mlx.core as mx
import numpy as np

from benchmarks import common, zlab
from benchmarks.common import Clock, finish, mlx_lm_greedy
from benchmarks.synthetic import REAL, TINY, synthetic_pair, with_shape
from dflash_tui.bench.runner import oracle_proposer
from dflash_tui.engine.api import Pair
from dflash_tui.engine.baseline import BaselineRun
from dflash_tui.engine.records import STAGE_ORDER
from dflash_tui.engine.session import ATTENTION_KINDS, Session, SessionOptions

TARGET = "target alone (mlx-lm generate_step)"
SPEED = "engine, probes + ranks off"
TUI = "engine, probes + ranks on"
ZLAB = "Z Lab dflash 0.1.0 loop"
# --settings: what each engine method computes besides the round, (probes, ranks)
SETTINGS = {"off": (SPEED, False, False), "probes": ("engine, probes on", True, False),
            "ranks": ("engine, ranks on", False, True), "both": (TUI, True, True)}


def forced(prompt: list[int], tokens: list[int]):
    return oracle_proposer(len(prompt), BaselineRun(tuple(tokens), 0.0, 0.0, "length"), set())


def decode(pair: Pair, prompt: list[int], options: SessionOptions):
    session = Session(pair, prompt, options=options)
    session.prefill()
    clock, waits = Clock(), session.waits.seconds
    records = list(session.run())
    wall, _ = clock.read()
    session.close()
    return session, records, wall, session.waits.seconds - waits


def own_greedy(pair: Pair, prompt: list[int], tokens: int, block: int,
               attention: Optional[str] = None, attempts: int = 4):
    """The engine's greedy text at this block through this attention route (routes round
    near-ties apart too), and how many decodes it took to find."""
    quick = SessionOptions(gamma=1, max_tokens=tokens, probes=False, ranks=False, attention=attention)
    text = decode(pair, prompt, quick)[0].generated
    for attempt in range(1, attempts + 1):
        options = replace(quick, gamma=block, proposer=forced(prompt, text))
        session, records, _, _ = decode(pair, prompt, options)
        if all(r.accepted == r.gamma for r in records):
            return text, attempt
        text = session.generated
    return text, attempts


def zlab_reference(pair: Pair, decodes: list, args, attempts: int = 4):
    """Z Lab's loop on a second model object over the target's arrays and its own drafter
    model over the drafter's, and for each pass the text that its verify accepts whole when
    forced: the engine's text forced and decoded again until no proposal is rejected (its
    verify is mlx-lm's plain forward, which may break bfloat16 near-ties apart from the
    engine's)."""
    decode = zlab.loop(zlab.target_twin(pair.target.model), zlab.drafter_twin(pair.drafter),
                       zlab.bare_ids_tokenizer(), args.block)
    passes = []
    for prompt, text in decodes:
        for _ in range(attempts):
            tokens = decode(prompt, args.tokens, forced=text)[0]
            taken, proposed = zlab.accepted(decode.committed, args.block)
            text = tokens
            if taken == proposed:
                break
        passes.append((prompt, text))
    return decode, passes


def routed(name: str, attention: Optional[str]) -> str:
    return name if attention is None else f"{name} [{attention}]"


def timed(pair: Pair, decodes: dict, args, reference=None) -> dict:
    """decodes: per attention route, (prompt, forced text) for the warm-up pass and each
    repeat: one pair for all, or, with --fresh-shapes, one per pass (prompts of other
    lengths: every round meets context lengths no earlier pass met, as a real decode's
    rounds do). The routes share the prompts; each forces its own greedy text.
    reference: (Z Lab's decode, its (prompt, forced text) per pass), with --zlab."""
    alone = mlx_lm_greedy(pair.target.model, set())
    runs: dict[str, list] = {TARGET: []}
    if reference is not None:
        runs[ZLAB] = []
    for attention in args.attention:
        for setting in args.settings:
            runs[routed(SETTINGS[setting][0], attention)] = []
    names = list(runs)
    for repeat in range(args.repeats + 1):  # the first pass warms up (kernels, buffers)
        engines = {}
        for attention in args.attention:
            prompt, text = decodes[attention][repeat % len(decodes[attention])]
            base = SessionOptions(gamma=args.block, max_tokens=args.tokens, attention=attention,
                                  proposer=forced(prompt, text))
            for setting in args.settings:
                name, probes, ranks = SETTINGS[setting]
                engines[routed(name, attention)] = (prompt, replace(base, probes=probes, ranks=ranks))
        turn = repeat % len(names)
        for name in names[turn:] + names[:turn]:
            if name == TARGET:
                tokens, (wall, _), _ = alone(prompt, args.tokens)
                row = {"tokens": len(tokens) - 1, "wall": wall, "rounds": 0, "wait": 0.0,
                       "accepted": 0, "proposed": 0}
            elif name == ZLAB:
                zlab_decode, passes = reference
                zlab_prompt, zlab_text = passes[repeat % len(passes)]
                tokens, (wall, _), rounds = zlab_decode(zlab_prompt, args.tokens, forced=zlab_text)
                taken, proposed = zlab.accepted(zlab_decode.committed, args.block)
                row = {"tokens": len(tokens) - 1, "wall": wall, "rounds": rounds, "wait": None,
                       "accepted": taken, "proposed": proposed}
            else:
                session, records, wall, wait = decode(pair, *engines[name])
                row = {"tokens": len(session.generated) - 1, "wall": wall, "rounds": len(records),
                       "wait": wait, "accepted": sum(r.accepted for r in records),
                       "proposed": sum(r.gamma for r in records)}
            if repeat:
                runs[name].append(row)
    out = {}
    for name, rows in runs.items():
        tokens, wall = sum(r["tokens"] for r in rows), sum(r["wall"] for r in rows)
        rounds = sum(r["rounds"] for r in rows)
        out[name] = {
            "tokens_per_s": tokens / wall, "decode_tokens": tokens, "decode_s": wall,
            "round_ms": 1000 * wall / rounds if rounds else None,
            "host_ms_per_round": (1000 * (wall - sum(r["wait"] for r in rows)) / rounds
                                  if rounds and name != ZLAB else None),
            "accepted_share": sum(r["accepted"] for r in rows) / max(sum(r["proposed"] for r in rows), 1),
        }
    return out


def split(pair: Pair, prompt: list[int], text: list[int], args, attention: Optional[str]) -> dict:
    """Stage by stage, each waited for: every stage's cost, and the host's share."""
    options = SessionOptions(gamma=args.block, max_tokens=10 ** 9, probes=False, ranks=False,
                             proposer=forced(prompt, text + [0] * 10 ** 4), attention=attention)
    session = Session(pair, prompt, options=options)
    session.prefill()
    stage_ms = {s: [] for s in STAGE_ORDER}
    wait_ms = {s: [] for s in STAGE_ORDER}
    for index in range(args.split_rounds + 2):
        for stage in STAGE_ORDER:
            waited = session.waits.seconds
            record = session.step_stage()
            if index >= 2:  # warm-up rounds
                stage_ms[stage].append(record.stages[-1].ms)
                wait_ms[stage].append(1000 * (session.waits.seconds - waited))
    session.close()
    stages = {s: statistics.median(v) for s, v in stage_ms.items()}
    waits = {s: statistics.median(v) for s, v in wait_ms.items()}
    round_ms = sum(stages.values())
    return {"stage_ms": stages, "device_wait_ms": waits, "round_ms": round_ms,
            "host_ms": round_ms - sum(waits.values())}


def one_token_ms(pair: Pair, prompt: list[int], repeats: int = 20) -> float:
    """A one-token target forward, for scale (what verify is compared against)."""
    target = pair.target
    target.unhook()
    target.reset()
    mx.eval(target.forward(mx.array([prompt]))[0])
    times = []
    for i in range(repeats + 2):
        clock = Clock()
        mx.eval(target.forward(mx.array([[prompt[i % len(prompt)]]]))[0])
        times.append(clock.read()[0])
    return 1000 * statistics.median(times[2:])


def run(args) -> dict:
    shape = with_shape(TINY if args.tiny else REAL, hidden=args.hidden, layers=args.layers,
                       vocab=args.vocab)
    clock = Clock()
    pair = synthetic_pair(shape, args.dtype)
    on_gpu = mx.default_device() == mx.gpu
    projections = args.projections or ("fused" if on_gpu else "plain")
    if projections == "fused":
        pair.target.fuse_projections()
    made_s = clock.read()[0]
    rng = np.random.default_rng(0)
    longest = rng.integers(0, shape.vocab - 1, args.prompt_tokens + args.repeats).tolist()
    decodes, attempts = {a: [] for a in args.attention}, 0
    for extra in range(args.repeats + 1 if args.fresh_shapes else 1):
        prompt = longest[: args.prompt_tokens + extra]
        for attention in args.attention:
            text, tries = own_greedy(pair, prompt, args.tokens, args.block, attention)
            decodes[attention].append((prompt, text))
            attempts = max(attempts, tries)
    prompt = decodes[args.attention[0]][0][0]
    reference = zlab_reference(pair, decodes[args.attention[0]], args) if args.zlab else None
    speeds = timed(pair, decodes, args, reference)
    alone = speeds[TARGET]["tokens_per_s"]
    for row in speeds.values():
        row["speedup"] = row["tokens_per_s"] / alone
    return {
        "shape": shape.describe(), "dtype": args.dtype, "block": args.block,
        "tokens": args.tokens, "prompt_tokens": args.prompt_tokens, "repeats": args.repeats,
        "fresh_shapes": args.fresh_shapes, "projections": projections,
        "backend": "gpu" if on_gpu else "cpu", "mlx": mx.__version__,
        "weights_made_s": made_s, "forcing_decodes": attempts + 1,
        "methods": speeds, "one_token_ms": one_token_ms(pair, prompt),
        "split": {a or "default": split(pair, *decodes[a][0], args, a) for a in args.attention},
    }


def report(result: dict) -> str:
    lines = [result["shape"],
             f"{result['backend']} (MLX {result['mlx']}), {result['dtype']}, block "
             f"{result['block']}, {result['tokens']} tokens after a {result['prompt_tokens']}-token "
             f"prompt, {result['repeats']} repeats"
             f"{' (fresh shapes: each pass one prompt token longer)' if result.get('fresh_shapes') else ''}"
             f"; {result.get('projections', 'plain')} projections; weights made in {result['weights_made_s']:.1f} s",
             f"{'method':32} {'tok/s':>8} {'speed-up':>9} {'ms/round':>9} {'host ms':>8} {'accepted':>9}"]
    for name, row in result["methods"].items():
        round_ms = "-" if row["round_ms"] is None else f"{row['round_ms']:.2f}"
        host = "-" if row["host_ms_per_round"] is None else f"{row['host_ms_per_round']:.2f}"
        accepted = "-" if name == TARGET else f"{100 * row['accepted_share']:.0f}%"
        lines.append(f"{name:32} {row['tokens_per_s']:8.1f} {row['speedup']:8.2f}x "
                     f"{round_ms:>9} {host:>8} {accepted:>9}")
    lines.append(f"one-token target forward {result['one_token_ms']:.2f} ms")
    for attention, s in result["split"].items():
        stages = ", ".join(f"{k} {v:.2f}" for k, v in s["stage_ms"].items())
        verify = s["stage_ms"]["verify"]
        lines.append(f"stage by stage{'' if attention == 'default' else f' [{attention}]'} (ms, each "
                     f"stage waited for): {stages}; round {s['round_ms']:.2f}, host "
                     f"{s['host_ms']:.2f} ({100 * s['host_ms'] / s['round_ms']:.1f}%); verify of "
                     f"{result['block'] + 1} rows = {verify / result['one_token_ms']:.2f} one-token forwards")
    return "\n".join(lines)


def choices(what: str, allowed) -> Callable[[str], list[str]]:
    """An argparse type: a comma-separated list of names among `allowed`."""
    def parse(text: str) -> list[str]:
        chosen = [part.strip() for part in text.split(",") if part.strip()]
        if not chosen or any(c not in allowed for c in chosen):
            raise argparse.ArgumentTypeError(
                f"{text!r}: expected {what} among {', '.join(allowed)}, comma-separated")
        return chosen
    return parse


attention_routes = choices("attention routes", ATTENTION_KINDS)
settings = choices("settings", SETTINGS)


def main(argv: Optional[list[str]] = None) -> dict:
    parser = common.parser(__doc__, "bfloat16")
    parser.add_argument("--tiny", action="store_true", help="CPU-sized shapes (benchmarks/synthetic.py TINY)")
    parser.add_argument("--hidden", type=int)
    parser.add_argument("--layers", type=int)
    parser.add_argument("--vocab", type=int)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--fresh-shapes", action="store_true",
                        help="each pass a prompt one token longer: no round reuses a context "
                             "length an earlier pass compiled for")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--split-rounds", type=int, default=12)
    parser.add_argument("--attention", type=attention_routes, default=[None],
                        help="comma-separated routes (mlx, padded, kernel) to run each engine "
                             "method with; default: the session's own choice")
    parser.add_argument("--settings", type=settings, default=["off", "both"],
                        help="comma-separated engine settings to time: off (probes and ranks "
                             "off), probes, ranks, both (what the TUI computes); default off,both")
    parser.add_argument("--zlab", action="store_true",
                        help="also time Z Lab's loop (dflash==0.1.0 stream_generate) on the same "
                             "arrays, its proposals forced to a text its verify accepts whole")
    parser.add_argument("--projections", choices=("plain", "fused"),
                        help="the target's projections as they load (plain) or fused into one "
                             "matmul a group; default: fused on a GPU, plain on the CPU")
    args = parser.parse_args(argv)
    if args.zlab:
        try:
            importlib.import_module("dflash.model_mlx")  # Z Lab's loop, timed beside the engine
        except ImportError:
            parser.error("--zlab needs Z Lab's reference package: pip install --no-deps dflash==0.1.0")
    return finish(run(args), report, args.json)


if __name__ == "__main__":
    main()
