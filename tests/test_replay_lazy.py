"""Replay holds no trace whole: the trace is indexed (where each round's line starts, session
by session), a round is read from the file when it is shown, and the history's summary
columns are filled by one pass over every round after the first frame, the screen saying
how far it has read. What it shows is what reading the whole trace gives."""

from __future__ import annotations

import re
import threading
from dataclasses import replace
from pathlib import Path
from time import monotonic, sleep
from types import SimpleNamespace

import pytest

from dflash_tui.app import reading_pass, recorded_rounds
from dflash_tui.app.recorded_rounds import READ_BACK
from dflash_tui.app.replay import Header, at_tolerance, entries, load, open_recording
from dflash_tui.app.replay_app import ReplayApp
from dflash_tui.app.rounds import text_before
from dflash_tui.engine.records import first_divergent

from app_helpers import SIZE, WAIT, run, wait_for, widget_text

SESSIONS = (("The quick brown fox", 60), ("Hello", 3), ("1, 2, 3,", 25))  # prompt, rounds


def write_sessions(pair, path: Path, sessions, compare=None) -> None:
    """Sessions one after another in one trace, as an explicit --trace FILE gets them."""
    from dflash_tui.engine.api import load_pair
    from dflash_tui.engine.session import SessionOptions
    from dflash_tui.snapshot import TraceWriter

    loaded = load_pair(*pair, compare=compare)
    for prompt, rounds in sessions:
        session = loaded.open(prompt, options=SessionOptions(gamma=4, max_tokens=5 * rounds + 16))
        writer = TraceWriter(path, session.info, session.prefill_record)
        for record in session.run(rounds):
            writer.write(record)
        writer.close()
        session.close()


@pytest.fixture(scope="module")
def long_trace(make_pair, tmp_path_factory):
    path = tmp_path_factory.mktemp("long") / "trace.jsonl"
    write_sessions(make_pair("llama", "DFlash2DraftModel"), path, SESSIONS)
    return path


def whole(path: Path) -> list[tuple[Header, list]]:
    """Every session of a trace with every round parsed, in memory (what replay used to hold)."""
    sessions = []
    for entry in entries(path):
        if isinstance(entry, Header):
            sessions.append((entry, []))
        else:
            sessions[-1][1].append(entry)
    return sessions


def test_rounds_read_back_by_offset_are_the_whole_read(long_trace):
    expected = whole(long_trace)
    assert [len(records) for _, records in expected] == [n for _, n in SESSIONS]
    for opened in (open_recording(long_trace), load(long_trace)):
        assert [(s.info, s.prefill) for s in opened.sessions] == \
            [(h.info, h.prefill) for h, _ in expected]
        for session, (_, records) in zip(opened.sessions, expected):
            assert list(session.rounds.numbers) == [r.round for r in records]
            # out of order, as stepping back and `g` read them; a few kept, no more
            for i in reversed(range(len(records))):
                assert session.rounds[i] == records[i]
            assert session.rounds.kept() <= READ_BACK
        assert opened.unreadable() == 0


def _held_reading(monkeypatch, after: int = 0) -> threading.Event:
    """Replay reads after its first frame (as it does a long trace), and its reading pass
    waits after round `after` of the first session until the event is set."""
    monkeypatch.setattr(reading_pass, "READ_FIRST_BYTES", 0)
    gate, read_all = threading.Event(), reading_pass.read_all

    def held(rounds):
        for i, read in enumerate(read_all(rounds)):
            yield read
            if i == after:
                gate.wait(WAIT)

    monkeypatch.setattr(reading_pass, "read_all", held)
    return gate


def test_a_long_trace_shows_its_first_frame_then_reads_on_with_progress_in_a_window(
        long_trace, monkeypatch):
    gate = _held_reading(monkeypatch)
    total = sum(n for _, n in SESSIONS)

    async def scenario():
        app = ReplayApp(open_recording(long_trace), show_timings=False, export_dir=Path("unused"))
        try:
            async with app.run_test(size=SIZE) as pilot:
                await pilot.pause()
                assert (app.record.round, app.record.stage) == (0, "commit")
                history = lambda: widget_text(app, app.main.query_one("#history"))  # noqa: E731
                assert re.search(rf"reading [01] of {total} rounds…", history())
                assert app.reading()[1] == total
                # the keys work while it reads: the last round is read from the file
                await pilot.press("end")
                assert (app.record.round, app.positions[app.index][0]) == (24, 2)
                gate.set()
                await wait_for(pilot, lambda: app.reading() is None, what="the reading pass")
                app.render_now()
                await pilot.pause()
                assert "mean" in history() and "over 25 rounds" in history()
                assert [len(app._session_history(s)[0]) for s in range(3)] == [n for _, n in SESSIONS]
                for key in ("home", "right", "right", "backspace", "end", "left"):
                    await pilot.press(key)
                assert (app.record.round, app.record.stage) == (23, "commit")
                # a window of full records, however many rounds: the history keeps one (replay
                # reads its records from the trace), each session's rounds the last few read
                assert all(len(app._session_history(s)[0].kept()) <= 1 for s in range(3))
                assert all(s.rounds.kept() <= READ_BACK for s in app.recording.sessions)
        finally:
            gate.set()

    run(scenario())


