"""Memory of a long headless run (not a test): does `probe` stay flat beyond its KV cache?

    python benchmarks/bench_memory_headless.py [--rounds 2500] [--every 250] [--model DIR | --sample]

Runs the real command, `dflash-tui probe MODEL --rounds N` (once with --no-probes, once
with probes), as a child process on the tiny llama fixture (tests/fixtures.py, written to a
temp folder), on --model or on the bundled sample (--sample), and samples the child's
resident set size (VmRSS) as its round lines come out, with MLX's allocator as the child
sees it: memory in live arrays (the caches among them) and freed buffers it keeps for
reuse (mx.get_active_memory / get_cache_memory; the child appends them to each round line,
nothing else changes). The KV caches grow with every committed token by design; their size
at each sample is computed from the two configs (the target's mlx-lm KVCache grows in steps
of 256 positions; the drafter's context cache holds one row per position), and what the run
grew beyond them is reported:

    grown beyond KV = (RSS now - RSS at the first sample) - (KV now - KV at the first sample)

The first sample is taken after --warm-up rounds, once imports, loading and first-call
allocations are done. Goal (issue 14): under 20 MB beyond the KV cache over 2,500 rounds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from dflash_tui.blas import openblas_path  # noqa: E402

KV_STEP = 256  # mlx_lm.models.cache.KVCache.step
FLOAT32 = 4
ROUND_LINE = re.compile(r"^round\s+(\d+)\s+pos\s+(\d+).*  mlx (\d+) (\d+)$")
# `dflash-tui probe ...` in the child, its round lines ending with MLX's allocator numbers.
CHILD = """
import sys
import mlx.core as mx
from dflash_tui import cli, probe
line = probe.round_line
probe.round_line = lambda record: f"{line(record)}  mlx {mx.get_active_memory()} {mx.get_cache_memory()}"
sys.exit(cli.main(sys.argv[1:]))
"""


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def model_config(model: Path) -> dict:
    """A target's config: its config.json, or what the loader makes of a GGUF's metadata."""
    if model.suffix != ".gguf":
        return json.loads((model / "config.json").read_text())
    from dflash_tui.engine.gguf import llama_config, read_gguf

    return llama_config(model, read_gguf(model)[1])


def kv_bytes_per_position(model: Path, draft: Path) -> tuple[int, int]:
    """(target, drafter) cache bytes per position, float32 K and V of every layer."""
    target = model_config(model)
    drafter = json.loads((draft / "config.json").read_text())

    def per_position(config: dict) -> int:
        head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        kv_heads = config.get("num_key_value_heads", config["num_attention_heads"])
        return config["num_hidden_layers"] * 2 * kv_heads * head_dim * FLOAT32

    return per_position(target), per_position(drafter)


def kv_bytes(positions: int, per_target: int, per_drafter: int) -> int:
    return math.ceil(positions / KV_STEP) * KV_STEP * per_target + positions * per_drafter


def run(model: Path, draft: Path, prompt: str, rounds: int, every: int, warm_up: int,
        probes: bool) -> list[dict]:
    per_target, per_drafter = kv_bytes_per_position(model, draft)
    argv = [sys.executable, "-c", CHILD, "probe", str(model), "--draft", str(draft),
            "--prompt", prompt, "--raw", "--rounds", str(rounds)]
    if not probes:
        argv.append("--no-probes")
    env = dict(os.environ)
    library = openblas_path()  # as the console script re-executes itself (dflash_tui/blas.py)
    if library and env.get("DFLASH_TUI_BLAS") != "reference":
        env["LD_PRELOAD"] = ":".join(p for p in (library, env.get("LD_PRELOAD", "")) if p)
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    samples, done = [], 0
    for line in child.stdout:
        found = ROUND_LINE.match(line)
        if not found:
            continue
        done, position = int(found.group(1)) + 1, int(found.group(2))
        if done == warm_up or (done > warm_up and done % every == 0) or done == rounds:
            samples.append({"rounds": done, "position": position, "rss": rss_bytes(child.pid),
                            "kv": kv_bytes(position, per_target, per_drafter),
                            "mlx_active": int(found.group(3)), "mlx_cache": int(found.group(4))})
    child.wait()
    if child.returncode != 0:
        raise SystemExit(f"probe exited {child.returncode}: {' '.join(argv)}")
    if done < rounds:
        print(f"note: the decode ended (EOS) after {done} of {rounds} rounds; sampled up to "
              f"round {samples[-1]['rounds'] if samples else 0}", file=sys.stderr)
    return samples


def _beyond(start: dict, end: dict) -> int:
    return (end["rss"] - start["rss"]) - (end["kv"] - start["kv"])


def report(label: str, samples: list[dict]) -> None:
    first = samples[0]
    print(f"\n{label}")
    print(f"{'rounds':>7} {'position':>9} {'RSS MB':>8} {'KV MB':>7} {'grown MB':>9} "
          f"{'KV grown':>9} {'beyond KV':>10} {'MLX arrays':>11} {'MLX cache':>10}")
    for s in samples:
        grown, kv_grown = s["rss"] - first["rss"], s["kv"] - first["kv"]
        print(f"{s['rounds']:7d} {s['position']:9d} {s['rss'] / 2**20:8.1f} {s['kv'] / 2**20:7.2f} "
              f"{grown / 2**20:9.2f} {kv_grown / 2**20:9.2f} {(grown - kv_grown) / 2**20:10.2f} "
              f"{s['mlx_active'] / 2**20:11.2f} {s['mlx_cache'] / 2**20:10.2f}")
    last = samples[-1]
    beyond = _beyond(first, last)
    span = last["rounds"] - first["rounds"]
    print(f"beyond the KV cache: {beyond / 2**20:.2f} MB over {span} rounds "
          f"({beyond / max(span, 1) / 1024:.2f} KB per round)")
    cache = last["mlx_cache"] - first["mlx_cache"]
    print(f"MLX over the same rounds: arrays {(last['mlx_active'] - first['mlx_active']) / 2**20:+.2f} MB, "
          f"buffer cache {cache / 2**20:+.2f} MB (bounded: engine/memory.py); beyond the KV cache "
          f"and the buffer cache: {(beyond - cache) / 2**20:.2f} MB")
    # A leak grows at a steady rate; a bounded cache (MLX keeps freed buffers for reuse, up
    # to its cache limit) grows early and then stops. The second half's rate tells them apart.
    middle = samples[len(samples) // 2]
    if middle is not last:
        rate = _beyond(middle, last) / (last["rounds"] - middle["rounds"])
        print(f"rate over rounds {middle['rounds']}..{last['rounds']}: {rate / 1024:.2f} KB per round")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2500)
    parser.add_argument("--every", type=int, default=250, help="sample RSS every N rounds")
    parser.add_argument("--warm-up", type=int, default=50, help="rounds before the first sample")
    parser.add_argument("--model", type=Path, help="target directory or .gguf (default: the tiny fixture)")
    parser.add_argument("--draft", type=Path, help="drafter directory (default: MODEL/draft)")
    parser.add_argument("--sample", action="store_true", help="the bundled sample pair (GGUF target, shipped drafter)")
    parser.add_argument("--prompt", default="The quick brown fox",
                        help="raw text to continue (a run stops early at EOS: on the sample, a "
                             "counting prompt such as '1, 2, 3, 4,' goes on for thousands of tokens)")
    args = parser.parse_args()
    if args.sample:
        from dflash_tui.sample import sample_drafter, sample_target

        model, draft = sample_target(), sample_drafter()
    elif args.model is None:
        from fixtures import write_pair

        model, draft = write_pair(Path(tempfile.mkdtemp(prefix="dflash-memory-")))
    else:
        model, draft = args.model, args.draft or args.model / "draft"
    per_target, per_drafter = kv_bytes_per_position(model, draft)
    print(f"target {model}; KV per position: target {per_target} B (in steps of {KV_STEP}), "
          f"drafter {per_drafter} B; pid {os.getpid()}")
    for probes in (False, True):
        label = f"probe --rounds {args.rounds}" + ("" if probes else " --no-probes")
        samples = run(model, draft, args.prompt, args.rounds, args.every, args.warm_up, probes)
        if not samples:
            raise SystemExit(f"bench_memory_headless: the decode of {args.prompt!r} ended before "
                             f"round {args.warm_up}, the first sample; give a prompt that runs longer")
        report(label, samples)


if __name__ == "__main__":
    main()
