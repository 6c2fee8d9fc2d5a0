"""Helpers for the app tests (waiting on conditions, reading the screen), and tests of the
app's pure modules: breakpoints, record_at_stage, replay loading.

The pilot tests wait on conditions with a deadline (pilot.pause loops), never on sleeps.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from dflash_tui.app.breakpoints import Breakpoints, hits
from dflash_tui.app.engine_thread import Launch
from dflash_tui.app.replay import load
from dflash_tui.app.rounds import record_at_stage, text_before
from dflash_tui.engine.errors import InputError
from dflash_tui.engine.records import STAGE_ORDER

WAIT = 60.0  # seconds: generous for a cold first MLX import on a busy CI machine


@pytest.fixture(autouse=True)
def engines_stopped():
    """After each test, wait for every engine thread it started to finish its stage and
    close (the app sends Quit when it unmounts): an MLX op still running when the
    interpreter exits would abort the process."""
    import threading

    before = set(threading.enumerate())
    yield
    for thread in set(threading.enumerate()) - before:
        if thread.name == "dflash-engine":
            thread.join(30)


async def wait_for(pilot, condition, timeout: float = WAIT, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause(0.01)


async def wait_loaded(pilot) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: not app.loading or app.failure is not None, what="prefill")
    assert app.failure is None, app.failure


async def wait_idle(pilot) -> None:
    """Until the engine has answered every step asked of it and stands still."""
    app = pilot.app
    await wait_for(pilot, lambda: app.running is None and app.busy is None
                   and app.engine.commands.empty() and not app.engine._deferred
                   and app.engine.busy_stage is None and app.engine._running is None,
                   what="the engine to go idle")
    await pilot.pause()


async def press_and_settle(pilot, *keys: str) -> None:
    for key in keys:
        await pilot.press(key)
        await wait_idle(pilot)
    app = pilot.app
    app.render_now()  # draw the last record now rather than at the next coalesced frame
    await pilot.pause()


def screen_lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


def widget_text(app, widget) -> str:
    """The characters on screen inside a widget's region."""
    region = widget.region
    lines = screen_lines(app)[region.y: region.y + region.height]
    return "\n".join(line[region.x: region.x + region.width] for line in lines)


def table_rows(table) -> list[list[str]]:
    return [[str(getattr(cell, "plain", cell)) for cell in table.get_row_at(i)]
            for i in range(table.row_count)]


def launch(pair, **kwargs) -> Launch:
    target, draft = pair
    defaults = dict(model=target, draft=draft, prompt="The quick brown fox", gamma=4, max_tokens=24)
    return Launch(**{**defaults, **kwargs})


# ---- pure modules -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def recorded(make_pair, tmp_path_factory):
    """Three rounds of a real fixture session, stepped headless, and its trace."""
    from dflash_tui.engine.api import load_pair
    from dflash_tui.engine.session import SessionOptions
    from dflash_tui.snapshot import TraceWriter

    target, draft = make_pair("llama", "DFlash2DraftModel")
    pair = load_pair(target, draft)
    session = pair.open("The quick brown fox", options=SessionOptions(gamma=4))
    path = tmp_path_factory.mktemp("trace") / "session.jsonl"
    writer = TraceWriter(path, session.info, session.prefill_record)
    stages = []
    for _ in range(3):
        while True:
            record = session.step_stage()
            stages.append(record)
            if record.complete:
                writer.write(record)
                break
    writer.close()
    session.close()
    return path, stages


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


def test_trace_lines_are_json_objects(recorded):
    path, _ = recorded
    objs = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert objs[0]["schema"] == "dflash-tui/trace@1" and len(objs) == 4


def oracle_proposer(pair, prompt: str, tokens: int, good: int):
    """Forced proposals (the engine's SessionOptions.proposer) that agree with the target's
    own greedy decode for the first `good` slots of each round and disagree after: the real
    verify then accepts exactly min(good, gamma) and commits the target's token as bonus."""
    from dflash_tui.engine.api import load_pair
    from dflash_tui.engine.session import SessionOptions

    session = load_pair(*pair).open(prompt, options=SessionOptions(gamma=4, max_tokens=tokens))
    list(session.run())
    greedy, prompt_length = list(session.generated), len(session.prompt_ids)
    vocab = session.info.vocab_size
    session.close()

    def propose(committed: list[int], gamma: int) -> list[int]:
        done = len(committed) - prompt_length  # tokens generated so far, anchor included
        ahead = greedy[done: done + gamma] + [0] * gamma
        return [t if i < good else (t + 1) % vocab for i, t in enumerate(ahead[:gamma])]

    return propose
