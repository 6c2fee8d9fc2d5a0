"""Round records <-> the snapshot JSON of docs/SNAPSHOT.md, plus atomic file writes.

Fields travel through the generic record codec (engine/codec.py); what is written here is
only where the snapshot's layout differs from the record's: the stage reached and the
timings (derived), the state before and after under `state`, and the first non-finite buffer
by name. Pure Python (no MLX): replay rebuilds the very same records with no model.
"""

from __future__ import annotations

import json
import os
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Optional

from .engine.codec import decode, encode
from .engine.files import write_atomic
from .engine.records import EngineState, PrefillRecord, ProbeRow, RoundRecord, SessionInfo

SNAPSHOT_SCHEMA = "dflash-tui/snapshot@1"
TRACE_SCHEMA = "dflash-tui/trace@1"
SUMMARY_SCHEMA = "dflash-tui/summary@1"


def session_json(info: SessionInfo) -> dict:
    out = encode(info)
    # Written only when set: a one-process, one-configuration file is what it was before
    # ranks and the compare lab.
    for key in ("distributed", "compare", "compare_tol", "compare_quantization"):
        if out[key] is None:
            del out[key]
    if not out["compare_dequantized"]:
        del out["compare_dequantized"]
    return out


def session_from_json(d: dict) -> SessionInfo:
    return decode(SessionInfo, d)


def round_json(record: RoundRecord, info: Optional[SessionInfo] = None) -> dict:
    f = encode(replace(record, first_nonfinite=None, raw=None))  # raw buffers go to the NPZ
    first = record.first_nonfinite

    def keys(*names: str) -> dict:
        return {name: f[name] for name in names}

    out = {
        "schema": SNAPSHOT_SCHEMA,
        **keys("round", "position", "anchor", "gamma"),
        "stage": record.stage,
        **keys("proposals", "target_tokens", "accepted", "bonus", "committed_tokens", "ranks",
               "probes"),
        "first_nonfinite": None if first is None else
            {"stage": first.stage, "layer": first.layer, "name": first.name},
        "nonfinite_logit_slots": f["nonfinite_logit_slots"],
        "selector": f["selector"],
        "state": {"before": f["state_before"], "after": f["state_after"]},
        **keys("stages", "rollback"),
        "timings_ms": encode(record.timings_ms),
        **keys("committed_text", "finish_reason", "token_text"),
    }
    if record.comm is not None:  # distributed runs only (docs/DISTRIBUTED.md)
        out["comm"] = f["comm"]
    if record.compare is not None:  # --compare only (docs/COMPARE.md)
        out["compare"] = f["compare"]
    if info is not None:
        out["session"] = session_json(info)
    return out


def round_from_json(d: dict) -> RoundRecord:
    """Rebuild the RoundRecord a snapshot or trace line was written from."""
    state = d["state"]
    record = decode(RoundRecord, d, state_before=decode(EngineState, state["before"]),
                    state_after=decode(EngineState, state["after"]), first_nonfinite=None)
    return replace(record, first_nonfinite=_named(record.probes, d.get("first_nonfinite")))


def _named(probes: tuple[ProbeRow, ...], where: Optional[dict]) -> Optional[ProbeRow]:
    if where is None:
        return None
    if not isinstance(where, dict):  # the codec never saw this field: check its type here
        raise TypeError(f"first_nonfinite = {where!r}; expected an object or null")
    key = (where.get("stage"), where.get("layer"), where.get("name"))
    return next((p for p in probes if (p.stage, p.layer, p.name) == key), None)


def prefill_json(p: PrefillRecord) -> dict:
    """The trace header's prefill block: the record without its session (the header has it)."""
    return {f.name: encode(getattr(p, f.name)) for f in fields(p) if f.name != "info"}


def prefill_from_json(d: dict, info: SessionInfo) -> PrefillRecord:
    return decode(PrefillRecord, d, info=info)


# ---- files -------------------------------------------------------------------------------

def write_json(path: Path, obj: Any) -> None:
    write_atomic(path, (json.dumps(encode(obj), indent=1) + "\n").encode())


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
