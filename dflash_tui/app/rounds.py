"""Pure helpers over round records, shared by the live app and replay."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..engine.records import Rollback, RoundRecord

# The record fields each stage fills in (engine/session.py): before a stage runs they hold
# their empty defaults.
_EMPTY_UNTIL = {
    "select": {"proposals": None, "selector": None},
    "verify": {"target_tokens": None, "ranks": (), "accepted": None, "bonus": None},
    "commit": {"committed_tokens": (), "rollback": Rollback(), "finish_reason": None},
}


def text_before(record: RoundRecord, previous: Optional[str]) -> str:
    """The committed text before `record`'s round. `previous`: the committed text after the
    round before it, when known. A round's record carries the text before it until commit."""
    if not record.complete:
        return record.committed_text
    if previous is not None:
        return previous
    tail = "".join(record.text(t) for t in record.committed_tokens)
    if tail and record.committed_text.endswith(tail):
        return record.committed_text[: -len(tail)]
    return record.committed_text


def record_at_stage(record: RoundRecord, last: int, before: str) -> RoundRecord:
    """The record as it stood after its stage number `last` (0 = context), rebuilt from the
    complete one: later stages' fields back to their empty values. `before`: the committed
    text before the round (what the record held until commit)."""
    if last >= len(record.stages) - 1:
        return record
    stages = record.stages[: last + 1]
    ran = {s.stage for s in stages}
    blank: dict = {}
    for stage, fields in _EMPTY_UNTIL.items():
        if stage not in ran:
            blank.update(fields)
    if "commit" not in ran:
        blank["committed_text"] = before
    first = record.first_nonfinite
    if first is not None and first.stage not in ran:
        first = None
    return replace(
        record, stages=stages, probes=tuple(p for p in record.probes if p.stage in ran),
        first_nonfinite=first, state_after=stages[-1].after, raw=None, **blank,
    )
