"""How sure the target is of its own greedy answers, per workload: the ceiling a drafter meets.

    python -m benchmarks.target_confidence --prompts test_prompts --prompts sample_prompts
        [--max-tokens 200] [--json FILE] [TARGET]
    python -m benchmarks.target_confidence --write-validation DIR --corpus runs/corpus/prompts.jsonl
        [--per-kind 6]

The first form decodes every prompt of each bench-layout folder greedily with the target
alone (mlx-lm's loop, chat template, float32) and reads, at every answer position, the
target's own distribution over the next token: its top-1 probability p1 and its entropy.
A drafter proposes the target's argmax without the target's last hidden state; where the
target itself is torn (low p1) the argmax rests on small margins a drafter cannot see, so
acceptance there is low for any drafter. Per workload: positions, mean p1, the share of
positions with p1 >= 0.9 and with p1 < 0.5, and the mean entropy in nats.

The second form writes N validation prompts of each real kind of a corpus file
(`real-code`, `real-math`, `real-prose`, evenly spaced through the file) as a bench folder (code/, math/,
prose/), so the same validation answers can be benched (`dflash-tui bench --prompts DIR`)
and measured here beside the test sets. It reads the validation split only: nothing a
drafter trained on.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import mlx.core as mx
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache

from dflash_tui.aggregates import TORN
from dflash_tui.bench.prompts import load_workloads
from dflash_tui.engine.baseline import eos_ids
from dflash_tui.engine.errors import InputError
from dflash_tui.engine.target import encode_prompt, load_target
from dflash_tui.sample import sample_target

CONFIDENT = 0.9  # TORN, the other threshold, is the aggregates tab's


def answer_confidence(model, ids: list[int], stop: set[int], max_tokens: int) -> list[tuple[float, float]]:
    """(p1, entropy) of the target's distribution at each token of its greedy answer."""
    steps = generate_step(mx.array(ids), model, max_tokens=max_tokens,
                          sampler=lambda logprobs: mx.argmax(logprobs, axis=-1),
                          prompt_cache=make_prompt_cache(model))
    out = []
    for token, logprobs in steps:
        logprobs = logprobs.astype(mx.float32)
        p = mx.exp(logprobs)
        entropy = -(p * logprobs).sum()
        mx.eval(entropy)
        out.append((float(p.max()), float(entropy)))
        if int(token) in stop or len(out) >= max_tokens:
            break
    steps.close()
    return out


def summary(points: list[tuple[float, float]]) -> dict:
    n = len(points)
    return {
        "positions": n,
        "mean_p1": round(sum(p for p, _ in points) / n, 4),
        "share_p1_at_least_0.9": round(sum(p >= CONFIDENT for p, _ in points) / n, 4),
        "share_p1_below_0.5": round(sum(p < TORN for p, _ in points) / n, 4),
        "mean_entropy_nats": round(sum(h for _, h in points) / n, 4),
    }


def measure(target_path: str, folders: list[Path], max_tokens: int) -> dict:
    target = load_target(target_path)
    stop = set(eos_ids(target))
    result = {"target": target_path, "max_tokens": max_tokens, "sets": {}}
    for folder in folders:
        per_workload = {}
        for workload in load_workloads(folder):
            points, per_prompt = [], {}
            for prompt in workload.prompts:
                ids = encode_prompt(target.tokenizer, prompt.text, None)
                got = answer_confidence(target.model, ids, stop, max_tokens)
                per_prompt[prompt.name] = summary(got)
                points += got
                print(f"{folder.name}/{workload.name}/{prompt.name}: {len(got)} tokens, "
                      f"mean p1 {per_prompt[prompt.name]['mean_p1']:.3f}", flush=True)
            per_workload[workload.name] = {**summary(points), "prompts": per_prompt}
        result["sets"][folder.name] = per_workload
    return result


def report(result: dict) -> str:
    lines = [f"{'set':<22} {'workload':<8} {'tokens':>6} {'mean p1':>8} {'p1>=0.9':>8} "
             f"{'p1<0.5':>7} {'entropy':>8}"]
    for name, workloads in result["sets"].items():
        for workload, s in workloads.items():
            lines.append(f"{name:<22} {workload:<8} {s['positions']:>6} {s['mean_p1']:>8.3f} "
                         f"{s['share_p1_at_least_0.9']:>8.1%} {s['share_p1_below_0.5']:>7.1%} "
                         f"{s['mean_entropy_nats']:>8.3f}")
    return "\n".join(lines)


def write_validation(corpus: Path, directory: Path, per_kind: int) -> None:
    kinds = {"real-code": "code", "real-math": "math", "real-prose": "prose"}
    items = {k: [] for k in kinds}
    try:
        text = corpus.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SystemExit(f"target_confidence: --corpus {corpus}: unreadable ({error.__class__.__name__}); "
                         "expected the JSON lines of scripts/build_prompt_corpus.sh")
    for line in text.splitlines():
        item = json.loads(line)
        if item.get("split") == "validation" and item.get("kind") in kinds:
            items[item["kind"]].append(item)
    for kind, found in items.items():
        # evenly spaced through the file, which lists each source's prompts together
        picked = [found[i * len(found) // per_kind] for i in range(min(per_kind, len(found)))]
        folder = directory / kinds[kind]
        folder.mkdir(parents=True, exist_ok=True)
        for n, item in enumerate(picked, 1):
            name = item["source"].split("==")[0].split()[0]
            (folder / f"{n:02d}-{name}.txt").write_text(item["text"] + "\n", encoding="utf-8")
    print(f"wrote {per_kind} validation prompts of each real kind under {directory}")


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args.add_argument("target", nargs="?", help="target (default: the bundled sample's)")
    args.add_argument("--prompts", type=Path, action="append", default=[],
                      help="a bench-layout prompt folder (repeatable)")
    args.add_argument("--max-tokens", type=int, default=200)
    args.add_argument("--json", type=Path)
    args.add_argument("--write-validation", type=Path, metavar="DIR")
    args.add_argument("--corpus", type=Path)
    args.add_argument("--per-kind", type=int, default=6)
    a = args.parse_args()
    if a.per_kind < 1:
        raise SystemExit(f"target_confidence: --per-kind {a.per_kind}: expected 1 or more prompts per kind")
    if a.write_validation:
        if a.corpus is None:
            args.error("--write-validation needs --corpus FILE")
        write_validation(a.corpus, a.write_validation, a.per_kind)
        return
    if not a.prompts:
        args.error("give at least one --prompts DIR")
    target = a.target or str(sample_target())
    for folder in a.prompts:  # before the target loads: a typo costs nothing
        try:
            load_workloads(folder)
        except InputError as error:
            raise SystemExit(f"target_confidence: {error}")
    result = measure(target, a.prompts, a.max_tokens)
    print(report(result))
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
