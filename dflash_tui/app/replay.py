"""Reading a recording back for replay and export: a trace (JSON lines), one snapshot
(round-NNNN.json from `x` or `probe --out`), a directory of snapshots, or a session
directory the app wrote (its trace).

Pure Python over dflash_tui.snapshot: replay never imports MLX. A trace may hold several
sessions (one header line each: an explicit --trace FILE gets a new one on every restart);
they are kept apart so round numbers and text never mix.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator, Optional, Union

from ..engine.errors import InputError
from ..engine.records import STAGE_ORDER, PrefillRecord, RoundRecord, SessionInfo
from ..snapshot import (
    SNAPSHOT_SCHEMA, TRACE_SCHEMA, prefill_from_json, round_from_json, session_from_json,
)
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
    notes: tuple[str, ...] = ()  # `note:` lines printed when it was loaded (a newer schema)


def load(path: Path, say=None) -> Loaded:
    """Every session of a recording, whole (replay holds what it plays). `say` gets each
    note (default: printed on stderr as `note: ...`, before the app opens)."""
    sessions: list[tuple[Header, list[RoundRecord]]] = []
    damage = Damage()
    for entry in entries(path):
        if isinstance(entry, Header):
            sessions.append((entry, []))
        elif isinstance(entry, Skipped):
            damage.add(entry)
        else:
            if not sessions:
                sessions.append((Header(None, None), []))
            sessions[-1][1].append(entry)
    if not any(rounds for _, rounds in sessions):
        raise no_round(path, damage.skipped, headers=bool(sessions))
    notes = damage.notes(path)
    for note in notes:
        (say or _note)(note)
    return Loaded(Path(path).expanduser(), tuple(
        Recording(header.info, header.prefill, tuple(rounds)) for header, rounds in sessions if rounds
    ), damage.skipped, notes)


def at_tolerance(loaded: Loaded, tolerance: float) -> Loaded:
    """The recording judged again at another --compare-tol (replay --compare-tol): each
    round's first divergent buffer found anew from its recorded relative errors, by the
    engine's own rule (records.Compare.judged_at), and the tolerance the panels, the
    breakpoint and the --compare-tol hint read set to it. Exact: a trace keeps every
    compared buffer's relative error as the engine computed it (JSON floats round-trip)."""
    if not any(r.compare is not None for s in loaded.sessions for r in s.rounds):
        raise InputError(f"--compare-tol: {loaded.path} has no round with a reference "
                         "configuration (a session run with --compare)")

    def judged(record: RoundRecord) -> RoundRecord:
        c = record.compare
        return record if c is None else replace(record, compare=c.judged_at(tolerance))

    sessions = []
    for s in loaded.sessions:
        info, prefill = s.info, s.prefill
        if info is not None and info.compare is not None:
            info = replace(info, compare_tol=tolerance)
            prefill = prefill if prefill is None else replace(prefill, info=info)
        sessions.append(Recording(info, prefill, tuple(judged(r) for r in s.rounds)))
    return replace(loaded, sessions=tuple(sessions))


def no_round(path: Path, skipped: int, headers: bool) -> InputError:
    """The refusal of a recording with no readable round (replay and export alike)."""
    if skipped and not headers:
        return InputError(f"{path}: every dflash-tui line of this recording is damaged "
                          f"({_lines(skipped)} skipped)")
    return InputError(f"{path}: the trace holds no complete round yet"
                      + (f" ({_lines(skipped)} damaged, skipped)" if skipped else ""))


