"""Memory of a long live session: does the TUI stay under a fixed ceiling however many
rounds it runs? (A benchmark that reports numbers, not a test.)

    python benchmarks/bench_memory.py [--rounds 5000] [--block 4] [--keep-rounds 100]
                                      [--every 500] [--json F] [MODEL --draft DRAFT_DIR | --sample]
                                      [--restarts N] [--no-freeze] [--compare SPEC]

Runs the real live app (engine thread, history, trace, panels drawing frames, headless)
with `c` running round after round, by default on the tiny fixture pair of tests/fixtures.py
(written to a temporary directory; --sample: the bundled sample pair and its default
prompt), and samples every `--every` rounds:

  rss            the process's resident memory (/proc/self/status VmRSS)
  kv             the target's KV cache and the drafter's context cache at that point,
                 computed from the shapes as bench_memory_headless.py does (they grow with
                 the context by design)
  app            what the app holds for the session: the history's summary columns plus
                 the full records it keeps (the last --keep-rounds), measured object by object
  mlx            MLX's allocator: memory in live arrays (the caches above among them) and
                 freed buffers it keeps for reuse (mx.get_active_memory / get_cache_memory)

and reports the growth per 1,000 rounds of each, and of rss - mlx: what the rest of the
process (the app above all) adds beyond the model's memory. The ceiling stated in
docs/TUI.md comes from this.

--compare SPEC: the session runs a reference configuration beside the drafter (the app's
--compare): a second drafter, its records in every round and a second History for tab 4,
all counted in `app`.

--restarts N: instead, restart the session N times (`r`), running --every rounds after each,
and sample after each restart: what a restart leaves behind. The app freezes what is alive
once the pair has loaded, as `dflash-tui` does (Launch.freeze_loaded; a frozen cycle is
never collected); --no-freeze leaves that out, for a before/after.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tempfile
import time
from dataclasses import fields, is_dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_memory_headless import kv_bytes, kv_bytes_per_position  # noqa: E402  (beside this file)

MB = 1024 * 1024


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def deep_size(obj, seen: set | None = None) -> int:
    """Bytes of an object and everything it refers to (dataclasses, tuples, dicts, numpy)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if hasattr(obj, "nbytes") and hasattr(obj, "dtype"):  # a numpy array owns its buffer
        return size if obj.base is not None else max(size, obj.nbytes)
    if is_dataclass(obj) and not isinstance(obj, type):
        own = sys.getsizeof(vars(obj)) if hasattr(obj, "__dict__") else 0  # its attribute dict
        return size + own + sum(deep_size(getattr(obj, f.name), seen) for f in fields(obj))
    if isinstance(obj, dict):
        return size + sum(deep_size(k, seen) + deep_size(v, seen) for k, v in obj.items())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return size + sum(deep_size(v, seen) for v in obj)
    return size


def app_bytes(app) -> int:
    held = 0
    for history in (app.history, app.reference_history):  # the second only under --compare
        if history is not None:
            held += history.nbytes + deep_size(history.kept()) + deep_size(history.token_text)
    return held


async def measure(args, model: Path, draft: Path, prompt: str, out: Path) -> list[dict]:
    import mlx.core as mx

    from dflash_tui.app.engine_thread import Launch
    from dflash_tui.app.live import LiveApp

    per_target, per_drafter = kv_bytes_per_position(model, draft)
    # a prompt given is raw text to continue; the sample's own goes through its chat template
    launch = Launch(model=model, draft=draft, prompt=prompt, chat=False if args.prompt else None,
                    gamma=args.block, freeze_loaded=not args.no_freeze, compare=args.compare,
                    max_tokens=args.rounds * (args.block + 1) + 16)
    app = LiveApp(launch, export_dir=out, keep_rounds=args.keep_rounds, show_timings=False)
    samples = []
    async with app.run_test(size=(120, 35)) as pilot:
        while app.loading and app.failure is None:
            await pilot.pause(0.1)
        if app.failure is not None:
            raise SystemExit(f"bench_memory: {app.failure.message}")
        await pilot.press("c")
        t0 = time.perf_counter()
        target = args.every
        while target <= args.rounds and not args.restarts:
            await pilot.pause(0.2)
            if app.history is not None and len(app.history) >= target:
                record = app.live
                samples.append({
                    "rounds": len(app.history), "seconds": round(time.perf_counter() - t0, 1),
                    "rss_mb": rss_bytes() / MB,
                    "kv_mb": kv_bytes(record.position, per_target, per_drafter) / MB,
                    "app_mb": app_bytes(app) / MB,
                    "mlx_active_mb": mx.get_active_memory() / MB,
                    "mlx_cache_mb": mx.get_cache_memory() / MB,
                    "trace_mb": app.trace.stat().st_size / MB if app.trace else 0.0,
                })
                print(json.dumps({k: round(v, 2) if isinstance(v, float) else v
                                  for k, v in samples[-1].items()}), flush=True)
                target += args.every
            elif app.finished is not None or app.failure is not None:
                print(f"bench_memory: the session ended after {len(app.history)} rounds "
                      f"({app.finished or app.failure.message})", file=sys.stderr)
                break
        await pilot.press("c")  # pause the run
        if args.restarts:
            samples = await restarts(args, app, pilot)
    # The engine thread ends after its stage: left running, MLX's threads would be torn
    # down under it as the interpreter exits (an abort after the numbers are out).
    app.engine.join(60)
    return samples


