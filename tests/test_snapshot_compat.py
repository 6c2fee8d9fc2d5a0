"""Files written before the record codec still load, and re-encode to the very same bytes
(apart from fields added since, which hold their defaults).

tests/data holds a trace (two sessions: a DFlash2 drafter sampling at temperature 1, then a
drafter with a NaN layer, so selector q rows, a first non-finite buffer and null statistics
are all there) and a mid-round DFlash snapshot, written by the hand-written encoder that
docs/SNAPSHOT.md was first drawn from (commit cc37b45).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dflash_tui.app.replay import load
from dflash_tui.snapshot import (
    SNAPSHOT_SCHEMA, TRACE_SCHEMA, prefill_from_json, prefill_json, round_from_json, round_json,
    session_from_json, session_json,
)

DATA = Path(__file__).parent / "data"
EMPTY = (None, [], {}, "", 0, False)


def _same_but_new_defaults(new, old) -> bool:
    """`new` equals `old` except for keys `old` lacks, which must hold empty defaults (a
    field added to a record after the file was written)."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(
            _same_but_new_defaults(new[k], v) if k in new else False for k, v in old.items()
        ) and all(new[k] in EMPTY for k in new.keys() - old.keys())
    if isinstance(old, list):
        return isinstance(new, list) and len(new) == len(old) and all(
            map(_same_but_new_defaults, new, old))
    return new == old


def test_an_old_trace_re_encodes_line_for_line_but_new_defaults():
    lines = (DATA / "trace-v1.jsonl").read_text(encoding="utf-8").splitlines()
    schemas = []
    for line in lines:
        obj = json.loads(line)
        schemas.append(obj["schema"])
        if obj["schema"] == TRACE_SCHEMA:
            info = session_from_json(obj["session"])
            header = {"schema": TRACE_SCHEMA, "session": session_json(info),
                      "prefill": prefill_json(prefill_from_json(obj["prefill"], info))}
            assert _same_but_new_defaults(json.loads(json.dumps(header)), obj)
        else:
            assert _same_but_new_defaults(json.loads(json.dumps(round_json(round_from_json(obj)))), obj)
    assert schemas == [TRACE_SCHEMA, SNAPSHOT_SCHEMA] * 2


def test_an_old_trace_replays_as_two_sessions():
    loaded = load(DATA / "trace-v1.jsonl")
    assert loaded.skipped == 0 and len(loaded.sessions) == 2
    sampled, nan = loaded.sessions
    assert sampled.info.temperature == 1.0 and sampled.prefill.first_text
    slot = sampled.rounds[0].selector.slots[0]
    assert slot.q is not None and len(slot.q) == sampled.info.top_k == len(slot.candidates)
    first = nan.rounds[0].first_nonfinite
    assert (first.stage, first.layer, first.name) == ("draft", 1, "ffn_out")
    assert first in nan.rounds[0].probes and first.min is None and first.nan > 0
    assert all(isinstance(k, int) for k in nan.rounds[0].token_text)


def test_an_old_snapshot_re_encodes_but_new_defaults():
    text = (DATA / "round-0001.json").read_text(encoding="utf-8")
    obj = json.loads(text)
    record = round_from_json(obj)
    assert record.stage == "select" and record.accepted is None and record.selector is None
    again = round_json(record, session_from_json(obj["session"]))
    assert _same_but_new_defaults(json.loads(json.dumps(again, indent=1)), obj)


def _first_round_line() -> dict:
    lines = (DATA / "trace-v1.jsonl").read_text(encoding="utf-8").splitlines()
    return json.loads(lines[1])


def test_keys_a_reader_does_not_know_are_ignored_and_missing_ones_take_defaults():
    obj = _first_round_line()
    newer = {**obj, "a_future_key": [1, 2]}
    older = {k: v for k, v in obj.items() if k not in ("ranks", "selector", "token_text")}
    assert round_from_json(newer) == round_from_json(obj)
    record = round_from_json(older)
    assert record.ranks == () and record.selector is None and record.token_text == {}


@pytest.mark.parametrize("damage, message", [
    (lambda o: o.update(round="7"), "RoundRecord.round: expected int, got '7'"),
    (lambda o: o["ranks"][0].update(rank=None), "RoundRecord.ranks[0].rank: expected int, got None"),
    (lambda o: o["state"]["after"].pop("cursor"), "EngineState: missing 'cursor'"),
    (lambda o: o.update(token_text={"x": "a"}), "RoundRecord.token_text: expected integer keys"),
    (lambda o: o["probes"][0].update(shape=5), "RoundRecord.probes[0].shape: expected an array"),
])
def test_a_damaged_line_is_refused_naming_the_field(damage, message):
    obj = _first_round_line()
    damage(obj)
    with pytest.raises(TypeError) as caught:
        round_from_json(obj)
    assert str(caught.value).startswith(message)
