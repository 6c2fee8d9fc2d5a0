"""Reading a recording back for replay and export: a trace (JSON lines), one snapshot
(round-NNNN.json from `x` or `probe --out`), a directory of snapshots, or a session
directory the app wrote (its trace).

Pure Python over dflash_tui.snapshot: replay never imports MLX. A trace may hold several
sessions (one header line each: an explicit --trace FILE gets a new one on every restart);
they are kept apart so round numbers and text never mix.

A trace is not held in memory: `open_recording` indexes it (one pass over its bytes finds
each session's header and where each round's line starts, parsing no round) and a round is
read when it is asked for (recorded_rounds.py); replay reads every round once more, off
its UI thread, for the history's summary columns. A directory of snapshots (`probe --out`:
a file a round) is read so too, file by file; a single snapshot is read whole.
"""

from __future__ import annotations

import sys
from array import array
from dataclasses import dataclass, replace
from functools import partial
from itertools import groupby
from pathlib import Path
from typing import Iterator, Optional, Union

from ..engine.errors import InputError
from ..engine.records import PrefillRecord, RoundRecord, SessionInfo
from ..snapshot import SNAPSHOT_SCHEMA, TRACE_SCHEMA, round_from_json, session_from_json
from .recorded_rounds import Rounds, RoundsInFiles, RoundsInMemory, RoundsInTrace, read_all
from .session_dir import TRACE_NAME, session_order
from .trace_lines import (
    HEADER_PREFIX, Header, RoundLine, Skipped, json_or_none, newer_schema, one_line, parse_round,
    trace_lines,
)


@dataclass(frozen=True)
class Recording:
    """One session as recorded."""
    info: Optional[SessionInfo]
    prefill: Optional[PrefillRecord]
    rounds: Rounds


@dataclass(frozen=True)
class Loaded:
    path: Path
    sessions: tuple[Recording, ...]
    skipped: int = 0  # unreadable lines (a torn last line after a crash, or damage)
    notes: tuple[str, ...] = ()  # `note:` lines printed when it was loaded (a newer schema)

    def unreadable(self) -> int:
        """The lines skipped: those the index told apart, and the round lines found damaged
        since, when read."""
        return self.skipped + sum(len(s.rounds.damaged) for s in self.sessions)


def open_recording(path: Path, say=None) -> Loaded:
    """Every session of a recording, a trace's rounds read when asked for (a trace none of
    whose rounds reads is refused: its rounds are read up to the first that does). `say`
    gets each note (default: printed on stderr as `note: ...`, before the app opens)."""
    path = Path(path).expanduser()
    if path.is_dir() and not (path / TRACE_NAME).is_file() and next(path.glob("round-*.json"), None):
        return _indexed_directory(path)
    source = _source(path)
    if not isinstance(source, Path):
        return _held(path, source, say)
    sessions: list[tuple[Header, tuple[array, array, array]]] = []
    damage, headers, last = Damage(), False, None  # last: the round number before
    for entry in trace_lines(source):
        if isinstance(entry, Header):
            sessions.append((entry, (array("q"), array("q"), array("q"))))
            headers, last = True, None
        elif isinstance(entry, Skipped):
            damage.add(entry)
        else:
            # a round whose number does not follow the one before starts a new session, so
            # a damaged header never merges two sessions
            if not sessions or last is not None and entry.number <= last:
                sessions.append((Header(None, None), (array("q"), array("q"), array("q"))))
            offsets, numbers, lines = sessions[-1][1]
            offsets.append(entry.offset)
            numbers.append(entry.number)
            lines.append(entry.line)
            last = entry.number
    loaded = Loaded(path, tuple(Recording(header.info, header.prefill, RoundsInTrace(source, *index))
                                for header, index in sessions if index[0]), damage.skipped)
    if not any(s.rounds.first() is not None for s in loaded.sessions):
        raise no_round(path, loaded.unreadable(), headers)
    return _noted(loaded, damage, say)


def load(path: Path, say=None) -> Loaded:
    """A recording with every round read and checked once: the damaged ones left out and
    counted, as replay shows it once it has read a trace through. Rounds are read again
    when asked for: memory stays flat however long the trace."""
    loaded = open_recording(path, say)
    for session in loaded.sessions:
        for i, record in read_all(session.rounds):
            if record is None:
                session.rounds.damaged.add(i)
    sessions = tuple(replace(s, rounds=s.rounds.readable()) for s in loaded.sessions)
    return replace(loaded, sessions=tuple(s for s in sessions if len(s.rounds)),
                   skipped=loaded.unreadable())


