"""Round records <-> the snapshot JSON of docs/SNAPSHOT.md, plus atomic file writes.

Pure Python (no MLX): replay rebuilds the very same records from a trace with no model.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Optional

from .engine.files import write_atomic
from .engine.records import (
    EngineState, PrefillRecord, ProbeRow, Rollback, RoundRecord, Selector, SelectorSlot,
    SessionInfo, SlotRank, StageRecord, TopToken,
)

SNAPSHOT_SCHEMA = "dflash-tui/snapshot@1"
TRACE_SCHEMA = "dflash-tui/trace@1"
SUMMARY_SCHEMA = "dflash-tui/summary@1"


def _finite(x):
    """JSON has no inf/nan: such floats are written as null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _clean(obj):
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return _finite(obj)


def state_json(state: EngineState) -> dict:
    return asdict(state)


def probe_json(row: ProbeRow) -> dict:
    d = asdict(row)
    d["shape"] = list(row.shape)
    return d


def session_json(info: SessionInfo) -> dict:
    return _clean(asdict(info))


def round_json(record: RoundRecord, info: Optional[SessionInfo] = None) -> dict:
    first = record.first_nonfinite
    out = {
        "schema": SNAPSHOT_SCHEMA,
        "round": record.round,
        "position": record.position,
        "anchor": record.anchor,
        "gamma": record.gamma,
        "stage": record.stage,
        "proposals": list(record.proposals) if record.proposals is not None else None,
        "target_tokens": list(record.target_tokens) if record.target_tokens is not None else None,
        "accepted": record.accepted,
        "bonus": record.bonus,
        "committed_tokens": list(record.committed_tokens),
        "ranks": [asdict(r) for r in record.ranks],
        "probes": [probe_json(p) for p in record.probes],
        "first_nonfinite": None if first is None else
            {"stage": first.stage, "layer": first.layer, "name": first.name},
        "selector": None if record.selector is None else asdict(record.selector),
        "state": {"before": state_json(record.state_before),
                  "after": state_json(record.state_after)},
        "stages": [{"stage": s.stage, "before": state_json(s.before),
                    "after": state_json(s.after), "ms": s.ms} for s in record.stages],
        "rollback": asdict(record.rollback),
        "timings_ms": record.timings_ms,
        "committed_text": record.committed_text,
        "finish_reason": record.finish_reason,
        "token_text": {str(k): v for k, v in record.token_text.items()},
    }
    if info is not None:
        out["session"] = session_json(info)
    return _clean(out)


def _build(cls, data: dict):
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


def _state(d: dict) -> EngineState:
    return _build(EngineState, d)


def round_from_json(d: dict) -> RoundRecord:
    """Rebuild the RoundRecord a snapshot or trace line was written from."""
    probes = tuple(_build(ProbeRow, {**p, "shape": tuple(p["shape"])}) for p in d["probes"])
    first = None
    if d.get("first_nonfinite"):
        f = d["first_nonfinite"]
        first = next((p for p in probes if (p.stage, p.layer, p.name) == (f["stage"], f["layer"], f["name"])), None)
    ranks = tuple(
        _build(SlotRank, {**r, "drafter_top": tuple(_build(TopToken, t) for t in r.get("drafter_top", ())),
                          "target_top": tuple(_build(TopToken, t) for t in r.get("target_top", ()))})
        for r in d.get("ranks", ())
    )
    selector = None
    if d.get("selector"):
        s = d["selector"]
        slots = tuple(
            _build(SelectorSlot, {
                **slot,
                **{k: tuple(slot[k]) for k in ("candidates", "unary", "edge", "score")},
                "lattice": tuple(tuple(row) for row in slot["lattice"]),
                "q": None if slot.get("q") is None else tuple(slot["q"]),
            })
            for slot in s["slots"]
        )
        selector = Selector(top_k=s["top_k"], slots=slots)
    stages = tuple(StageRecord(s["stage"], _state(s["before"]), _state(s["after"]), s["ms"])
                   for s in d.get("stages", ()))
    return RoundRecord(
        round=d["round"], position=d["position"], anchor=d["anchor"], gamma=d["gamma"],
        state_before=_state(d["state"]["before"]), state_after=_state(d["state"]["after"]),
        stages=stages, probes=probes, first_nonfinite=first,
        proposals=None if d.get("proposals") is None else tuple(d["proposals"]),
        selector=selector,
        target_tokens=None if d.get("target_tokens") is None else tuple(d["target_tokens"]),
        ranks=ranks, accepted=d.get("accepted"), bonus=d.get("bonus"),
        committed_tokens=tuple(d.get("committed_tokens", ())),
        rollback=_build(Rollback, d.get("rollback") or {}),
        committed_text=d.get("committed_text", ""), finish_reason=d.get("finish_reason"),
        token_text={int(k): v for k, v in d.get("token_text", {}).items()},
    )


