"""`dflash-tui probe`: step the engine headless, one line per round, snapshots on request."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from . import sample
from .engine.api import load_pair
from .engine.codec import encode
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
    if record.compare is not None:
        line += compare_note(record.compare)
    return line


def compare_note(compare) -> str:
    """--compare: the reference's accepted count and where it first parts from the primary."""
    note = f"  | reference accepted {compare.accepted:2d}"
    first = compare.first_divergent
    if first is not None:
        note += f"  DIVERGES: {first.where} ({first.why})"
    return note


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
                     progress=_say, compare=args.compare, compare_tol=args.compare_tol)
    session = pair.open(prompt, options=options, chat=args.chat, progress=_say)
    info = session.info
    _say(f"{info.drafter_kind} drafter ({info.drafter_layers} layers) on {info.target_kind} "
         f"target ({info.target_layers} layers), {info.dtype} on {info.backend}; "
         f"{session.gamma} proposals per round; rollback by {info.rollback_kind}")
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
    if args.compare:
        print(compare_total(records, args.compare.text))
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
            **(compare_summary(records, args.compare.text) if args.compare else {}),
        })
        _say(f"wrote {len(records)} snapshots and summary.json to {out}")
    session.close()
    return 0


def compare_total(records, spec: str) -> str:
    diverged = [r for r in records if r.compare.first_divergent]
    line = (f"--- reference {spec}: mean accepted "
            f"{_mean([r.compare.accepted for r in records]):.2f}; diverges beyond "
            f"{records[0].compare.tolerance if records else 0:g} in {len(diverged)} of "
            f"{len(records)} rounds")
    if diverged:
        line += f", first in round {diverged[0].round} at {diverged[0].compare.first_divergent.where}"
    return line


def compare_summary(records, spec: str) -> dict:
    accepted = [r.compare.accepted for r in records]
    return {
        "compare": spec,
        "compare_accepted_per_round": accepted,
        "compare_mean_accepted": _mean(accepted),
        "compare_first_divergent": next(
            ({"round": r.round, **encode(r.compare.first_divergent)}
             for r in records if r.compare.first_divergent), None),
    }


def _mean(values) -> float:
    return sum(values) / len(values) if values else 0.0
