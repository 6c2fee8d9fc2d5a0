"""Reading a recording back for replay and export: a trace (JSON lines), one snapshot
(round-NNNN.json from `x` or `probe --out`), a directory of snapshots, or a session
directory the app wrote (its trace).

Pure Python over dflash_tui.snapshot: replay never imports MLX. A trace may hold several
sessions (one header line each: an explicit --trace FILE gets a new one on every restart);
they are kept apart so round numbers and text never mix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterator, Optional, Union

from ..engine.errors import InputError
from ..engine.records import EngineState, PrefillRecord, ProbeRow, RoundRecord, SessionInfo
from ..snapshot import SNAPSHOT_SCHEMA, TRACE_SCHEMA, round_from_json, session_from_json
from .session_dir import TRACE_NAME


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
    """Every session of a recording, whole (replay holds what it plays)."""
    sessions: list[tuple[Header, list[RoundRecord]]] = []
    skipped = 0
    for entry in entries(path):
        if isinstance(entry, Header):
            sessions.append((entry, []))
        elif isinstance(entry, Skipped):
            skipped += 1
        else:
            if not sessions:
                sessions.append((Header(None, None), []))
            sessions[-1][1].append(entry)
    if not any(rounds for _, rounds in sessions):
        raise InputError(f"{path}: the trace holds no complete round yet")
    return Loaded(Path(path).expanduser(), tuple(
        Recording(header.info, header.prefill, tuple(rounds)) for header, rounds in sessions if rounds
    ), skipped)


@dataclass(frozen=True)
class Header:
    """A session starts: the rounds after it are its own."""
    info: Optional[SessionInfo]
    prefill: Optional[PrefillRecord]


@dataclass(frozen=True)
class Skipped:
    """An unreadable trace line (a torn last line after a crash, or damage)."""
    line: int


def entries(path: Path) -> Iterator[Union[Header, Skipped, RoundRecord]]:
    """A recording read in order, one round at a time (memory stays flat however long it
    is): a trace (a Header per session, then its rounds), one snapshot, a directory of
    snapshots, or a session directory the app wrote (its trace.jsonl)."""
    path = Path(path).expanduser()
    if path.is_dir():
        if (path / TRACE_NAME).is_file():
            yield from _trace_entries(path / TRACE_NAME)
        else:
            yield from _directory_entries(path)
        return
    if not path.exists():
        raise InputError(f"{path}: no such trace or snapshot")
    with _open(path) as f:
        first = f.readline()
    if first.strip() == "{":  # an indented JSON document, not JSON lines: one snapshot
        whole = _json_or_none(_read(path))
        if isinstance(whole, dict) and whole.get("schema") == SNAPSHOT_SCHEMA:
            yield from _snapshot_entries([(path, whole)], path)
            return
    yield from _trace_entries(path)


def count_sessions(path: Path) -> int:
    """How many sessions a recording holds, without parsing its rounds."""
    path = Path(path).expanduser()
    if path.is_dir():
        if not (path / TRACE_NAME).is_file():
            return 1
        path = path / TRACE_NAME
    elif not path.exists():
        raise InputError(f"{path}: no such trace or snapshot")
    header = b'{"schema": "' + TRACE_SCHEMA.encode() + b'"'  # how TraceWriter starts one
    try:
        with open(path, "rb") as f:
            return max(sum(1 for line in f if line.startswith(header)), 1)
    except OSError as error:
        raise InputError(f"{path}: unreadable ({error.strerror or error})") from None


def _trace_entries(path: Path) -> Iterator[Union[Header, Skipped, RoundRecord]]:
    seen_any = False
    with _open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            obj = _json_or_none(line)
            if not isinstance(obj, dict):
                yield Skipped(number)
                continue
            schema = obj.get("schema")
            try:
                if schema == TRACE_SCHEMA:
                    info = session_from_json(obj["session"])
                    entry = Header(info, _prefill(obj.get("prefill"), info))
                elif schema == SNAPSHOT_SCHEMA:
                    entry = round_from_json(obj)
                else:
                    yield Skipped(number)
                    continue
            except (KeyError, TypeError, ValueError) as error:
                raise InputError(f"{path}:{number}: damaged trace line "
                                 f"({type(error).__name__}: {_short(error)})") from None
            seen_any = True
            yield entry
    if not seen_any:
        raise InputError(f"{path}: not a dflash-tui trace (expected JSON lines with schema "
                         f"{TRACE_SCHEMA} / {SNAPSHOT_SCHEMA})")


def _directory_entries(path: Path) -> Iterator[Union[Header, RoundRecord]]:
    files = sorted(path.glob("round-*.json"), key=_round_order)
    if not files:
        raise InputError(f"{path}: no round-NNNN.json snapshots (and no {TRACE_NAME}) in this directory")

    def objects():
        for file in files:
            obj = _json_or_none(_read(file))
            if not isinstance(obj, dict) or obj.get("schema") != SNAPSHOT_SCHEMA:
                raise InputError(f"{file}: not a dflash-tui snapshot (schema {SNAPSHOT_SCHEMA})")
            yield file, obj

    yield from _snapshot_entries(objects(), path)


def _snapshot_entries(objects, path: Path) -> Iterator[Union[Header, RoundRecord]]:
    """Snapshots (already in round order): one session, its identity from the first."""
    header = False
    for file, obj in objects:
        try:
            if not header:
                info = session_from_json(obj["session"]) if obj.get("session") else None
                yield Header(info, None)
                header = True
            yield round_from_json(obj)
        except (KeyError, TypeError, ValueError) as error:
            raise InputError(f"{file}: damaged snapshot ({type(error).__name__}: {_short(error)})") from None


def _round_order(file: Path) -> tuple:
    """round-0012.json, round-0012-2.json (a second export), round-10000.json: by number."""
    parts = file.stem.split("-")[1:]
    return tuple(int(p) if p.isdigit() else 0 for p in parts)


def _open(path: Path):
    try:  # undecodable bytes make a line unreadable (skipped), not the whole file
        return open(path, encoding="utf-8", errors="replace")
    except OSError as error:
        raise InputError(f"{path}: unreadable ({error.strerror or error})") from None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: unreadable ({error})") from None


def _json_or_none(text: str):
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return None


def _short(error: Exception, limit: int = 80) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _build(cls, data: dict):
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


def _prefill(data: Optional[dict], info: SessionInfo) -> Optional[PrefillRecord]:
    """The trace header's prefill block (snapshot.prefill_json) back into a record."""
    if not data:
        return None
    try:
        probes = tuple(_build(ProbeRow, {**p, "shape": tuple(p["shape"])}) for p in data.get("probes", ()))
        return PrefillRecord(info=info, first_token=data["first_token"], first_text=data["first_text"],
                             state=_build(EngineState, data["state"]), ms=data.get("ms", 0.0),
                             probes=probes)
    except (KeyError, TypeError):
        return None