def session_from_json(d: dict) -> SessionInfo:
    d = dict(d)
    d["target_layer_ids"] = tuple(d.get("target_layer_ids", ()))
    d["notes"] = tuple(d.get("notes", ()))
    return _build(SessionInfo, d)


def prefill_json(p: PrefillRecord) -> dict:
    return _clean({"first_token": p.first_token, "first_text": p.first_text,
                   "state": state_json(p.state), "ms": p.ms,
                   "probes": [probe_json(r) for r in p.probes]})


# ---- files -------------------------------------------------------------------------------

def write_json(path: Path, obj: Any) -> None:
    write_atomic(path, (json.dumps(_clean(obj), indent=1) + "\n").encode())


def write_npz(path: Path, arrays: dict) -> None:
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.savez_compressed(buffer, **{k.replace("/", "__"): v for k, v in arrays.items()})
    write_atomic(path, buffer.getvalue())


def export_round(directory: Path, record: RoundRecord, info: SessionInfo,
                 npz: bool = False, stem: Optional[str] = None) -> list[Path]:
    """Write round-NNNN.json (and round-NNNN.npz of raw buffers) into `directory`, or
    STEM.json / STEM.npz."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stem = stem or f"round-{record.round:04d}"
    paths = [directory / f"{stem}.json"]
    write_json(paths[0], round_json(record, info))
    if npz and record.raw:
        paths.append(directory / f"{stem}.npz")
        write_npz(paths[1], record.raw)
    return paths


class TraceWriter:
    """Append-only JSON lines: a header line, then one line per round, flushed each time."""

    def __init__(self, path: Path, info: SessionInfo, prefill: Optional[PrefillRecord] = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")
        header = {"schema": TRACE_SCHEMA, "session": session_json(info)}
        if prefill is not None:
            header["prefill"] = prefill_json(prefill)
        self._line(header)

    def _line(self, obj: dict) -> None:
        self._file.write(json.dumps(obj) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def write(self, record: RoundRecord) -> None:
        self._line(round_json(record))

    def close(self) -> None:
        self._file.close()


def read_trace_sessions(path: Path) -> list[tuple[Optional[SessionInfo], list[RoundRecord]]]:
    """Every session in a trace, in order. A torn line (a crash mid-write) is skipped."""
    sessions: list[tuple[Optional[SessionInfo], list[RoundRecord]]] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if obj.get("schema") == TRACE_SCHEMA:
                sessions.append((session_from_json(obj["session"]), []))
            elif obj.get("schema") == SNAPSHOT_SCHEMA:
                if not sessions:
                    sessions.append((None, []))
                sessions[-1][1].append(round_from_json(obj))
    return sessions


def read_trace(path: Path) -> tuple[Optional[SessionInfo], list[RoundRecord]]:
    """The last session of a trace (a restarted session appends a new header)."""
    sessions = read_trace_sessions(path)
    return sessions[-1] if sessions else (None, [])