def _indexed_directory(path: Path) -> Loaded:
    """A directory of snapshots: its files told apart by name (round-0012.json, its second
    export round-0012-2.json), the first read for the session's identity, every round read
    when asked for (RoundsInFiles), as a trace's are. A damaged file past the first is
    found when its round is read, skipped and counted like a trace's damaged line."""
    files = sorted(path.glob("round-*.json"), key=_round_order)
    grouped = [(number, list(same)) for number, same in groupby(files, lambda f: _round_order(f)[0])]
    numbers, by_round = [n for n, _ in grouped], [same for _, same in grouped]
    header = next(_snapshot_entries(_snapshot_objects(files[:1]), path))  # refuses a damaged first
    loaded = Loaded(path, (Recording(header.info, None, RoundsInFiles(by_round, numbers)),))
    if loaded.sessions[0].rounds.first() is None:
        raise no_round(path, loaded.unreadable(), headers=True)
    return loaded


def _held(path: Path, source, say) -> Loaded:
    """Snapshots: every round read now (they are few and small)."""
    sessions: list[tuple[Header, list[RoundRecord]]] = []
    damage = Damage()
    for entry in source:
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
    return _noted(Loaded(path, tuple(
        Recording(header.info, header.prefill, RoundsInMemory(rounds, path))
        for header, rounds in sessions if rounds
    ), damage.skipped), damage, say)


def _noted(loaded: Loaded, damage: "Damage", say) -> Loaded:
    notes = damage.notes(loaded.path)
    for note in notes:
        (say or _note)(note)
    return replace(loaded, notes=notes)


def at_tolerance(loaded: Loaded, tolerance: float) -> Loaded:
    """The recording judged again at another --compare-tol (replay --compare-tol): each
    round's first divergent buffer found anew from its recorded relative errors, by the
    engine's own rule (records.Compare.judged_at), and the tolerance the panels, the
    breakpoint and the --compare-tol hint read set to it. Exact: a trace keeps every
    compared buffer's relative error as the engine computed it (JSON floats round-trip).
    A round is judged as it is read, not the whole recording now."""
    if not any(compared(s) for s in loaded.sessions):
        raise InputError(f"--compare-tol: {loaded.path} has no round with a reference "
                         "configuration (a session run with --compare)")
    sessions = []
    for s in loaded.sessions:
        info, prefill = s.info, s.prefill
        if info is not None and info.compare is not None:
            info = replace(info, compare_tol=tolerance)
            prefill = prefill if prefill is None else replace(prefill, info=info)
        sessions.append(Recording(info, prefill, s.rounds.judged(partial(judged_at, tolerance))))
    return replace(loaded, sessions=tuple(sessions))


def compared(session: Recording) -> bool:
    """The session ran a reference configuration: its header says so or, in a recording
    made before headers named their --compare, its rounds do (all of them or none)."""
    if session.info is not None and session.info.compare is not None:
        return True
    first = session.rounds.first()
    return first is not None and first.compare is not None


def judged_at(tolerance: float, record: RoundRecord) -> RoundRecord:
    """The round judged again at `tolerance` (replay and export --compare-tol)."""
    c = record.compare
    return record if c is None else replace(record, compare=c.judged_at(tolerance))


def no_round(path: Path, skipped: int, headers: bool) -> InputError:
    """The refusal of a recording with no readable round (replay and export alike)."""
    if skipped and not headers:
        return InputError(f"{path}: every dflash-tui line of this recording is damaged "
                          f"({_lines(skipped)} skipped)")
    return InputError(f"{path}: the trace holds no complete round yet"
                      + (f" ({_lines(skipped)} damaged, skipped)" if skipped else ""))


def _note(text: str) -> None:
    print(f"note: {text}", file=sys.stderr, flush=True)


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


def entries(path: Path) -> Iterator[Union[Header, Skipped, RoundRecord]]:
    """A recording read in order, one round at a time (memory stays flat however long it
    is): a trace (a Header per session, then its rounds), one snapshot, a directory of
    snapshots, or a session directory the app wrote (its trace.jsonl)."""
    source = _source(Path(path).expanduser())
    yield from _trace_entries(source) if isinstance(source, Path) else source


