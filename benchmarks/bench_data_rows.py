"""What dropping stopped rows from a greedy batch saves the data phase (generate.py).

    python -m benchmarks.bench_data_rows [--corpus runs/corpus13/prompts.jsonl] [--prompts 48]
        [--batch 48] [--max-tokens 256] [--json FILE] [TARGET]

Decodes the same prompts twice in one run, the batch kept whole (COMPACT_AT above 1, the
decode before rows could leave) and as the data phase now decodes it, and reports each
one's time and new tokens per second, their ratio, and the rows x steps each decoded:
the work the batch did, which on a GPU (where a step's cost follows its rows' caches)
bounds the saving. Prompts: every k-th of a corpus file (the chat template applied, as the
data phase does), or without one the recipe's generated code, math and prose prompts.
Both decodes must give the same continuations; a difference is reported, not hidden.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import mlx.core as mx

import dflash_tui_distill.generate as generate
from dflash_tui.engine.target import encode_prompt
from dflash_tui.sample import sample_target
from dflash_tui_distill.prompts import make_prompts
from dflash_tui_distill.target_setup import load_for_distill


def corpus_texts(path: Path, count: int) -> list[str]:
    rows = [json.loads(line) for line in path.open()]
    step = max(1, len(rows) // count)
    return [r["text"] for r in rows[::step][:count]]


def decode(model, prompts, max_tokens, stops, batch, compact_at):
    """Continuations, seconds, and rows x steps decoded (counted in the forward calls)."""
    generate.COMPACT_AT = compact_at
    work = [0]
    real_call = type(model).__call__

    def counting(self, inputs, *args, **kwargs):
        if inputs.shape[1] == 1:  # a decode step (the prefill's chunks are longer)
            work[0] += inputs.shape[0]
        return real_call(self, inputs, *args, **kwargs)

    type(model).__call__ = counting
    try:
        mx.synchronize()
        start = time.perf_counter()
        out = {c.index: c.tokens for c in generate.decode_continuations(model, prompts, max_tokens,
                                                                       stops, batch)}
        mx.synchronize()
        return out, time.perf_counter() - start, work[0]
    finally:
        type(model).__call__ = real_call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", nargs="?", default=None)
    parser.add_argument("--corpus", type=Path, help="a corpus prompts.jsonl (default: generated prompts)")
    parser.add_argument("--prompts", type=int, default=48)
    parser.add_argument("--batch", type=int, default=48)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    target = load_for_distill(args.target or sample_target(), "float32", dequantize=True)
    if args.corpus:
        texts = corpus_texts(args.corpus, args.prompts)
    else:
        per_kind = -(-args.prompts // 3)
        made = make_prompts({"code": per_kind, "math": per_kind, "prose": per_kind}, seed=0)
        texts = [p.text for p in made][:args.prompts]
    prompts = [encode_prompt(target.tokenizer, t, True) for t in texts]
    stops = generate.stop_token_ids(target.tokenizer)

    results = {}
    for name, compact_at in (("whole batch", 2.0), ("rows leave", generate.COMPACT_AT)):
        out, seconds, work = decode(target.model, prompts, args.max_tokens, stops, args.batch, compact_at)
        new = sum(len(t) for t in out.values())
        results[name] = {"seconds": seconds, "new_tokens": new, "row_steps": work, "out": out}
        print(f"{name:12} {seconds:7.1f} s  {new / seconds:7.1f} new tokens/s  "
              f"{work} rows x steps ({new / work:.0%} of them kept)")
    whole, leave = results["whole batch"], results["rows leave"]
    differ = [i for i in whole["out"] if whole["out"][i] != leave["out"][i]]
    print(f"time: {leave['seconds'] / whole['seconds']:.2f} of the whole batch's; rows x steps: "
          f"{leave['row_steps'] / whole['row_steps']:.2f}; continuations that differ: {len(differ)} "
          f"of {len(prompts)}")
    if args.json:
        args.json.write_text(json.dumps({
            "prompts": len(prompts), "batch": args.batch, "max_tokens": args.max_tokens,
            "corpus": str(args.corpus) if args.corpus else None, "differ": differ,
            **{name: {k: v for k, v in r.items() if k != "out"} for name, r in results.items()},
        }, indent=1) + "\n")


if __name__ == "__main__":
    main()
