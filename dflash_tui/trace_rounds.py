"""Full round records read back from a session's trace, one line at a time.

The app keeps only the last rounds' full records in memory (history.py); an older one is
read back from the trace the engine thread writes (one JSON line per completed round,
docs/SNAPSHOT.md). The file is indexed lazily: the first request scans it once, remembering
where each round's line starts, and later requests scan only what was appended since. Only
whole lines are read, so a line being written is never seen half-way.

A trace may hold several sessions (an explicit `--trace FILE` is appended to by every
restart): `start` is where this session's part begins (the file's size when it was
chosen); the first session header at or after it opens the rounds, the next one ends them.

A line is told to be a round, and a round's line is checked, by replay's rules
(app/trace_lines.py: `parse_round`), so a line replay skips as damaged is none here either.
Replay's own index (app/recorded_rounds.py) is not this one: it indexes a file that no
longer grows, all of it in one pass that also refuses another tool's file, and finds rounds
by position, not number.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from .app.trace_lines import ROUND_PREFIX, json_or_none, parse_round
from .engine.records import RoundRecord
from .snapshot import SNAPSHOT_SCHEMA, TRACE_SCHEMA

_HEADER = b'"' + TRACE_SCHEMA.encode() + b'"'


class TraceRounds:
    def __init__(self, path: Path, start: int = 0) -> None:
        self.path = Path(path)
        self._scanned = start  # bytes looked at so far
        self._in_session = False  # the session's header has been seen
        self._ended = False  # a later session's header has been seen
        self._offsets: dict[int, int] = {}  # round -> where its line starts

    def __call__(self, round_number: int) -> Optional[RoundRecord]:
        """The round's record, or None when the trace does not hold it (or is unreadable)."""
        try:
            if round_number not in self._offsets:
                self._scan()
            offset = self._offsets.get(round_number)
            if offset is None:
                return None
            with open(self.path, "rb") as f:
                f.seek(offset)
                return parse_round(f.readline(), round_number)
        except OSError:
            return None

    def _scan(self) -> None:
        if self._ended:
            return
        with open(self.path, "rb") as f:
            f.seek(self._scanned)
            while True:
                offset = f.tell()
                line = f.readline()
                if not line.endswith(b"\n"):  # nothing more, or a line still being written
                    break
                self._scanned = f.tell()
                if _HEADER in line[:64]:
                    if self._in_session:
                        self._ended = True
                        return
                    self._in_session = True
                elif self._in_session:
                    number = _round_number(line)
                    if number is not None:
                        self._offsets[number] = offset


def _round_number(line: bytes) -> Optional[int]:
    """The round a line says it is (as trace_lines tells one), else None: a header, another
    kind of line, or damage (skipped, as replay skips it)."""
    match = ROUND_PREFIX.match(line)
    if match:
        return int(match.group(1))
    obj = json_or_none(line)
    if isinstance(obj, dict) and obj.get("schema") == SNAPSHOT_SCHEMA and type(obj.get("round")) is int:
        return obj["round"]
    return None
