"""Where a round's time goes at real scale: each piece timed alone, waited for.

    python -m benchmarks.profile_round            # the full shape: a GPU (H200: ~1 min)
    python -m benchmarks.profile_round --tiny     # CPU-sized, to check the script runs
    python -m benchmarks.profile_round --deep --profiled off   # CPU: the host's work at real depth

bench_real_scale.py times whole rounds and stages; this times the pieces inside them, each
built and evaluated on its own (graph building, launches and the device work together:
what the piece adds to a round), median of `--repeats`:

  matmul          x [M, hidden] @ W.T for the target's shapes, M = 1 and the verify rows
  target forward  mlx-lm's model over 1 and block + 1 rows at a 128-token context
  draft           the drafter's block pass, probes off and on (the sink's reductions and
                  rows included), and one BlockConv alone
  select          the lattice (top-K over the vocabulary, edges) and the greedy walk
  ranks           rank_arrays (log-softmaxes, top tokens) over the drafter's and target's
                  logits
  probe rows      the host side of a draft stage's probes: rows() after the wait
  rounds          whole chained rounds with probes and ranks off / on, round and host ms
                  (host: outside the one wait), and a profile of the host's functions in
                  rounds with both on (`--profiled off`: both off), by own time and by
                  cumulative time (`--profile-top` lines each)
"""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import time
from typing import Callable, Optional

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

from benchmarks import common
from benchmarks.synthetic import REAL, TINY, synthetic_pair, with_shape
from dflash_tui.engine.context_cache import ContextCache
from dflash_tui.engine.device_walk import greedy_walk
from dflash_tui.engine.drafter import block_masks
from dflash_tui.engine.probes import ProbeSink
from dflash_tui.engine.ranks import rank_arrays
from dflash_tui.engine.selector import lattice_arrays
from dflash_tui.engine.session import Session, SessionOptions


