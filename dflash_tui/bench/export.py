"""The full numbers as JSON (everything, per cell and per run) and CSV (one row per workload
and block). Both are written atomically (temp file + rename), so a reader never sees half a
file. docs/BENCH.md lists every field."""

from __future__ import annotations

import csv
import io
import os
import platform
from dataclasses import asdict
from typing import Callable, Optional

from ..engine.baseline import Divergence
from ..engine.records import STAGE_ORDER
from .compare import to_json as compare_json
from .runner import BenchResult
from .slots import stats_of
from .slots import to_json as slots_json
from .stats import Cell, SpecRun

SCHEMA = "dflash-tui.bench/1"
Decode = Callable[[list[int]], str]


def _divergence(d: Optional[Divergence]) -> Optional[dict]:
    if d is None:
        return None
    return {"index": d.index, "position": d.position, "reference": d.reference,
            "candidate": d.candidate, "margin": d.margin, "target_top": asdict(d.target),
            "candidate_logit": d.candidate_logit}


def cell_json(c: Cell) -> dict:
    span = c.conditional_range
    return {
        "workload": c.workload, "block": c.block, "prompts": c.prompts, "rounds": c.rounds,
        "tokens": c.tokens, "accepted": c.accepted, "mean_accepted": c.mean_accepted,
        "tau": c.tau, "rollbacks": c.rollbacks, "rollback_rate": c.rollback_rate,
        "tokens_per_round": c.tokens_per_round,
        "alpha_min": None if span is None else span[0],
        "alpha_max": None if span is None else span[1],
        "per_position": [{"position": p.position, "proposed": p.proposed, "reached": p.reached,
                          "eligible": p.eligible, "acceptance": p.acceptance,
                          "conditional": p.conditional} for p in c.positions],
        "checked": c.checked, "diverged": c.diverged,
        "nonfinite_logit_rounds": c.nonfinite_logit_rounds,
        "speed": {  # wall clock: not reproducible to the digit
            "decode_tokens": c.decode_tokens, "decode_seconds": c.decode_s,
            "tokens_per_s": c.tokens_per_s, "target_decode_tokens": c.target_decode_tokens,
            "target_decode_seconds": c.target_decode_s,
            "target_tokens_per_s": c.target_tokens_per_s, "speedup": c.speedup,
            "stage_ms_per_round": dict(zip(STAGE_ORDER, c.stage_ms)),
            # --compare: the reference's own time per round, in decode_seconds (the wall
            # clock) and in no stage's; absent without a reference
            **({} if c.compare_ms is None else {"compare_ms_per_round": c.compare_ms}),
        },
    }


def _run_json(run: SpecRun, decode: Optional[Decode]) -> dict:
    out = {
        "prompt": run.prompt.id, "workload": run.prompt.workload, "block": run.block,
        "tokens": len(run.tokens), "finish_reason": run.finish_reason, "rounds": len(run.rounds),
        "gamma_per_round": [r.gamma for r in run.rounds],
        "accepted_per_round": [r.accepted for r in run.rounds],
        "committed_per_round": [r.committed for r in run.rounds],
        # per round, how many proposal slots' drafter logits held a NaN or Inf
        "nonfinite_logit_slots_per_round": [r.nonfinite_logit_count for r in run.rounds],
        "nonfinite_logit_rounds": run.nonfinite_logit_rounds,
        "lossless": (run.divergence is None) if run.checked else None,
        "divergence": _divergence(run.divergence),
        "speed": {"prefill_seconds": run.prefill_s, "decode_seconds": run.decode_s},
    }
    if run.rounds and run.rounds[0].compare_accepted is not None:
        out["compare_accepted_per_round"] = [r.compare_accepted for r in run.rounds]
    if run.divergence is not None and decode is not None:
        out["text"] = decode(list(run.tokens))
    return out


def machine_json() -> dict:
    import mlx.core as mx

    return {"platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "mlx": getattr(mx, "__version__", "unknown"),
            "device": str(mx.default_device()),
            "blas": os.environ.get("DFLASH_TUI_BLAS", "reference")}


