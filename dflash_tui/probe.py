"""`dflash-tui probe`: step the engine headless, one line per round, snapshots on request."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from . import sample
from .engine.api import load_pair
from .engine.session import SessionOptions
from .snapshot import SUMMARY_SCHEMA, export_round, session_json, write_json

DEFAULT_MAX_TOKENS = 64


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def round_line(record) -> str:
    bonus = record.text(record.bonus)
    bad = record.first_nonfinite
    line = (
        f"round {record.round:4d}  pos {record.position:5d}  proposals {record.gamma:2d}  "
        f"accepted {record.accepted:2d}  bonus {bonus!r}"
    )
    if record.rollback.kind != "none":
        line += f"  {record.rollback.kind} {record.rollback.rows}"
    if bad is not None:
        line += f"  FIRST NON-FINITE: {bad.where}"
    if record.comm is not None:
        line += f"  comm {record.comm.total_ms:.1f} ms"
    return line


def distributed_line(d) -> str:
    return (f"target sharded over {d.world_size} ranks ({d.backend}, {d.sharding} parallel: "
            f"{d.per_rank} per rank); {d.collectives_per_forward} all_sums per forward, "
            f"{d.all_sum_us:.0f} us each (+{d.all_sum_us_per_row:.1f} us per row)")


def run(args) -> int:
    model, draft = sample.resolve(args.model, args.draft)
    prompt = args.prompt_text if args.prompt_text is not None else sample.DEFAULT_PROMPT
    max_tokens = args.max_tokens or (10**9 if args.rounds else DEFAULT_MAX_TOKENS)
    options = SessionOptions(
        gamma=args.block, temperature=args.temperature, seed=args.seed, max_tokens=max_tokens,
        probes=not args.no_probes, keep_raw=args.npz, layer_offset=args.layer_offset,
    )
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    pair = load_pair(model, draft, dtype=args.dtype, keep_quantized=args.keep_quantized,
                     progress=_say, mesh=getattr(args, "mesh", None))
    session = pair.open(prompt, options=options, chat=args.chat, progress=_say)
    info = session.info
    _say(f"{info.drafter_kind} drafter ({info.drafter_layers} layers) on {info.target_kind} "
         f"target ({info.target_layers} layers), {info.dtype} on {info.backend}; "
         f"{session.gamma} proposals per round; rollback by {info.rollback_kind}")
    if info.distributed is not None:
        _say(distributed_line(info.distributed))
    for note in info.notes:
        _say(f"note: {note}")
    t0 = time.perf_counter()
    records = []
    for record in session.run(args.rounds):
        records.append(record)
        print(round_line(record), flush=True)
        if out is not None:
            export_round(out, record, info, npz=args.npz)
    seconds = time.perf_counter() - t0
    generated = session.generated
    text = pair.target.tokenizer.decode(generated)
    print(f"--- {len(generated)} tokens in {len(records)} rounds, {seconds:.2f} s "
          f"({len(generated) / max(seconds, 1e-9):.1f} tokens/s); "
          f"mean accepted {_mean([r.accepted for r in records]):.2f}")
    print(text)
    if out is not None:
        write_json(out / "summary.json", {
            "schema": SUMMARY_SCHEMA,
            "session": session_json(info),
            "tokens": generated,
            "text": text,
            "rounds": len(records),
            "accepted_per_round": [r.accepted for r in records],
            "committed_per_round": [len(r.committed_tokens) for r in records],
            "mean_accepted": _mean([r.accepted for r in records]),
            "finish_reason": session.finished,
            "first_nonfinite": next(
                ({"round": r.round, "stage": r.first_nonfinite.stage, "layer": r.first_nonfinite.layer,
                  "name": r.first_nonfinite.name} for r in records if r.first_nonfinite), None),
            "seconds": seconds,
        })
        _say(f"wrote {len(records)} snapshots and summary.json to {out}")
    session.close()
    return 0


def _mean(values) -> float:
    return sum(values) / len(values) if values else 0.0
