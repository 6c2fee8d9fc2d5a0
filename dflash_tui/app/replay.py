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
from ..engine.records import STAGE_ORDER, PrefillRecord, RoundRecord, SessionInfo
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
        data = path.read_bytes()
    except OSError as error:
        raise InputError(f"{path}: unreadable ({error.strerror or error})") from None
    whole = _json_or_none(data)
    if isinstance(whole, dict) and whole.get("schema") == SNAPSHOT_SCHEMA:
        return Loaded(path, (_snapshot_session([whole], path),))
    return _load_trace(path, data)


def _json_or_none(data: bytes):
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):  # JSONDecodeError is a ValueError
        return None


def _load_trace(path: Path, data: bytes) -> Loaded:
    """Every readable session. A damaged line (a torn last line after a crash, bytes
    overwritten on disk, a field that no longer parses) is skipped and counted, wherever
    it is; a round whose number does not follow the one before starts a new session, so a
    damaged header never merges two sessions."""
    sessions: list[Recording] = []
    info, prefill, rounds = None, None, []
    skipped, ours = 0, False

    def close_session() -> None:
        if info is not None or rounds:
            sessions.append(Recording(info, prefill, tuple(rounds)))

    for line in data.splitlines():
        if not line.strip():
            continue
        obj = _json_or_none(line)
        schema = obj.get("schema") if isinstance(obj, dict) else None
        ours = ours or schema in (TRACE_SCHEMA, SNAPSHOT_SCHEMA)
        try:
            if schema == TRACE_SCHEMA:
                header = session_from_json(obj["session"])
                close_session()
                info, prefill, rounds = header, _prefill(obj.get("prefill"), header), []
            elif schema == SNAPSHOT_SCHEMA:
                record = round_from_json(obj)
                if not _well_formed(record):
                    raise TypeError("round fields of the wrong type or stages out of order")
                if rounds and record.round <= rounds[-1].round:
                    close_session()
                    info, prefill, rounds = None, None, []
                rounds.append(record)
            else:
                skipped += 1
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            skipped += 1
    close_session()
    readable = tuple(s for s in sessions if s.rounds)
    if readable:
        return Loaded(path, readable, skipped)
    if not ours:
        raise InputError(f"{path}: not a dflash-tui trace (expected JSON lines with schema "
                         f"{TRACE_SCHEMA} / {SNAPSHOT_SCHEMA})")
    if sessions:
        raise InputError(f"{path}: the trace holds no complete round yet"
                         + (f" ({_lines(skipped)} damaged, skipped)" if skipped else ""))
    raise InputError(f"{path}: every dflash-tui line of this trace is damaged "
                     f"({_lines(skipped)} skipped)")


def _well_formed(record: RoundRecord) -> bool:
    """Stages that ran in the engine's order (the codec has already checked every field's
    type: a line damaged in place can parse as JSON and still hold nonsense)."""
    stages = tuple(s.stage for s in record.stages)
    return bool(stages) and stages == STAGE_ORDER[: len(stages)]


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def _load_directory(path: Path) -> Loaded:
    files = sorted(path.glob("round-*.json"))
    if not files:
        raise InputError(f"{path}: no round-NNNN.json snapshots in this directory")
    objs = []
    for file in files:
        try:
            obj = _json_or_none(file.read_bytes())
        except OSError as error:
            raise InputError(f"{file}: unreadable ({error.strerror or error})") from None
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
