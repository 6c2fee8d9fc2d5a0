"""Engine benchmarks (not tests): probe overhead and the DFlash2 selector walk's host time.

    LD_PRELOAD=$(python -c 'from dflash_tui.blas import openblas_path; print(openblas_path())') \
        python -m benchmarks.bench_engine [--rounds 12] [--draft DIR]     (from the repository root)

1. Round time with probes on vs off, on the sample target, measured in one run with the two
   settings interleaved round by round (so drift hits both alike). Goal: ratio <= 1.10.
2. The selector at Qwen-sized vocab (248,320), K=16, 15 slots: the device part (top-K,
   codebook gathers, edge matrices) and the host walk, timed separately, next to a host
   full sort of the same logits for scale. Goal: walk under 1 ms.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import mlx.core as mx
import numpy as np

from dflash_tui import sample
from dflash_tui.engine import SessionOptions, load_pair
from dflash_tui.engine.draft_config import parse_config
from dflash_tui.engine.drafter import CandidateSelector
from dflash_tui.engine.selector import lattice_arrays, to_lattice, walk

PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


def probe_overhead(draft: Path | None, rounds: int, gamma: int) -> dict:
    model = sample.sample_target()
    if draft is None:
        try:
            draft = sample.sample_drafter()
        except Exception:
            from tests.fixtures import write_sample_shaped_drafter

            draft = write_sample_shaped_drafter(Path(tempfile.mkdtemp()) / "drafter", layers=2)
    pair = load_pair(model, draft)
    target = pair.target
    sessions = {
        flag: pair.open(PROMPT, options=SessionOptions(gamma=gamma, max_tokens=10**6, probes=flag))
        for flag in (True, False)
    }
    # Each session owns the target's cache while it steps, so alternate whole rounds by
    # re-running prefill-free: give each session its own cache snapshot between turns.
    caches = {flag: s.target.cache for flag, s in sessions.items()}
    times = {True: [], False: []}
    for i in range(rounds + 2):
        for flag in (True, False) if i % 2 == 0 else (False, True):
            target.cache = caches[flag]
            t0 = time.perf_counter()
            record = sessions[flag].step_round()
            elapsed = (time.perf_counter() - t0) * 1000
            caches[flag] = target.cache
            if i >= 2:  # warm-up rounds excluded
                times[flag].append(elapsed)
    on, off = statistics.median(times[True]), statistics.median(times[False])
    return {"rounds": rounds, "gamma": gamma, "probes_on_ms": on, "probes_off_ms": off,
            "ratio": on / off, "probe_rows": len(record.probes) if record else 0,
            "backend": sessions[True].info.backend}


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
    mx.eval(selector.parameters(), hidden_rows, logits)
    hproj = selector.hidden_projection(hidden_rows)
    mx.eval(hproj)

    device, host, host_sampled = [], [], []
    rng = np.random.default_rng(0)
    for _ in range(repeats):
        t0 = time.perf_counter()
        arrays = lattice_arrays(selector, hproj, logits, anchor=7, top_k=k)
        mx.eval(*arrays)
        lattice = to_lattice(*(np.array(a) for a in arrays))
        t1 = time.perf_counter()
        walk(lattice, 0.0, None)
        t2 = time.perf_counter()
        walk(lattice, 0.8, rng)
        t3 = time.perf_counter()
        device.append((t1 - t0) * 1000)
        host.append((t2 - t1) * 1000)
        host_sampled.append((t3 - t2) * 1000)
    logits_np = np.array(logits)
    t0 = time.perf_counter()
    np.argsort(-logits_np, axis=-1)
    full_sort = (time.perf_counter() - t0) * 1000
    return {"vocab": vocab, "k": k, "slots": slots,
            "walk_host_ms_greedy": statistics.median(host),
            "walk_host_ms_sampled": statistics.median(host_sampled),
            "device_topk_edges_ms": statistics.median(device),
            "host_full_sort_ms": full_sort}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--gamma", type=int, default=7)
    parser.add_argument("--draft", type=Path)
    args = parser.parse_args()
    walk_numbers = selector_walk()
    print("selector walk at vocab {vocab:,}, K={k}, {slots} slots: host walk "
          "{walk_host_ms_greedy:.3f} ms greedy / {walk_host_ms_sampled:.3f} ms sampled; "
          "device top-K + edges {device_topk_edges_ms:.1f} ms; a host full sort of the same "
          "logits takes {host_full_sort_ms:.1f} ms".format(**walk_numbers))
    overhead = probe_overhead(args.draft, args.rounds, args.gamma)
    print("round time on the sample target ({backend}, gamma {gamma}, median of {rounds} rounds): "
          "probes on {probes_on_ms:.1f} ms, off {probes_off_ms:.1f} ms, ratio {ratio:.3f} "
          "({probe_rows} probe rows per round)".format(**overhead))


if __name__ == "__main__":
    main()