def median_ms(make: Callable[[], list], repeats: int, after: Optional[Callable] = None) -> float:
    """Median wall ms of building `make()`'s graph and evaluating it (two warm-ups first)."""
    times = []
    for i in range(repeats + 2):
        t0 = time.perf_counter()
        mx.eval(make())
        if after is not None:
            after()
        if i >= 2:
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def run(args) -> dict:
    # --deep: TINY's widths at REAL's depths, so a CPU builds the graphs of a real-scale round
    # (the same ops, one by one) while computing next to nothing: round time ~ host time.
    base = with_shape(TINY, layers=REAL.layers, draft_layers=REAL.draft_layers) if args.deep else (
        TINY if args.tiny else REAL)
    shape = with_shape(base, vocab=args.vocab)
    pair = synthetic_pair(shape, args.dtype)
    target, drafter, config = pair.target, pair.drafter, pair.drafter.config
    dtype = drafter.dtype
    rows, r = args.block + 1, args.repeats
    out: dict[str, float] = {}

    for m in sorted({1, rows, config.block_size}):
        x = mx.random.normal((m, shape.hidden)).astype(dtype)
        for name, (o, i) in {"qkv-like": (shape.hidden, shape.hidden),
                             "mlp up": (shape.intermediate, shape.hidden),
                             "lm_head": (shape.vocab, shape.hidden)}.items():
            w = mx.random.normal((o, i)).astype(dtype)
            mx.eval(x, w)
            out[f"matmul {name} M={m}"] = median_ms(lambda: [x @ w.T], r)

    model = target.model
    cache = make_prompt_cache(model)
    prompt = mx.array([list(range(1, 129))])
    mx.eval(model(prompt, cache=cache))
    for m in (1, rows):
        ids = mx.array([list(range(2, 2 + m))])
        out[f"target forward {m} rows"] = median_ms(
            lambda: [mx.argmax(model(ids, cache=cache)[0], axis=-1)], r,
            after=lambda: trim_prompt_cache(cache, m))

    caches = [ContextCache() for _ in drafter.layers]
    capture = mx.random.normal((1, 128, len(config.target_layer_ids) * shape.hidden)).astype(dtype)
    ctx = drafter.project_context(capture)
    for c, (k, v) in zip(caches, drafter.context_kv(ctx, 0)):
        c.append(k, v)
    mx.eval([c.keys for c in caches])
    block = mx.array([[5] + [config.mask_token_id] * args.block])
    masks = block_masks(config, [c.length for c in caches], rows)

    def draft(sink) -> tuple[list, ProbeSink]:
        x = target.embed_tokens(block).astype(dtype)
        hidden = drafter.block_hidden(x, caches, 128, masks, sink)[0, 1:]
        logits = drafter.logits(hidden, target.lm_head)
        hproj = drafter.candidate_selector.hidden_projection(hidden)
        sink("final_normed", None, hidden)
        sink("logits", None, logits)
        sink("hproj", None, hproj)
        return [logits, hproj, *sink.pending()], sink

    out["draft, probes off"] = median_ms(lambda: draft(ProbeSink("draft", False))[0], r)
    sinks = []

    def probed():
        arrays, sink = draft(ProbeSink("draft", True))
        sinks[:] = [sink]  # only the latest: older sinks' buffers would never be reused
        return arrays

    class KeptOnly(ProbeSink):
        def pending(self) -> list:  # the buffers held to the end of the stage, not reduced
            return []

    def kept():
        arrays, sink = draft(KeptOnly("draft", True))
        sinks[:] = [sink]
        return arrays

    out["draft, probed buffers kept, not reduced"] = median_ms(kept, r)

    out["draft, probes on (device)"] = median_ms(probed, r)
    out["draft, probes on (with rows)"] = median_ms(probed, r, after=lambda: sinks[-1].rows())
    out["draft probe buffers"] = float(len(sinks[-1]._tensors))
    t0 = time.perf_counter()
    for _ in range(r):
        sinks[-1].rows()
    out["probe rows() host"] = (time.perf_counter() - t0) * 1000 / r

    conv = drafter.layers[0].attention_conv
    h = mx.random.normal((1, rows, shape.hidden)).astype(dtype)
    coeffs = conv.coefficients(h)
    mx.eval(h, coeffs)
    out["one BlockConv.convolve"] = median_ms(lambda: [conv.convolve(h, coeffs, 0)], r)

    logits, hproj = (a for a in draft(ProbeSink("draft", False))[0][:2])
    mx.eval(logits, hproj)
    selector, k = drafter.candidate_selector, config.selector_top_k
    out["lattice (top-K, edges)"] = median_ms(
        lambda: list(lattice_arrays(selector, hproj, logits, 5, k)), r)
    lattice = lattice_arrays(selector, hproj, logits, 5, k)
    mx.eval(lattice)
    out["greedy walk"] = median_ms(lambda: [greedy_walk(*lattice[1:])], r)
    out["argpartition top-K over the vocabulary"] = median_ms(
        lambda: [mx.argpartition(-logits, kth=k - 1, axis=-1)[:, :k]], r)
    t_logits = mx.random.normal((rows, shape.vocab)).astype(dtype)
    t_tokens = mx.argmax(t_logits, axis=-1)
    mx.eval(t_logits, t_tokens)
    out["ranks (rank_arrays)"] = median_ms(
        lambda: list(rank_arrays(logits, t_logits[:-1], t_tokens[:-1], 0.0)), r)
    out["logsumexp over the vocabulary"] = median_ms(
        lambda: [mx.logsumexp(logits.astype(mx.float32), axis=-1)], r)
    attention(shape, dtype, rows, out)
    profile = rounds(pair, args, out)
    return {"shape": shape.describe(), "dtype": args.dtype, "block": args.block,
            "backend": "gpu" if mx.default_device() == mx.gpu else "cpu",
            "mlx": mx.__version__, "ms": out, "profiled": args.profiled, "profile": profile}