def to_json(result: BenchResult, *, command: Optional[list[str]] = None,
            prompts_dir: str = "", limit: Optional[int] = None,
            decode: Optional[Decode] = None) -> dict:
    s, info = result.settings, result.info
    identity = {}
    if info is not None:
        identity = {
            "target": {"path": info.target_path, "kind": info.target_kind,
                       "layers": info.target_layers, "hidden": info.target_hidden,
                       "vocab": info.vocab_size, "rollback": info.rollback_kind},
            "drafter": {"path": info.drafter_path, "kind": info.drafter_kind,
                        "layers": info.drafter_layers, "hidden": info.drafter_hidden,
                        "block_size": info.block_size, "target_layer_ids": list(info.target_layer_ids),
                        "mask_token_id": info.mask_token_id, "top_k": info.top_k,
                        # its packing ("q8/g64, float: codebooks"; null: float): a quantized
                        # drafter and its float original can share a path and a shape
                        "quantization": info.drafter_quantization},
            "dtype": info.dtype, "backend": info.backend,
        }
    return {
        "schema": SCHEMA,
        "complete": result.complete,
        "command": command,  # an equivalent command line, to reproduce the run
        **identity,
        "settings": {"blocks": list(s.blocks), "max_tokens": s.max_tokens,
                     "temperature": s.temperature, "seed": s.seed, "chat": s.chat,
                     "layer_offset": s.layer_offset, "dtype": s.dtype, "oracle": s.oracle,
                     "slots": s.slots,
                     "prompts": prompts_dir, "limit": limit},
        "workloads": {w.name: [p.id for p in w.prompts] for w in result.workloads},
        "lossless": result.lossless,
        "notes": {str(b): list(n) for b, n in sorted(result.notes.items())},
        "cells": [cell_json(c) for c in result.cells()],
        **({"compare": compare_json(result)} if result.compare else {}),
        **({"slots": slots_json(stats_of(result))} if result.slots is not None else {}),
        "runs": [_run_json(r, decode) for r in result.spec_runs],
        "target_alone": [
            {"prompt": t.prompt.id, "tokens": len(t.run.tokens),
             "finish_reason": t.run.finish_reason,
             # the first generated token picked from NaN/Inf logits (null: none was)
             "nonfinite_at": t.run.nonfinite_at,
             **({"text": decode(list(t.run.tokens))} if decode else {}),
             "speed": {"prefill_seconds": t.run.prefill_s, "decode_seconds": t.run.decode_s}}
            for t in result.target_runs
        ],
        "machine": machine_json(),
        "wall_seconds": result.wall_s,
    }


def csv_header(blocks) -> list[str]:
    width = max(blocks)
    return (["workload", "block", "prompts", "rounds", "tokens", "accepted", "mean_accepted",
             "tau", "rollbacks", "rollback_rate", "alpha_min", "alpha_max"]
            + [f"accept_at_{i}" for i in range(1, width + 1)]
            + [f"alpha_{i}" for i in range(1, width + 1)]
            + ["decode_tokens", "decode_seconds", "tokens_per_s", "target_tokens_per_s",
               "speedup", "checked", "diverged", "nonfinite_logit_rounds"])


def _csv_value(v) -> str:
    return "" if v is None else repr(v) if isinstance(v, float) else str(v)


def to_csv(result: BenchResult) -> str:
    blocks = result.settings.blocks
    width = max(blocks)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(csv_header(blocks))
    for c in result.cells():
        span = c.conditional_range or (None, None)
        pad = [None] * (width - len(c.positions))
        writer.writerow([_csv_value(v) for v in (
            [c.workload, c.block, c.prompts, c.rounds, c.tokens, c.accepted, c.mean_accepted,
             c.tau, c.rollbacks, c.rollback_rate, span[0], span[1]]
            + [p.acceptance for p in c.positions] + pad
            + [p.conditional for p in c.positions] + pad
            + [c.decode_tokens, c.decode_s, c.tokens_per_s, c.target_tokens_per_s, c.speedup,
               c.checked, c.diverged, c.nonfinite_logit_rounds])])
    return buffer.getvalue()