def _note(text: str) -> None:
    print(f"note: {text}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Header:
    """A session starts: the rounds after it are its own."""
    info: Optional[SessionInfo]
    prefill: Optional[PrefillRecord]


@dataclass(frozen=True)
class Skipped:
    """An unreadable trace line (a torn last line after a crash, or damage), or one of a
    newer version of the trace's schema (`schema` names it)."""
    line: int
    schema: Optional[str] = None


class Damage:
    """Counts the skipped lines of a recording, and says what a reader should know of them."""

    def __init__(self) -> None:
        self.skipped = 0
        self.newer: dict[str, int] = {}  # schema -> lines skipped

    def add(self, entry: Skipped) -> None:
        self.skipped += 1
        if entry.schema is not None:
            self.newer[entry.schema] = self.newer.get(entry.schema, 0) + 1

    def notes(self, path: Path, plain: bool = False) -> tuple[str, ...]:
        """What a reader should know of the skipped lines: those of a newer version; with
        `plain`, the damaged ones too (replay says those on its own screen)."""
        notes = []
        if self.newer:
            schemas = ", ".join(f"{_lines(n)} of {schema}" for schema, n in self.newer.items())
            notes.append(f"{path}: written by a newer dflash-tui ({schemas}, skipped); this "
                         f"version reads {TRACE_SCHEMA} and {SNAPSHOT_SCHEMA}")
        damaged = self.skipped - sum(self.newer.values())
        if plain and damaged:
            notes.append(f"{path}: {_lines(damaged)} damaged, skipped (a torn last line, or "
                         "damage)")
        return tuple(notes)


# Our schemas: dflash-tui/<kind>@<version>. Another family is another tool's file; a higher
# version is a newer dflash-tui's, whose lines this one does not guess at (skipped, noted).
_OURS = re.compile(r"dflash-tui/(trace|snapshot)@(\d{1,9})\Z")
_VERSIONS = {m[1]: int(m[2]) for m in map(_OURS.match, (TRACE_SCHEMA, SNAPSHOT_SCHEMA))}


def _newer(schema) -> bool:
    match = _OURS.match(schema) if isinstance(schema, str) else None
    return match is not None and int(match[2]) > _VERSIONS[match[1]]


def _foreign(schema) -> bool:
    return isinstance(schema, str) and not schema.startswith("dflash-tui/")


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
        with _open(path) as f:
            whole = _json_or_none(f.read())
        if isinstance(whole, dict) and whole.get("schema") == SNAPSHOT_SCHEMA:
            yield from _snapshot_entries([(path, whole)], path)
            return
        if isinstance(whole, dict) and _newer(whole.get("schema")):
            raise InputError(f"{path}: written by a newer dflash-tui (schema "
                             f"{whole['schema']}); this version reads {SNAPSHOT_SCHEMA}")
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
    """A damaged line (a torn last line after a crash, bytes overwritten on disk, a field of
    the wrong type, stages out of order) is skipped, wherever it is; a round whose number
    does not follow the one before starts a new session, so a damaged header never merges
    two sessions. A file whose first schema is another tool's is refused; the lines of a
    newer version of ours are skipped, and say so (Skipped.schema)."""
    ours, last = False, None  # a line of our schema seen; the last round's number
    newer: set[str] = set()
    first = True  # no line with a schema seen yet
    with _open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            obj = _json_or_none(line)
            schema = obj.get("schema") if isinstance(obj, dict) else None
            if first and isinstance(schema, str):
                first = False
                if _foreign(schema):
                    raise InputError(f"{path}: not a dflash-tui trace (line {number} has schema "
                                     f"{_short(schema)!r}; expected {TRACE_SCHEMA} / "
                                     f"{SNAPSHOT_SCHEMA})")
            ours = ours or schema in (TRACE_SCHEMA, SNAPSHOT_SCHEMA)
            if _newer(schema):
                newer.add(schema)
                yield Skipped(number, schema)
                continue
            try:
                if schema == TRACE_SCHEMA:
                    info = session_from_json(obj["session"])
                    entry, last = Header(info, _prefill(obj.get("prefill"), info)), None
                elif schema == SNAPSHOT_SCHEMA:
                    entry = round_from_json(obj)
                    if not _stages_in_order(entry):
                        raise ValueError("stages out of order")
                else:
                    entry = Skipped(number)
            except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError):
                entry = Skipped(number)
            if isinstance(entry, RoundRecord):
                if last is not None and entry.round <= last:
                    yield Header(None, None)
                last = entry.round
            yield entry
    if not ours and newer:
        raise InputError(f"{path}: written by a newer dflash-tui (schema "
                         f"{', '.join(sorted(newer))}); this version reads {TRACE_SCHEMA} / "
                         f"{SNAPSHOT_SCHEMA}")
    if not ours:
        raise InputError(f"{path}: not a dflash-tui trace (expected JSON lines with schema "
                         f"{TRACE_SCHEMA} / {SNAPSHOT_SCHEMA})")


def _stages_in_order(record: RoundRecord) -> bool:
    """The stages ran in the engine's order (the codec has checked every field's type)."""
    stages = tuple(s.stage for s in record.stages)
    return bool(stages) and stages == STAGE_ORDER[: len(stages)]


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


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
        except (KeyError, TypeError, ValueError, RecursionError) as error:
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
    """The JSON value of a line or file, or None where it does not parse (nested too deeply
    for the parser included: a line of 100,000 `[` is damage like any other)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


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
    except (KeyError, TypeError, ValueError, RecursionError):
        return None