def test_a_reading_pass_that_fails_says_so_and_stops_saying_it_reads(long_trace, monkeypatch):
    """An unexpected error in the reading pass (a bug) used to end its thread in silence,
    leaving `reading N of M…` on screen for good: it is said in one line, and the history
    keeps the rounds read before it."""
    monkeypatch.setattr(reading_pass, "READ_FIRST_BYTES", 0)
    read_all = reading_pass.read_all

    def failing(rounds):
        for i, read in enumerate(read_all(rounds)):
            if i == 5:
                raise RuntimeError("a bug")
            yield read

    monkeypatch.setattr(reading_pass, "read_all", failing)

    async def scenario():
        app = ReplayApp(open_recording(long_trace), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.reading() is None, what="the reading pass to end")
            said = [entry.text for entry in app.status_log]
            assert any("reading the trace stopped (RuntimeError: a bug)" in t for t in said), said
            assert len(app._session_history(0)[0]) == 5

    run(scenario())


def test_a_damaged_trace_read_after_the_first_frame_says_its_count_once(long_trace, tmp_path,
                                                                         monkeypatch):
    """Two lines unreadable at the index and a round torn after its start (found when the
    pass reads it) used to give two notifications that disagreed, `skipped 2 …` at the first
    frame and `skipped 3 …` once read through: the status line counts them while it reads,
    and one notification gives the final count."""
    lines = long_trace.read_bytes().splitlines(keepends=True)  # header, then 60 rounds
    garbage = b"\x89 not a line of ours\n"
    lines[5] = lines[9] = garbage
    lines[20] = lines[20][: len(lines[20]) // 2] + b"\n"
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(b"".join(lines))
    gate = _held_reading(monkeypatch)

    async def scenario():
        app = ReplayApp(open_recording(damaged), show_timings=False, export_dir=Path("unused"))
        said = lambda: [n.message for n in app._notifications if "unreadable" in n.message]  # noqa: E731
        try:
            async with app.run_test(size=SIZE) as pilot:
                await pilot.pause()
                assert app.reading() is not None and said() == []
                assert "· 2 unreadable skipped" in app.status_right()[0][0]
                gate.set()
                await wait_for(pilot, lambda: app.reading() is None, what="the reading pass")
                await pilot.pause()
                assert said() == ["skipped 3 unreadable line(s) of the trace"]
                assert "unreadable" not in app.status_right()[0][0]  # said once, not on for good
        finally:
            gate.set()

    run(scenario())


def test_keys_come_first_while_the_trace_is_read(long_trace, monkeypatch):
    """A key on tab 4 during the reading pass took twice as long to act as after it (0.09 s
    against 0.045 s at 80 x 24, docs/TUI.md): the pass shared the interpreter with the key's
    frame, and the aggregates counted every row again at each key as the rows grew. The pass stands still after a
    key, and the aggregates count again when the progress on screen moves on."""
    gate = _held_reading(monkeypatch, after=5)
    # each round handed over as read, the progress on screen moving on at the first only
    monkeypatch.setattr(reading_pass, "READ_BATCH", 1)
    monkeypatch.setattr(reading_pass, "READ_DRAW_EVERY", WAIT)
    monkeypatch.setattr(reading_pass, "KEY_PAUSE", WAIT)
    stood = threading.Event()

    def stand(seconds):  # the reading thread's wait after a key, shortened
        stood.set()
        sleep(0.01)

    monkeypatch.setattr(reading_pass, "time", SimpleNamespace(monotonic=monotonic, sleep=stand))

    async def scenario():
        app = ReplayApp(open_recording(long_trace), show_timings=False, export_dir=Path("unused"))
        try:
            async with app.run_test(size=SIZE) as pilot:
                await pilot.press("4")
                app.reading_pass._key_at = float("-inf")  # read on
                aggregates = app.main.query_one("AggregatesPanel")
                counted, fill = [], aggregates._fill
                aggregates._fill = lambda *a: counted.append(len(a[0])) or fill(*a)
                await wait_for(pilot, lambda: app.reading_pass.done == 6, what="six rounds read")
                assert app.reading() == (1, sum(n for _, n in SESSIONS))  # as drawn
                counted.clear()
                stood.clear()
                await pilot.press("right")
                assert app.record.round == 1 and counted == []  # the key's frame counted nothing
                gate.set()
                await wait_for(pilot, stood.is_set, timeout=10, what="the pass to stand still")
                assert app.reading_pass.done == 6  # nothing read past the key
                app.reading_pass._key_at = float("-inf")
                await wait_for(pilot, lambda: app.reading() is None, what="the reading pass")
                await pilot.pause()
                assert counted[-1] == SESSIONS[0][1]  # counted again, every round
        finally:
            gate.set()

    run(scenario())


def test_compare_tol_judges_each_round_as_it_is_read(pair, tmp_path, monkeypatch):
    trace = tmp_path / "compare.jsonl"
    write_sessions(pair, trace, [("The quick brown fox", 4)], compare="bits=4")
    tolerance = 0.3
    expected = [replace(r, compare=replace(r.compare, tolerance=tolerance,
                                           first_divergent=first_divergent(r.compare.buffers, tolerance)))
                for r in whole(trace)[0][1]]
    opened = open_recording(trace)
    parsed = []
    parse_round = recorded_rounds.parse_round
    monkeypatch.setattr(recorded_rounds, "parse_round",
                        lambda *a: parsed.append(a) or parse_round(*a))
    judged = at_tolerance(opened, tolerance)
    assert len(parsed) <= 1  # the first round (does the session compare?), not every one
    session, = judged.sessions
    assert session.info.compare_tol == tolerance
    assert list(session.rounds) == expected
    assert any(a.compare.first_divergent != b.compare.first_divergent
               for a, b in zip(expected, whole(trace)[0][1]))  # judged anew, not as recorded


def test_a_round_after_a_damaged_one_is_shown_with_the_text_before_it(recorded, tmp_path):
    """Round 1's line is torn after its start (its index entry looks whole): stepping skips
    it and counts it, and round 2 mid-round shows the text before it as its own record
    says it (its committed text less its commit), not round 0's."""
    path, stages = recorded
    header, first, second, third = path.read_bytes().splitlines(keepends=True)
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(header + first + second[: len(second) // 2] + b"\n" + third)
    complete = [r for r in stages if r.complete]

    async def scenario():
        app = ReplayApp(open_recording(torn), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await pilot.press("right")
            assert (app.record.round, app.record.stage) == (2, "commit")
            await pilot.press("backspace")
            assert app.record.stage == "verify"
            assert app.text_before == text_before(complete[2], None)
            assert app.text_before.startswith(complete[1].committed_text)
            assert app.text_before != complete[0].committed_text
            assert any("skipped 1 unreadable line(s)" in n.message for n in app._notifications)

    run(scenario())


def test_the_aggregates_title_says_how_far_replay_has_read_as_long_as_it_fits():
    from dflash_tui.panels.aggregates import render_title

    title = lambda width=None: render_title((0, 176), 177, 177, None, 0.5, (177, 3512),  # noqa: E731
                                            width=width).plain
    assert "reading 177 of 3,512 rounds…" in title() and "all rounds" not in title()
    assert "reading 5%…" in title(40)  # shortened before the counts go
    assert title(20) == "rounds 0–176  mean 0.50"


def test_a_directory_of_snapshots_is_read_round_by_round_as_a_trace_is(make_pair, tmp_path,
                                                                       monkeypatch):
    """`probe --out` writes a file a round, thousands in a long run. Replay used to parse
    every one before its first frame and hold them all (a 2,012-round probe of the fixture
    pair: 7 s, 207 MB): now opening it parses the first round alone, rounds are read when
    asked for, a few kept, and a round exported twice is still its furthest export."""
    import json

    from dflash_tui import snapshot
    from dflash_tui.app import replay, trace_lines
    from dflash_tui.cli import main

    target, _ = make_pair("llama", "DFlash2DraftModel")
    out = tmp_path / "probed"
    assert main(["probe", str(target), "--prompt", "Hi", "--block", "3", "--rounds", "20",
                 "--no-probes", "--out", str(out)]) == 0
    again = json.loads((out / "round-0004.json").read_text())  # `x` again at its draft
    again["stages"] = again["stages"][:2]
    (out / "round-0004-2.json").write_text(json.dumps(again, indent=1))
    expected = whole(out)[0][1]
    parsed = []

    def counted(d):
        parsed.append(d.get("round"))
        return snapshot.round_from_json(d)

    monkeypatch.setattr(trace_lines, "round_from_json", counted)
    monkeypatch.setattr(replay, "round_from_json", counted)
    opened = open_recording(out)
    assert len(parsed) <= 1  # the first round, to know the recording has one
    rounds = opened.sessions[0].rounds
    assert list(rounds.numbers) == [r.round for r in expected] == list(range(20))
    for i in reversed(range(len(expected))):
        assert rounds[i] == expected[i]
    assert len(rounds[4].stages) == 5  # the furthest export of round 4
    assert rounds.kept() <= READ_BACK
    assert [r for _, r in recorded_rounds.read_all(rounds)] == expected
