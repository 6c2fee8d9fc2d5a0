"""A trace's lines told apart without parsing its rounds: a session header, a round (where
its line starts and the number it says it is), or a line to skip.

A round's line is the bulk of a trace (tens to hundreds of KB of JSON) and parsing it is
what makes reading a long trace slow, so a line that starts the way TraceWriter writes a
round (`{"schema": "dflash-tui/snapshot@1", "round": N, ...`) is taken for round N as it
stands and parsed only when someone asks for it (`parse_round`); damage further along the
line shows then. Any other line is parsed whole here: headers (small), and lines written
some other way, another version's or damaged ones.

Pure Python: no MLX, no Textual.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Union

from ..engine.errors import InputError
from ..engine.records import STAGE_ORDER, PrefillRecord, RoundRecord, SessionInfo
from ..snapshot import (
    SNAPSHOT_SCHEMA, TRACE_SCHEMA, prefill_from_json, round_from_json, session_from_json,
)

HEADER_PREFIX = b'{"schema": "' + TRACE_SCHEMA.encode() + b'"'  # how TraceWriter starts one
# how TraceWriter starts a round's line (snapshot.round_json's key order)
ROUND_PREFIX = re.compile(rb'\{"schema": "' + re.escape(SNAPSHOT_SCHEMA.encode())
                          + rb'", "round": (\d+)[,}]')


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


@dataclass(frozen=True)
class RoundLine:
    """A line that says it is a round, not parsed yet."""
    line: int  # its number in the file, from 1
    offset: int  # the byte where it starts
    number: int  # the round number it starts with
    text: bytes


def trace_lines(path: Path) -> Iterator[Union[Header, Skipped, RoundLine]]:
    """Every line of a trace, in order. A file whose first schema is another tool's is
    refused; the lines of a newer version of ours are skipped, and say so (Skipped.schema);
    a file with no line of ours is refused once read."""
    ours = False  # a line of our schema seen
    newer: set[str] = set()
    first = True  # no line with a schema seen yet
    try:
        f = open(path, "rb")
    except OSError as error:
        raise InputError(f"{path}: unreadable ({error.strerror or error})") from None
    with f:
        offset = 0
        for number, raw in enumerate(f, 1):
            start, offset = offset, offset + len(raw)
            match = ROUND_PREFIX.match(raw) if raw.endswith(b"\n") else None  # a torn end: parsed now
            if match:
                first, ours = False, True
                yield RoundLine(number, start, int(match.group(1)), raw)
                continue
            if raw.startswith(HEADER_PREFIX):
                first, ours = False, True
                yield _header(number, raw)
                continue
            if not raw.strip():
                continue
            obj = json_or_none(raw)
            schema = obj.get("schema") if isinstance(obj, dict) else None
            if first and isinstance(schema, str):
                first = False
                if _foreign(schema):
                    raise InputError(f"{path}: not a dflash-tui trace (line {number} has schema "
                                     f"{one_line(schema)!r}; expected {TRACE_SCHEMA} / "
                                     f"{SNAPSHOT_SCHEMA})")
            ours = ours or schema in (TRACE_SCHEMA, SNAPSHOT_SCHEMA)
            if newer_schema(schema):
                newer.add(schema)
                yield Skipped(number, schema)
            elif schema == TRACE_SCHEMA:
                yield _header(number, raw)
            elif schema == SNAPSHOT_SCHEMA and type(obj.get("round")) is int:
                yield RoundLine(number, start, obj["round"], raw)
            else:
                yield Skipped(number)
    if not ours and newer:
        raise InputError(f"{path}: written by a newer dflash-tui (schema "
                         f"{', '.join(sorted(newer))}); this version reads {TRACE_SCHEMA} / "
                         f"{SNAPSHOT_SCHEMA}")
    if not ours:
        raise InputError(f"{path}: not a dflash-tui trace (expected JSON lines with schema "
                         f"{TRACE_SCHEMA} / {SNAPSHOT_SCHEMA})")


def _header(number: int, raw: bytes) -> Union[Header, Skipped]:
    obj = json_or_none(raw)
    try:
        info = session_from_json(obj["session"])
        return Header(info, _prefill(obj.get("prefill"), info))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError):
        return Skipped(number)


def parse_round(text: bytes, number: Optional[int] = None) -> Optional[RoundRecord]:
    """A round's line as its record, or None where it is damaged: JSON that does not parse,
    a field of the wrong type, stages out of order, or (`number`) another round than the
    one its start said it was."""
    obj = json_or_none(text)
    if not isinstance(obj, dict):
        return None
    try:
        record = round_from_json(obj)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError):
        return None
    if not _stages_in_order(record) or number is not None and record.round != number:
        return None
    return record


def _stages_in_order(record: RoundRecord) -> bool:
    """The stages ran in the engine's order (the codec has checked every field's type)."""
    stages = tuple(s.stage for s in record.stages)
    return bool(stages) and stages == STAGE_ORDER[: len(stages)]


def json_or_none(text: Union[str, bytes]):
    """The JSON value of a line or file, or None where it does not parse (nested too deeply
    for the parser included: a line of 100,000 `[` is damage like any other). Bytes that
    are not UTF-8 read as replacement characters: damage inside a string value leaves the
    line readable."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


# Our schemas: dflash-tui/<kind>@<version>. Another family is another tool's file; a higher
# version is a newer dflash-tui's, whose lines this one does not guess at (skipped, noted).
_OURS = re.compile(r"dflash-tui/(trace|snapshot)@(\d{1,9})\Z")
_VERSIONS = {m[1]: int(m[2]) for m in map(_OURS.match, (TRACE_SCHEMA, SNAPSHOT_SCHEMA))}


def newer_schema(schema) -> bool:
    match = _OURS.match(schema) if isinstance(schema, str) else None
    return match is not None and int(match[2]) > _VERSIONS[match[1]]


def _foreign(schema) -> bool:
    return isinstance(schema, str) and not schema.startswith("dflash-tui/")


def one_line(value, limit: int = 80) -> str:
    """A value's text (an error's, a schema's) on one line, cut with `…` past `limit`."""
    text = " ".join(str(value).split())
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