def attention(shape, dtype, rows: int, out: dict) -> None:
    """Attention at key lengths never seen before and at the same lengths again: a decode
    meets a new context length every round."""
    def timed(queries: int, keys: int, mask) -> float:
        q = mx.random.normal((1, shape.heads, queries, shape.head_dim)).astype(dtype)
        k = mx.random.normal((1, shape.kv_heads, keys, shape.head_dim)).astype(dtype)
        mx.eval(q, k)
        t0 = time.perf_counter()
        mx.eval(mx.fast.scaled_dot_product_attention(q, k, k, scale=0.1, mask=mask))
        return (time.perf_counter() - t0) * 1000

    for queries, mask in ((1, None), (rows, "causal"), (16, None)):
        name = f"attention, {queries} queries{', causal' if mask else ''}"
        first = [timed(queries, 300 + i, mask) for i in range(8)]
        again = [timed(queries, 300 + i, mask) for i in range(8)]
        out[name + ", new key length"] = statistics.median(first)
        out[name + ", same length again"] = statistics.median(again)
    # padded (engine/padded_attention.py): the buffer's 512 rows, a mask hiding the rest
    for queries in (rows, 16):
        def padded(held: int) -> float:
            visible = np.arange(512)[None, :] <= held + np.arange(queries)[:, None]
            return timed(queries, 512, mx.array(visible))
        padded(290)  # the one shape's plan
        out[f"attention, {queries} queries, padded to 512, new length held"] = statistics.median(
            [padded(300 + i) for i in range(8)])


def rounds(pair, args, out: dict) -> str:
    """Chained rounds for each setting, one session after another (sessions of one pair
    share the target's cache: never two at once); then a host profile of rounds with both
    on. The random drafter's proposals are mostly rejected: rounds of one accepted token."""
    def session(probes: bool, ranks: bool) -> Session:
        options = SessionOptions(gamma=args.block, max_tokens=10 ** 6, probes=probes, ranks=ranks)
        opened = Session(pair, list(range(1, 129)), options=options)
        opened.prefill()
        for _ in range(3):  # warm-up: first shapes compile their kernels
            opened.step_round()
        return opened

    for probes in (False, True):
        for ranks in (False, True):
            opened, times = session(probes, ranks), []
            for _ in range(args.rounds):
                waited, t0 = opened.waits.seconds, time.perf_counter()
                opened.step_round()
                wall = time.perf_counter() - t0
                times.append((wall, wall - (opened.waits.seconds - waited)))
            opened.close()
            name = f"round, probes {'on' if probes else 'off'}, ranks {'on' if ranks else 'off'}"
            out[name] = 1000 * statistics.median(w for w, _ in times)
            out[name + " (host)"] = 1000 * statistics.median(h for _, h in times)
    opened, profiler = session(args.profiled == "on", args.profiled == "on"), cProfile.Profile()
    profiler.enable()
    for _ in range(args.rounds):
        opened.step_round()
    profiler.disable()
    opened.close()
    text = io.StringIO()
    for order in ("tottime", "cumulative"):
        pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(args.profile_top)
    return text.getvalue()


def report(result: dict) -> str:
    lines = [result["shape"], f"{result['backend']} (MLX {result['mlx']}), {result['dtype']}, "
             f"block {result['block']}; each piece alone, median ms"]
    lines += [f"  {name:44} {value:9.3f}" for name, value in result["ms"].items()]
    return ("\n".join(lines) + f"\nhost profile, rounds with probes and ranks {result['profiled']}:\n"
            + result["profile"])


def main(argv: Optional[list[str]] = None) -> dict:
    parser = common.parser(__doc__, "bfloat16")
    parser.add_argument("--tiny", action="store_true", help="CPU-sized shapes")
    parser.add_argument("--deep", action="store_true",
                        help="CPU-sized widths at the real depths (36 target layers, 5 drafter layers)")
    parser.add_argument("--vocab", type=int)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--profile-top", type=int, default=25)
    parser.add_argument("--profiled", choices=("on", "off"), default="on",
                        help="profile the host in rounds with probes and ranks on, or off")
    args = parser.parse_args(argv)
    return common.finish(run(args), report, args.json)


if __name__ == "__main__":
    main()