async def restarts(args, app, pilot) -> list[dict]:
    """Restart the session again and again, running --every rounds each time."""
    import mlx.core as mx

    samples = []
    for restart in range(args.restarts + 1):
        while app.running is not None:
            await pilot.pause(0.05)
        if restart:
            await pilot.press("r")
            while app.loading and app.failure is None:
                await pilot.pause(0.05)
        await pilot.press("c")
        while len(app.history) < args.every and app.finished is None and app.failure is None:
            await pilot.pause(0.05)
        await pilot.press("c")
        while app.running is not None:
            await pilot.pause(0.05)
        gc.collect()
        samples.append({"rounds": restart, "restarts": restart, "rss_mb": rss_bytes() / MB,
                        "kv_mb": 0.0, "app_mb": app_bytes(app) / MB,
                        "mlx_active_mb": mx.get_active_memory() / MB,
                        "mlx_cache_mb": mx.get_cache_memory() / MB,
                        "trace_mb": app.trace.stat().st_size / MB if app.trace else 0.0,
                        "collected_objects": len(gc.get_objects()),
                        "frozen_objects": gc.get_freeze_count()})
        print(json.dumps({k: round(v, 2) if isinstance(v, float) else v
                          for k, v in samples[-1].items()}), flush=True)
    return samples


def slope(samples: list[dict], key: str) -> float:
    """Growth per 1,000 rounds between the first and the last sample."""
    first, last = samples[0], samples[-1]
    return (last[key] - first[key]) / max(last["rounds"] - first["rounds"], 1) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", help="MODEL_DIR (default: the tiny fixture pair)")
    parser.add_argument("--draft", help="drafter directory (default: MODEL_DIR/draft)")
    parser.add_argument("--rounds", type=int, default=5000)
    parser.add_argument("--every", type=int, default=500, help="rounds between samples")
    parser.add_argument("--sample", action="store_true", help="the bundled sample pair and its prompt")
    parser.add_argument("--prompt", help="raw text to continue (a decode ends at EOS: on the sample, "
                        "a counting prompt such as '1, 2, 3, 4,' goes on for thousands of tokens)")
    parser.add_argument("--block", type=int, default=4, help="proposals per round")
    parser.add_argument("--keep-rounds", type=int, default=100, help="the app's --keep-rounds")
    parser.add_argument("--json", help="write the samples and the summary here")
    parser.add_argument("--compare", metavar="SPEC", help="run a reference configuration beside "
                        "the drafter, as the app's --compare (e.g. bits=4)")
    parser.add_argument("--restarts", type=int, default=0,
                        help="restart the session N times instead, --every rounds each")
    parser.add_argument("--no-freeze", action="store_true",
                        help="leave the collector as it is after loading (before/after)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        prompt = "The quick brown fox"
        if args.sample:
            from dflash_tui.sample import DEFAULT_PROMPT, sample_drafter, sample_target

            model, draft, prompt = sample_target(), sample_drafter(), DEFAULT_PROMPT
        elif args.model:
            model = Path(args.model)
            draft = Path(args.draft) if args.draft else model / "draft"
        else:
            from fixtures import write_pair

            model, draft = write_pair(Path(tmp) / "pair")
            # The fixture declares 2,048 positions, where a decode now ends (finish reason
            # `context`) after about 2,000 rounds: a long session needs a longer context.
            config = json.loads((model / "config.json").read_text())
            config["max_position_embeddings"] = 1 << 20
            (model / "config.json").write_text(json.dumps(config))
        samples = asyncio.run(measure(args, model, draft, args.prompt or prompt, Path(tmp) / "out"))
    if len(samples) < 2:
        print("bench_memory: fewer than two samples; nothing to compare", file=sys.stderr)
        return 1
    for s in samples:
        s["rss_beyond_mlx_mb"] = s["rss_mb"] - s["mlx_active_mb"] - s["mlx_cache_mb"]
    last = samples[-1]
    per, scale = ("per_restart_mb", 1 / 1000) if args.restarts else ("per_1000_rounds_mb", 1)
    summary = {
        "rounds": last["rounds"], "keep_rounds": args.keep_rounds, "block": args.block,
        "frozen": not args.no_freeze, "compare": args.compare,
        per: {key: round(scale * slope(samples, key), 2) for key in (
            "rss_mb", "kv_mb", "mlx_active_mb", "mlx_cache_mb", "app_mb",
            "rss_beyond_mlx_mb", "trace_mb")},
        "at_the_end_mb": {key: round(last[key], 1) for key in (
            "rss_mb", "kv_mb", "mlx_active_mb", "mlx_cache_mb", "app_mb",
            "rss_beyond_mlx_mb", "trace_mb")},
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps({"samples": samples, "summary": summary}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
