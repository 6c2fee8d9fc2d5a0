"""Reading a recording back for replay: a trace (JSON lines from --trace), one snapshot
(round-NNNN.json from `x` or `probe --out`) or a directory of snapshots.

Pure Python over dflash_tui.snapshot: replay never imports MLX. A trace may hold several
sessions (one header line each: the app appends a new one on every restart); they are kept
apart so round numbers and text never mix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..engine.errors import InputError
from ..engine.records import PrefillRecord, RoundRecord, SessionInfo
from ..snapshot import (
    SNAPSHOT_SCHEMA, TRACE_SCHEMA, prefill_from_json, round_from_json, session_from_json,
)


@dataclass(frozen=True)
class Recording:
    """One session as recorded."""
    info: Optional[SessionInfo]
    prefill: Optional[PrefillRecord]
    rounds: tuple[RoundRecord, ...]


@dataclass(frozen=True)
class Loaded:
    path: Path
    sessions: tuple[Recording, ...]
    skipped: int = 0  # unreadable lines (a torn last line after a crash, or damage)


def load(path: Path) -> Loaded:
    path = Path(path).expanduser()
    if path.is_dir():
        return _load_directory(path)
    if not path.exists():
        raise InputError(f"{path}: no such trace or snapshot")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: unreadable ({error})") from None
    whole = _json_or_none(text)
    if isinstance(whole, dict) and whole.get("schema") == SNAPSHOT_SCHEMA:
        return Loaded(path, (_snapshot_session([whole], path),))
    return _load_trace(path, text)


def _json_or_none(text: str):
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return None


def _load_trace(path: Path, text: str) -> Loaded:
    sessions: list[Recording] = []
    info, prefill, rounds = None, None, []
    skipped, seen_any = 0, False
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        obj = _json_or_none(line)
        if not isinstance(obj, dict):
            skipped += 1
            continue
        schema = obj.get("schema")
        try:
            if schema == TRACE_SCHEMA:
                if info is not None or rounds:
                    sessions.append(Recording(info, prefill, tuple(rounds)))
                info = session_from_json(obj["session"])
                prefill = _prefill(obj.get("prefill"), info)
                rounds = []
                seen_any = True
            elif schema == SNAPSHOT_SCHEMA:
                rounds.append(round_from_json(obj))
                seen_any = True
            else:
                skipped += 1
        except (KeyError, TypeError, ValueError) as error:
            raise InputError(f"{path}:{number}: damaged trace line "
                             f"({type(error).__name__}: {_short(error)})") from None
    if info is not None or rounds:
        sessions.append(Recording(info, prefill, tuple(rounds)))
    if not seen_any:
        raise InputError(f"{path}: not a dflash-tui trace (expected JSON lines with schema "
                         f"{TRACE_SCHEMA} / {SNAPSHOT_SCHEMA})")
    if not any(s.rounds for s in sessions):
        raise InputError(f"{path}: the trace holds no complete round yet")
    return Loaded(path, tuple(s for s in sessions if s.rounds), skipped)


def _load_directory(path: Path) -> Loaded:
    files = sorted(path.glob("round-*.json"))
    if not files:
        raise InputError(f"{path}: no round-NNNN.json snapshots in this directory")
    objs = []
    for file in files:
        obj = _json_or_none(file.read_text(encoding="utf-8"))
        if not isinstance(obj, dict) or obj.get("schema") != SNAPSHOT_SCHEMA:
            raise InputError(f"{file}: not a dflash-tui snapshot (schema {SNAPSHOT_SCHEMA})")
        objs.append(obj)
    return Loaded(path, (_snapshot_session(objs, path),))


def _snapshot_session(objs: list[dict], path: Path) -> Recording:
    try:
        info = next((session_from_json(o["session"]) for o in objs if o.get("session")), None)
        rounds = tuple(sorted((round_from_json(o) for o in objs), key=lambda r: r.round))
    except (KeyError, TypeError, ValueError) as error:
        raise InputError(f"{path}: damaged snapshot ({type(error).__name__}: {_short(error)})") from None
    return Recording(info, None, rounds)


def _short(error: Exception, limit: int = 80) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _prefill(data: Optional[dict], info: SessionInfo) -> Optional[PrefillRecord]:
    """The trace header's prefill block, or None where it is missing or damaged (the
    rounds replay without it)."""
    if not data:
        return None
    try:
        return prefill_from_json(data, info)
    except (KeyError, TypeError, ValueError):
        return None
