"""The data phase: prompts -> the target's greedy continuations -> shards under --data.

1. Build the prompt set once: the generated kinds (prompts.py), dropping anything that
   clashes with a test set (sample_prompts/, test_prompts/), and the real prompts of
   --prompts-from. The "self" prompts are the target's own greedy replies to seed
   instructions, cleaned to one line; the "asked" ones are user turns it samples from its
   chat template (prompts_asked.py), kind `asked-<steer>`.
2. Split off the validation prompts (model selection), stratified by kind, with the seed;
   a --prompts-from file brings its own split.
3. Continue every prompt not already in a shard, in batches, and write a shard every
   `shard_size` finished sequences. A deadline stops between decode steps; what is in a
   shard stays, the next data command does the rest. Prompts whose continuation an earlier
   data phase kept (--continuations-from, continuations.py) take it instead of a decode.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Callable

from dflash_tui.engine.errors import InputError
from dflash_tui.engine.target import encode_prompt

from . import dataset, prompts as prompt_lib, prompts_asked
from .continuations import Continuations
from .generate import generate_texts, decode_continuations, stop_token_ids
from .holdout import Holdout, refuse_clashes
from .prompts_from import describe, read_prompts_from
from .settings import DataSettings, to_json

SELF_PROMPT_TOKENS = 64
Say = Callable[[str], None]


def eval_count(settings: DataSettings, total: int) -> int:
    if settings.eval_prompts:
        return min(settings.eval_prompts, max(0, total - 1))
    return min(max(8, round(0.04 * total)), 256, max(0, total - 1))


def assign_splits(items: list[dict], settings: DataSettings) -> None:
    """Mark validation prompts, spread over the kinds in proportion (every kind gets some)."""
    r = random.Random(f"{settings.seed}:split")
    n_eval = eval_count(settings, len(items))
    by_kind: dict[str, list[dict]] = {}
    for item in items:
        item["split"] = "train"
        by_kind.setdefault(item["kind"], []).append(item)
    kinds = sorted(by_kind)
    quota = {k: max(1, round(n_eval * len(by_kind[k]) / len(items))) if n_eval else 0 for k in kinds}
    for kind in kinds:
        group = by_kind[kind]
        for item in r.sample(group, min(quota[kind], len(group) - 1)):
            item["split"] = "validation"


def read_extra_prompts(path: str) -> list[str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"--extra-prompts {path}: no such file (expected one prompt per line)") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"--extra-prompts {path}: unreadable ({error})") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def build_prompt_list(target, settings: DataSettings, holdout: Holdout, gen_batch: int,
                      say: Say, should_stop: Callable[[], bool]) -> list[dict] | None:
    """Every prompt with its kind and split; None if the deadline came first."""
    real = read_prompts_from(settings.prompts_from) if settings.prompts_from else []
    refuse_clashes(((f"--prompts-from {settings.prompts_from}", r["text"]) for r in real), holdout)
    counts = prompt_lib.split_counts(settings.num_prompts, settings.mix)
    reject = lambda text: holdout.clashes(text) is not None  # noqa: E731
    made = prompt_lib.make_prompts(counts, settings.seed, reject)
    generated = f"dflash-tui prompt generators (seed {settings.seed})"
    items = [{"kind": p.kind, "text": p.text, "source": generated} for p in made
             if p.kind not in ("self", "asked")]
    steers = [prompts_asked.steer_of(p.text) for p in made if p.kind == "asked"]
    if steers and not _add_asked(target, steers, settings.seed, items, reject, gen_batch, say, should_stop):
        return None
    seeds = [p.text for p in made if p.kind == "self"]
    if seeds:
        say(f"data: the target writes {len(seeds)} prompts of its own")
        ids = [encode_prompt(target.tokenizer, s, None) for s in seeds]
        replies = generate_texts(target.model, target.tokenizer, ids, SELF_PROMPT_TOKENS,
                                 gen_batch, should_stop)
        if any(r is None for r in replies):
            return None
        seen = {i["text"] for i in items}
        for reply in replies:
            text = prompt_lib.clean_self_prompt(reply)
            if text and text not in seen and not reject(text):
                seen.add(text)
                items.append({"kind": "self", "text": text, "source": "the target's own (seed prompts)"})
    if settings.extra_prompts:
        seen = {i["text"] for i in items}
        extra = [t for t in read_extra_prompts(settings.extra_prompts) if t not in seen]
        refuse_clashes(((f"--extra-prompts {settings.extra_prompts}", t) for t in extra), holdout)
        items.extend({"kind": "extra", "text": t, "source": settings.extra_prompts} for t in extra)
    if items:
        assign_splits(items, settings)
    seen = {i["text"] for i in items}
    items.extend(r for r in real if r["text"] not in seen)
    if not items:
        raise InputError("the prompt set is empty (check --num-prompts and --mix)")
    return [{"i": i, "kind": it["kind"], "split": it["split"], "text": it["text"], "source": it["source"]}
            for i, it in enumerate(items)]


def _add_asked(target, steers: list[str], seed: int, items: list[dict], reject,
               gen_batch: int, say: Say, should_stop: Callable[[], bool]) -> bool:
    """Sample a user turn per steer and add the usable ones; False if the deadline came."""
    say(f"data: the target asks {len(steers)} questions of its own (sampled user turns)")
    tok = target.tokenizer
    prefixes = {s: list(tok.encode(prompts_asked.user_turn_prefix(tok, s), add_special_tokens=False))
                for s in prompts_asked.STEERS}
    turns = generate_texts(target.model, tok, [prefixes[s] for s in steers],
                           prompts_asked.ASKED_TOKENS, gen_batch, should_stop,
                           temperature=prompts_asked.ASKED_TEMPERATURE, seed=seed, only_stopped=True)
    if any(t is None for t in turns):
        return False
    seen = {i["text"] for i in items}
    kept = 0
    for steer, turn in zip(steers, turns):
        text = prompts_asked.clean_asked(turn)
        if text and text not in seen and not reject(text):
            seen.add(text)
            kept += 1
            items.append({"kind": f"asked-{steer}", "text": text,
                          "source": f"the target's own user turns (sampled, seed {seed})"})
    say(f"data: kept {kept} of {len(steers)} sampled questions (closed, 16-1,200 characters, new)")
    return True


def run_data_phase(target, directory: Path, settings: DataSettings, holdout: Holdout,
                   gen_batch: int, deadline: float, say: Say, shard_size: int = 0,
                   continuations: Continuations | None = None) -> dict:
    """Generate (or finish generating) the data in `directory`. Returns the manifest."""
    fingerprint = dataset.target_fingerprint(target)
    if continuations is not None:  # the target's fingerprint, before anything is written
        continuations.check(settings.max_new_tokens, settings.data_dtype, fingerprint)
    directory.mkdir(parents=True, exist_ok=True)
    should_stop = lambda: time.monotonic() >= deadline  # noqa: E731
    manifest = dataset.read_manifest(directory)
    if manifest is None:
        manifest = {"version": dataset.VERSION, "target": fingerprint,
                    "settings": to_json(settings), "shards": [], "complete": False}
    else:
        dataset.check_target(directory, manifest, fingerprint)
    items = dataset.read_prompts(directory)
    if items is None:
        items = build_prompt_list(target, settings, holdout, gen_batch, say, should_stop)
        if items is None:
            say("data: stopped at the time limit while the target wrote its own prompts")
            return manifest
        dataset.write_prompts(directory, items)
        manifest["prompts"] = len(items)
        manifest["kinds"] = _count(items, "kind")
        manifest["validation_prompts"] = sum(1 for i in items if i["split"] == "validation")
        manifest["sources"] = _by_source(items)
        if settings.prompts_from:
            manifest["prompts_from"] = describe(settings.prompts_from)
        dataset.write_manifest(directory, manifest)
    refuse_clashes(((f"{directory / dataset.PROMPTS} line {i['i'] + 1}", i["text"]) for i in items), holdout)

    done = dataset.done_prompt_indices(directory, manifest)
    todo = [i for i in items if i["i"] not in done]
    if not todo:
        return _finish(directory, manifest, say)
    prompt_ids = [encode_prompt(target.tokenizer, i["text"], None) for i in todo]
    shard_size = shard_size or gen_batch  # a shard per decoded batch: a kill loses one batch
    if continuations is not None:
        todo, prompt_ids = _take_stored(directory, manifest, todo, prompt_ids, continuations,
                                        shard_size, say)
        if not todo:
            return _finish(directory, manifest, say)
    say(f"data: {len(todo)} of {len(items)} prompts to continue (greedy, at most "
        f"{settings.max_new_tokens} new tokens, {gen_batch} at a time)")
    stops = stop_token_ids(target.tokenizer)
    pending: list[tuple[int, list[int], int, bool]] = []
    t0, tokens, finished = time.monotonic(), 0, 0
    try:
        for c in decode_continuations(target.model, prompt_ids, settings.max_new_tokens, stops,
                                      gen_batch, should_stop):
            prompt = prompt_ids[c.index]
            pending.append((todo[c.index]["i"], prompt + c.tokens, len(prompt), c.stopped))
            tokens += len(c.tokens)
            finished += 1
            if len(pending) >= shard_size:
                _flush(directory, manifest, pending)
                rate = tokens / max(time.monotonic() - t0, 1e-9)
                say(f"data: {finished}/{len(todo)} sequences, {tokens} new tokens, {rate:.0f} tokens/s")
    except RuntimeError as error:
        if "out of memory" not in str(error).lower():
            raise
        if pending:
            _flush(directory, manifest, pending)  # what finished stays: the next command resumes
        raise InputError(
            f"data: out of device memory decoding a batch of --gen-batch {gen_batch} prompts "
            f"(the longest prompt to continue has {max(len(p) for p in prompt_ids)} tokens); {finished} of "
            f"{len(todo)} sequences of this command are kept in {directory}: run the data phase "
            f"again with a smaller --gen-batch") from None
    if pending:
        _flush(directory, manifest, pending)
    rate = tokens / max(time.monotonic() - t0, 1e-9)
    say(f"data: {finished} sequences this command ({tokens} new tokens, {rate:.0f} tokens/s)")
    if finished < len(todo):
        say(f"data: stopped at the time limit; {len(todo) - finished} prompts left for the next data command")
        return manifest
    return _finish(directory, manifest, say)


def _flush(directory: Path, manifest: dict, pending: list) -> None:
    name = dataset.write_shard(directory, len(manifest["shards"]), pending)
    manifest["shards"].append(name)
    dataset.write_manifest(directory, manifest)
    pending.clear()


def _take_stored(directory: Path, manifest: dict, todo: list[dict], prompt_ids: list[list[int]],
                 continuations: Continuations, shard_size: int,
                 say: Say) -> tuple[list[dict], list[list[int]]]:
    """Shard the prompts whose continuation `continuations` holds; return the rest, to decode."""
    found = [continuations.get(ids) for ids in prompt_ids]
    taken = [k for k, f in enumerate(found) if f is not None]
    say(f"data: {len(taken)} of {len(todo)} prompts take their continuation from {continuations.path}")
    if taken:
        # counted shard by shard, so the manifest agrees with the shards a kill leaves
        record = {"file": Path(continuations.path).name, "taken": 0}
        manifest.setdefault("continuations_from", []).append(record)
        for start in range(0, len(taken), shard_size):
            rows = []
            for k in taken[start:start + shard_size]:
                tokens, stopped = found[k]
                rows.append((todo[k]["i"], prompt_ids[k] + tokens.tolist(), len(prompt_ids[k]), stopped))
            record["taken"] += len(rows)
            _flush(directory, manifest, rows)
    rest = [k for k, f in enumerate(found) if f is None]
    return [todo[k] for k in rest], [prompt_ids[k] for k in rest]


def _finish(directory: Path, manifest: dict, say: Say) -> dict:
    train = dataset.load_sequences(directory, "train")
    validation = dataset.load_sequences(directory, "validation")
    manifest["complete"] = True
    manifest["sequences"] = {"train": len(train), "validation": len(validation)}
    manifest["tokens"] = {"train": train.total_tokens, "validation": validation.total_tokens}
    dataset.write_manifest(directory, manifest)
    say(f"data: complete: {len(train)} training sequences ({train.total_tokens} tokens), "
        f"{len(validation)} for validation ({validation.total_tokens} tokens)")
    return manifest


def _by_source(items: list[dict]) -> dict[str, dict[str, int]]:
    """Prompts per source and split: what the drafter's config records it was made from."""
    out: dict[str, dict[str, int]] = {}
    for item in items:
        counts = out.setdefault(item.get("source", "unknown"), {"train": 0, "validation": 0})
        counts[item["split"]] += 1
    return out


def _count(items: list[dict], key: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item[key]] = out.get(item[key], 0) + 1
    return out
