"""Engine benchmarks (not tests): what probes and ranks cost, stage by stage, and the DFlash2
selector's walk.

    LD_PRELOAD=$(python -c 'from dflash_tui.blas import openblas_path; print(openblas_path())') \
        python -m benchmarks.bench_engine [--rounds 12] [--block 7] [--draft DIR] [--json F]

(from the repository root; LD_PRELOAD only on a Linux CPU.)

1. On the sample target, sessions that differ in one setting step in turn, round by round
   (so drift hits all alike), each owning the target's cache while it steps:
     chained rounds (`step_round`): neither probes nor ranks (the bench), probes only,
     ranks only, both (the TUI); goal: probes / neither <= 1.10;
     stage by stage (`step_stage`, each stage waited for), probes off and on: each stage's
     median, so the probes' cost is seen where it lands.
2. The selector at Qwen's vocabulary (248,320), K=16, 15 slots: the lattice on the device
   (top-K, codebook gathers, edge matrices), the greedy walk on the device (what a round at
   temperature 0 runs), and the host walk of sampling (after reading the lattice back), next
   to a host full sort of the same logits for scale.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Optional, Union

import mlx.core as mx
import numpy as np

from benchmarks import common
from benchmarks.common import finish
from dflash_tui import sample
from dflash_tui.engine import SessionOptions, load_pair
from dflash_tui.engine.api import Pair
from dflash_tui.engine.draft_config import parse_config
from dflash_tui.engine.device_walk import greedy_walk
from dflash_tui.engine.drafter import CandidateSelector
from dflash_tui.engine.records import STAGE_ORDER
from dflash_tui.engine.selector import lattice_arrays, to_lattice, walk

PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."
NEITHER, PROBES, RANKS, BOTH = "neither", "probes", "ranks", "probes + ranks"


def interleaved(pair: Pair, configs: dict[str, SessionOptions], rounds: int,
                step: Union[Callable, dict[str, Callable]], prompt: str = PROMPT,
                warm_up: int = 2) -> dict[str, list]:
    """step(session) for each config in turn (or step[name](session), one per config),
    `rounds` times after `warm_up` turns; the first config of a turn rotates. Each session
    steps on its own target cache, swapped in for its turn."""
    target = pair.target
    sessions, caches = {}, {}
    for name, options in configs.items():
        sessions[name] = pair.open(prompt, options=options)
        caches[name] = target.cache  # its prefill made a new one: take it before the next does
    steps = step if isinstance(step, dict) else dict.fromkeys(sessions, step)
    names = list(sessions)
    out: dict[str, list] = {name: [] for name in names}
    for i in range(rounds + warm_up):
        for name in names[i % len(names):] + names[:i % len(names)]:
            target.cache = caches[name]
            result = steps[name](sessions[name])
            caches[name] = target.cache
            if i >= warm_up:
                out[name].append(result)
    for session in sessions.values():
        session.close()
    return out


def timed_round(session) -> float:
    t0 = time.perf_counter()
    session.step_round()
    return (time.perf_counter() - t0) * 1000


def stage_times(session) -> tuple[float, ...]:
    records = [session.step_stage() for _ in STAGE_ORDER]
    return tuple(r.stages[-1].ms for r in records)


def probes_and_ranks(draft: Optional[Path], rounds: int, gamma: int, dtype: str) -> dict:
    pair = load_pair(sample.sample_target(), draft or _drafter(), dtype=dtype)
    base = SessionOptions(gamma=gamma, max_tokens=10 ** 6, probes=False, ranks=False)
    chained = interleaved(pair, {
        NEITHER: base, PROBES: replace(base, probes=True), RANKS: replace(base, ranks=True),
        BOTH: replace(base, probes=True, ranks=True)}, rounds, timed_round)
    medians = {name: statistics.median(v) for name, v in chained.items()}
    stepped = interleaved(pair, {NEITHER: base, PROBES: replace(base, probes=True)}, rounds,
                          stage_times)
    stages = {name: dict(zip(STAGE_ORDER, (statistics.median(s) for s in zip(*rows))))
              for name, rows in stepped.items()}
    return {"backend": "gpu" if mx.default_device() == mx.gpu else "cpu", "gamma": gamma,
            "rounds": rounds, "round_ms": medians,
            "ratio": {name: medians[name] / medians[NEITHER] for name in medians},
            "stage_ms": stages}


def _drafter() -> Path:
    try:
        return sample.sample_drafter()
    except Exception:
        from tests.fixtures import write_sample_shaped_drafter

        return write_sample_shaped_drafter(Path(tempfile.mkdtemp()) / "drafter", layers=2)


def selector_walk(vocab: int = 248_320, k: int = 16, slots: int = 15, rank: int = 32,
                  hidden: int = 1024, repeats: int = 50) -> dict:
    config = parse_config({
        "architectures": ["DFlash2DraftModel"], "hidden_size": hidden, "num_hidden_layers": 1,
        "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128,
        "intermediate_size": 2048, "vocab_size": vocab, "rms_norm_eps": 1e-6,
        "max_position_embeddings": 4096, "num_target_layers": 32,
        "dflash_config": {"target_layer_ids": [1], "mask_token_id": 0, "block_size": slots + 1,
                          "conv_kernel_size": 4, "conv_group_size": 64, "selector_rank": rank,
                          "selector_top_k": k},
    })
    selector = CandidateSelector(config)
    selector.predecessor_codebook = mx.random.normal((vocab, rank)) * 0.1
    selector.successor_codebook = mx.random.normal((vocab, rank)) * 0.1
    hidden_rows = mx.random.normal((slots, hidden))
    logits = mx.random.normal((slots, vocab)) * 3
    hproj = selector.hidden_projection(hidden_rows)
    mx.eval(selector.parameters(), logits, hproj)

    lattice_ms, device_ms, host, host_sampled = [], [], [], []
    rng = np.random.default_rng(0)
    for _ in range(repeats):
        t0 = time.perf_counter()
        arrays = lattice_arrays(selector, hproj, logits, anchor=7, top_k=k)
        mx.eval(*arrays)
        t1 = time.perf_counter()
        mx.eval(greedy_walk(arrays[1], arrays[2], arrays[3]))
        t2 = time.perf_counter()
        lattice = to_lattice(*(np.array(a) for a in arrays))
        walk(lattice, 0.0, None)
        t3 = time.perf_counter()
        walk(lattice, 0.8, rng)
        t4 = time.perf_counter()
        lattice_ms.append((t1 - t0) * 1000)
        device_ms.append((t2 - t1) * 1000)
        host.append((t3 - t2) * 1000)
        host_sampled.append((t4 - t3) * 1000)
    logits_np = np.array(logits)
    t0 = time.perf_counter()
    np.argsort(-logits_np, axis=-1)
    full_sort = (time.perf_counter() - t0) * 1000
    return {"vocab": vocab, "k": k, "slots": slots,
            "device_lattice_ms": statistics.median(lattice_ms),
            "device_walk_ms": statistics.median(device_ms),
            "host_read_and_walk_ms": statistics.median(host),
            "host_walk_sampled_ms": statistics.median(host_sampled),
            "host_full_sort_ms": full_sort}


def report(result: dict) -> str:
    w = result["walk"]
    lines = [
        f"selector at vocab {w['vocab']:,}, K={w['k']}, {w['slots']} slots: lattice on the device "
        f"{w['device_lattice_ms']:.2f} ms; greedy walk on the device {w['device_walk_ms']:.2f} ms; "
        f"read back + host walk {w['host_read_and_walk_ms']:.3f} ms (sampled walk "
        f"{w['host_walk_sampled_ms']:.3f} ms); a host full sort of the logits {w['host_full_sort_ms']:.1f} ms",
    ]
    p = result["probes"]
    lines.append(f"sample target ({p['backend']}, block {p['gamma']}, median of {p['rounds']} "
                 "chained rounds, interleaved):")
    for name, ms in p["round_ms"].items():
        lines.append(f"  {name:16} {ms:8.1f} ms  x{p['ratio'][name]:.3f}")
    lines.append("stage by stage, each stage waited for (median ms):")
    lines.append("  " + " " * 16 + "".join(f"{s:>9}" for s in STAGE_ORDER))
    for name, stages in p["stage_ms"].items():
        lines.append(f"  {name:16}" + "".join(f"{stages[s]:9.1f}" for s in STAGE_ORDER))
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> dict:
    parser = common.parser(__doc__, "float32")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--draft", type=Path)
    args = parser.parse_args(argv)
    result = {"walk": selector_walk(),
              "probes": probes_and_ranks(args.draft, args.rounds, args.block, args.dtype)}
    return finish(result, report, args.json)


if __name__ == "__main__":
    main()
