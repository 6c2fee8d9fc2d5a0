"""The app's pure modules over a real recorded session: breakpoints, record_at_stage,
replay loading, trace lines."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from dflash_tui.app.replay import load
from dflash_tui.app.rounds import record_at_stage, text_before
from dflash_tui.breakpoints import Breakpoints, hits, spans
from dflash_tui.engine.errors import InputError
from dflash_tui.engine.records import STAGE_ORDER


def test_record_at_stage_rebuilds_each_partial_record(recorded):
    _, stages = recorded
    complete = [r for r in stages if r.complete]
    for record in stages:
        full = complete[record.round]
        before = next(r for r in stages if r.round == record.round).committed_text
        if record.round:
            assert text_before(full, complete[record.round - 1].committed_text) == before
        rebuilt = record_at_stage(full, STAGE_ORDER.index(record.stage), before)
        # token_text only grows through a round: the rebuilt record keeps the full table
        assert set(rebuilt.token_text) >= set(record.token_text)
        assert replace(rebuilt, token_text={}) == replace(record, token_text={}), \
            f"round {record.round} {record.stage}"


def test_replay_load_splits_sessions_and_skips_a_torn_line(recorded, tmp_path):
    path, stages = recorded
    lines = path.read_text().splitlines()
    two = tmp_path / "two.jsonl"
    # a restart appends a second header; a crash leaves half a line at the end
    two.write_text("\n".join(lines + lines[:2]) + "\n" + lines[2][: len(lines[2]) // 2])
    loaded = load(two)
    assert [len(s.rounds) for s in loaded.sessions] == [3, 1]
    assert loaded.skipped == 1
    assert loaded.sessions[0].prefill.first_token == loaded.sessions[1].prefill.first_token
    assert loaded.sessions[0].rounds[2] == replace([r for r in stages if r.complete][2], raw=None)


@pytest.mark.parametrize("content, message", [
    (None, "no such trace"),
    ("", "not a dflash-tui trace"),
    ("hello\n", "not a dflash-tui trace"),
    ('{"schema": "dflash-tui/trace@1", "session": {}}\n', "is damaged"),
    ("header only", "no complete round"),
])
def test_replay_load_refuses_what_is_not_a_trace(recorded, tmp_path, content, message):
    path = tmp_path / "trace.jsonl"
    if content == "header only":
        content = recorded[0].read_text().splitlines()[0] + "\n"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputError, match=message):
        load(path)


def test_breakpoints_fire_on_the_stage_that_makes_them_true(recorded):
    _, stages = recorded
    by_stage = {(r.round, r.stage): r for r in stages}
    verify = by_stage[(0, "verify")]
    assert hits(verify, Breakpoints(nonfinite=False, zero_accepted=True)) == (
        ("accepted == 0",) if verify.accepted == 0 else ())
    worst = max(r.rank for r in verify.ranks if not r.after_rejection)
    assert hits(verify, Breakpoints(nonfinite=False, rank_above=True, rank_threshold=worst)) == ()
    assert "true-token rank" in hits(verify, Breakpoints(nonfinite=False, rank_above=True,
                                                          rank_threshold=worst - 1))[0]
    # the same conditions never fire on other stages of the round
    for stage in ("context", "draft", "select", "commit"):
        assert hits(by_stage[(0, stage)], Breakpoints(nonfinite=False, zero_accepted=True,
                                                      rank_above=True, rank_threshold=-1)) == ()
    commit = by_stage[(1, "commit")]
    crossed = commit.state_after.anchor_position
    assert hits(commit, Breakpoints(nonfinite=False, position=True, position_at=crossed))
    assert not hits(by_stage[(2, "context")],
                    Breakpoints(nonfinite=False, position=True, position_at=crossed))


def test_the_nonfinite_breakpoint_reads_the_drafters_logits_where_no_probe_ran(nan_pair):
    from dflash_tui.engine import SessionOptions, load_pair

    pair = load_pair(*nan_pair)
    for probes, expected in ((False, "drafter logits non-finite at slots 0–2"),
                             (True, "non-finite in draft L1 ffn_out")):
        session = pair.open("Hello", options=SessionOptions(gamma=3, probes=probes))
        try:
            context, draft, select = (session.step_stage() for _ in range(3))
        finally:
            session.close()
        assert draft.stage == "draft" and hits(context, Breakpoints()) == ()
        found = hits(draft, Breakpoints())
        assert len(found) == 1 and found[0].startswith(expected)  # the probe's, when there is one
        assert hits(draft, Breakpoints(nonfinite=False)) == ()
        # select's record still carries the slots: the stage that made it true fired already
        assert select.nonfinite_logit_slots == (0, 1, 2) and hits(select, Breakpoints()) == ()


def test_slots_left_are_named_as_runs():
    assert spans([5]) == "5"
    assert spans([2, 3, 4, 5, 6, 7, 8]) == "2–8"
    assert spans([0, 2, 3, 7, 9, 10, 11]) == "0, 2–3, 7, 9–11"


def test_trace_lines_are_json_objects(recorded):
    path, _ = recorded
    objs = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert objs[0]["schema"] == "dflash-tui/trace@1" and len(objs) == 4