def _source(path: Path) -> Union[Path, Iterator[Union[Header, RoundRecord]]]:
    """The trace a recording is, or the entries of its snapshots."""
    if path.is_dir():
        if (path / TRACE_NAME).is_file():
            return path / TRACE_NAME
        return _directory_entries(path)
    if not path.exists():
        raise InputError(f"{path}: no such trace or snapshot")
    with _open(path) as f:
        first = f.readline()
    if first.strip() == "{":  # an indented JSON document, not JSON lines: one snapshot
        with _open(path) as f:
            whole = json_or_none(f.read())
        if isinstance(whole, dict) and whole.get("schema") == SNAPSHOT_SCHEMA:
            return _snapshot_entries([(path, whole)], path)
        if isinstance(whole, dict) and newer_schema(whole.get("schema")):
            raise InputError(f"{path}: written by a newer dflash-tui (schema "
                             f"{whole['schema']}); this version reads {SNAPSHOT_SCHEMA}")
    return path


def count_sessions(path: Path) -> int:
    """How many sessions a recording holds, without parsing its rounds."""
    path = Path(path).expanduser()
    if path.is_dir():
        if not (path / TRACE_NAME).is_file():
            return 1
        path = path / TRACE_NAME
    elif not path.exists():
        raise InputError(f"{path}: no such trace or snapshot")
    try:
        with open(path, "rb") as f:
            return max(sum(1 for line in f if line.startswith(HEADER_PREFIX)), 1)
    except OSError as error:
        raise InputError(f"{path}: unreadable ({error.strerror or error})") from None


def _trace_entries(path: Path) -> Iterator[Union[Header, Skipped, RoundRecord]]:
    """A damaged line (a torn last line after a crash, bytes overwritten on disk, a field of
    the wrong type, stages out of order) is skipped, wherever it is; a round whose number
    does not follow the one before starts a new session, so a damaged header never merges
    two sessions (trace_lines: what is refused, what is skipped)."""
    last = None  # the last round's number
    for entry in trace_lines(path):
        if isinstance(entry, RoundLine):
            record = parse_round(entry.text, entry.number)
            if record is None:
                yield Skipped(entry.line)
                continue
            if last is not None and record.round <= last:
                yield Header(None, None)
            last, entry = record.round, record
        elif isinstance(entry, Header):
            last = None
        yield entry


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def _session_dirs(path: Path) -> list[Path]:
    """The directories in `path` that hold a recording, oldest first (the app names them by
    when their session started)."""
    try:
        return sorted((d for d in path.iterdir() if d.is_dir() and (
            (d / TRACE_NAME).is_file() or next(d.glob("round-*.json"), None) is not None)),
            key=session_order)
    except OSError:  # unreadable: the plain refusal says what is missing
        return []


def _directory_entries(path: Path) -> Iterator[Union[Header, RoundRecord]]:
    files = sorted(path.glob("round-*.json"), key=_round_order)
    if not files:
        sessions = _session_dirs(path)
        if len(sessions) == 1:  # the export directory (dflash-snapshots/) itself: one level too high
            raise InputError(f"{path}: holds one session directory, not a recording "
                             f"(expected it: {sessions[0]})")
        if sessions:
            raise InputError(f"{path}: holds {len(sessions)} session directories, not a recording "
                             f"(expected one of them: the newest is {sessions[-1]})")
        raise InputError(f"{path}: no round-NNNN.json snapshots (and no {TRACE_NAME}) in this directory")

    yield from _snapshot_entries(_snapshot_objects(files), path)


def _snapshot_objects(files: list[Path]) -> Iterator[tuple[Path, dict]]:
    for file in files:
        obj = json_or_none(_read(file))
        if not isinstance(obj, dict) or obj.get("schema") != SNAPSHOT_SCHEMA:
            raise InputError(f"{file}: not a dflash-tui snapshot (schema {SNAPSHOT_SCHEMA})")
        yield file, obj


def _snapshot_entries(objects, path: Path) -> Iterator[Union[Header, RoundRecord]]:
    """Snapshots (already in round order): one session, its identity from the first.

    A round exported more than once (`x` at several stages of it, or twice) is one round:
    the export furthest through it, the last of those. It holds every stage before its own,
    which replay rebuilds, so nothing shown is lost; each export counted as a round of its
    own made replay's aggregates and `export`'s tables count that round several times, its
    mid-round exports as rounds that accepted nothing."""
    header = False
    held: Optional[RoundRecord] = None  # the last round read, given once another begins
    for file, obj in objects:
        try:
            if not header:
                info = session_from_json(obj["session"]) if obj.get("session") else None
                yield Header(info, None)
                header = True
            record = round_from_json(obj)
        except (KeyError, TypeError, ValueError, RecursionError) as error:
            raise InputError(f"{file}: damaged snapshot ({type(error).__name__}: {one_line(error)})") from None
        if held is not None and held.round != record.round:
            yield held
            held = None
        if held is None or len(record.stages) >= len(held.stages):
            held = record
    if held is not None:
        yield held


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
