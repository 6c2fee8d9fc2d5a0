"""Traces and exports reopen in replay with the same numbers; replay steps stage by stage;
bad arguments end with one line and exit code 2 before any app opens."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from dflash_tui.panels.table import FastTable

from dflash_tui import cli
from dflash_tui.breakpoints import Breakpoints
from dflash_tui.app.live import LiveApp
from dflash_tui.app.replay import load
from dflash_tui.app.replay_app import ReplayApp
from dflash_tui.slot_text import NONFINITE

from app_helpers import SIZE, launch, press_and_settle, record_headless, run, table_rows, wait_for, \
    wait_loaded, widget_text


def panel_view(app) -> dict:
    """What the panels show, as text: the tables cell by cell, the rest as on screen."""
    main = app.main
    app.render_now()
    view = {name: table_rows(main.query_one(f"#{name}", FastTable))
            for name in ("ranks-table", "selector-path", "probes-table")}
    for name in ("state", "ranks-drafter-top", "ranks-target-top", "selector-candidates",
                 "selector-lattice"):
        view[name] = widget_text(app, main.query_one(f"#{name}"))
    return view


def numbers_line(app) -> list[str]:
    """The header's numbers, without the round label (live says "2", replay "2/2")."""
    line = widget_text(app, app.main.query_one("#header")).splitlines()[1].split()
    return [word for i, word in enumerate(line) if i == 0 or line[i - 1] != "round"]


@pytest.fixture(scope="module")
def live_session(pair, tmp_path_factory):
    """Three rounds in the live app, recorded to its session directory's trace (the
    default), round 2 exported with NPZ on."""
    root = tmp_path_factory.mktemp("live")
    exports = root / "snapshots"
    views = {}

    async def scenario():
        app = LiveApp(launch(pair), show_timings=False, export_dir=exports)
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "X", "n", "n", "n")
            await pilot.press("x")
            await wait_for(pilot, lambda: "exported" in app.status.message, what="the export")
            views["panels"], views["numbers"] = panel_view(app), numbers_line(app)
            views["history"] = widget_text(app, app.main.query_one("#history"))
            views["stream"] = widget_text(app, app.main.query_one("#stream"))
            views["record"] = app.record
            views["status"] = app.status.message
            views["tokens"] = re.search(r"tokens \d+", widget_text(app, app.main.query_one("#header")))[0]
            await pilot.press("q")

    run(scenario())
    session, = exports.iterdir()  # one directory for the one session
    return session / "trace.jsonl", session, views


def test_export_writes_json_and_npz_atomically(live_session):
    _, exports, views = live_session
    record = views["record"]
    assert sorted(p.name for p in exports.iterdir()) == ["round-0002.json", "round-0002.npz", "trace.jsonl"]
    assert views["status"] == f"exported round-0002.json + .npz · round 2 commit → {exports}/"
    snapshot = json.loads((exports / "round-0002.json").read_text())
    assert snapshot["round"] == 2 and snapshot["stage"] == "commit"
    assert snapshot["accepted"] == record.accepted and snapshot["proposals"] == list(record.proposals)
    assert snapshot["session"]["drafter_kind"] == "DFlash2"
    with np.load(exports / "round-0002.npz") as raw:
        assert set(raw.files) == {k.replace("/", "__") for k in record.raw}
        logits = raw["draft__logits"]
        assert logits.shape[0] == record.gamma and np.isfinite(logits).all()


def test_trace_records_every_round_and_replays_the_same_panels(live_session):
    trace, _, views = live_session
    lines = trace.read_text().splitlines()
    assert len(lines) == 4  # header + three rounds, one line each
    recording = load(trace)
    assert [r.round for r in recording.sessions[0].rounds] == [0, 1, 2]

    async def scenario():
        app = ReplayApp(recording, show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await press_and_settle_replay(pilot, "end")
            assert app.record.round == 2 and app.record.complete
            assert panel_view(app) == views["panels"]
            assert numbers_line(app) == views["numbers"]
            assert widget_text(app, app.main.query_one("#history")) == views["history"]
            assert widget_text(app, app.main.query_one("#stream")) == views["stream"]
            assert "2/2" in widget_text(app, app.main.query_one("#header"))

    run(scenario())


@pytest.mark.parametrize("which", ["directory", "file"])
def test_exported_snapshot_replays_the_same_round(live_session, which, tmp_path):
    _, session, views = live_session
    snapshots = tmp_path / "snapshots"  # a directory of snapshots alone (no trace beside them)
    snapshots.mkdir()
    (snapshots / "round-0002.json").write_bytes((session / "round-0002.json").read_bytes())
    path = snapshots if which == "directory" else snapshots / "round-0002.json"

    async def scenario():
        app = ReplayApp(load(path), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            assert app.record.round == 2
            assert panel_view(app) == views["panels"]
            # the rounds it holds, as `g` asks for them (not rounds 0 and 1, never recorded)
            assert "round 2 of 2–2 · commit" in app.status.message
            # the tokens generated by then, as live: not only the commits of rounds it holds
            assert views["tokens"] in widget_text(app, app.main.query_one("#header"))
            await pilot.press("g")
            await wait_for(pilot, lambda: app.main.asking, what="the question line")
            assert app.main.query_one("#ask-input").placeholder == "2–2"

    run(scenario())


def test_going_to_a_round_the_recording_lacks_says_so(live_session, tmp_path):
    """A trace whose round 1 is torn holds rounds 0 and 2: `g 1` is inside the bounds that
    `g` offers, but there is no round 1 to show, and the user is told which there are."""
    trace, _, _ = live_session
    header, first, second, third = trace.read_bytes().splitlines(keepends=True)
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(header + first + second[: len(second) // 2] + b"\n" + third)

    async def scenario():
        app = ReplayApp(load(torn), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            shown = app.record.round
            await pilot.press("g")
            await wait_for(pilot, lambda: app.main.asking, what="the question line")
            await pilot.press("1", "enter")
            await pilot.pause()
            assert app.record.round == shown  # nothing moved
            assert any("round 1 is not in this recording (it holds rounds 0, 2)" in n.message
                       for n in app._notifications)

    run(scenario())


def test_a_session_directory_replays_its_whole_trace(live_session):
    _, session, _ = live_session
    recording = load(session)  # the trace beside the exports, not the one exported round
    assert [r.round for r in recording.sessions[0].rounds] == [0, 1, 2]


def test_exports_and_traces_are_never_overwritten(pair, tmp_path):
    """x twice on a round, a restart, x again: three snapshots, two sessions, nothing lost;
    an explicit --trace FILE gets both sessions appended."""
    trace = tmp_path / "explicit.jsonl"

    async def scenario():
        app = LiveApp(launch(pair, trace=trace), show_timings=False, export_dir=tmp_path / "out")
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n")
            for _ in range(2):
                await pilot.press("x")
                await wait_for(pilot, lambda: "exported" in app.status.message, what="the export")
                app.set_status("idle", "")
            first = app.session_dir.path
            await pilot.press("r")
            await wait_for(pilot, lambda: not app.loading, what="the restart")
            await press_and_settle(pilot, "n")
            await pilot.press("x")
            await wait_for(pilot, lambda: "exported" in app.status.message, what="the export")
            return first, app.session_dir.path

    first, second = run(scenario())
    assert first != second and first.parent == second.parent == tmp_path / "out"
    assert sorted(p.name for p in first.iterdir()) == ["round-0000-2.json", "round-0000.json"]
    assert sorted(p.name for p in second.iterdir()) == ["round-0000.json"]
    assert [len(s.rounds) for s in load(trace).sessions] == [1, 1]


async def press_and_settle_replay(pilot, *keys):
    for key in keys:
        await pilot.press(key)
    pilot.app.render_now()
    await pilot.pause()


def test_replay_steps_stages_back_and_forth(live_session):
    trace, _, _ = live_session

    async def scenario():
        app = ReplayApp(load(trace), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            assert (app.record.round, app.record.stage) == (0, "commit")
            assert "over 1 round " in widget_text(app, app.main.query_one("#history"))
            await press_and_settle_replay(pilot, "backspace")
            record = app.record
            assert record.stage == "verify" and record.accepted is not None
            assert record.committed_tokens == () and record.rollback.kind == "none"
            assert "no rounds yet" in widget_text(app, app.main.query_one("#history"))
            ranks = table_rows(app.main.query_one("#ranks-table", FastTable))
            assert [int(r[3]) for r in ranks] == [r.rank for r in record.ranks]
            await press_and_settle_replay(pilot, "backspace", "backspace")
            assert app.record.stage == "draft" and app.record.proposals is None
            assert all(r[1:] == ["…"] * 6 for r in table_rows(app.main.query_one("#ranks-table", FastTable)))
            await press_and_settle_replay(pilot, "backspace", "backspace")  # before round 0
            assert app.record.stage == "context" and "start of the recording" in app.status.message
            await press_and_settle_replay(pilot, "right")
            assert (app.record.round, app.record.stage) == (1, "commit")
            await press_and_settle_replay(pilot, "s")
            assert (app.record.round, app.record.stage) == (2, "context")
            await press_and_settle_replay(pilot, "n")
            assert (app.record.round, app.record.stage) == (2, "commit")
            await press_and_settle_replay(pilot, "n")
            assert app.record.round == 2 and "end of the recording" in app.status.message
            await press_and_settle_replay(pilot, "home")
            assert app.record.round == 0
            for key in ("p", "r", "X"):  # the live session's keys
                app.set_status("paused", "")
                await press_and_settle_replay(pilot, key)
                assert "need the model" in app.status.message, key
                assert app.record.round == 0 and app.screen is app.main

    run(scenario())


@pytest.mark.parametrize("faster", [0, 1, 3])  # stage by stage, a round, 100 rounds a tick
def test_replay_play_stops_at_a_nonfinite_breakpoint(nan_pair, tmp_path, faster):
    """A trace of the NaN drafter, recorded headless; replay plays into it and stops, at
    whatever speed: a tick that goes whole rounds still checks every stage it passes."""
    trace = record_headless(nan_pair, tmp_path / "nan.jsonl", 2)

    async def scenario():
        app = ReplayApp(load(trace), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await pilot.press(*["plus"] * faster, "c")
            await wait_for(pilot, lambda: not app.playing, what="play to stop")
            assert (app.record.round, app.record.stage) == (1, "draft")
            assert app.status.kind == "breakpoint"
            assert "non-finite in draft L1 ffn_out" in app.status.message

    run(scenario())


def test_replay_without_probes_still_shows_the_drafters_nan_logits(nan_pair, tmp_path):
    """Recorded with probes off (as `probe --no-probes`): no buffer says NaN, but the ranks
    tab names the slots whose logits were, and play stops at the draft that made them."""
    trace = record_headless(nan_pair, tmp_path / "nan.jsonl", 2, probes=False)

    async def scenario():
        app = ReplayApp(load(trace), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            assert app.record.probes == ()
            note = app.main.query_one("#ranks-note")
            assert note.display and "✗ drafter logits NaN/Inf: slots 0–2" in widget_text(app, note)
            await pilot.press("c")
            await wait_for(pilot, lambda: not app.playing, what="play to stop")
            assert (app.record.round, app.record.stage) == (1, "draft")
            assert "drafter logits non-finite at slots 0–2" in app.status.message

    run(scenario())


def test_the_drafters_top5_of_nan_logits_reads_nf_not_their_noise(nan_pair, tmp_path):
    """Tab 1's top-5 of a slot whose drafter logits held NaN listed five tokens (what the
    NaN logits ranked first, \\x14 \\x16 ...) beside logits of n/f: noise that read like
    candidates. It reads n/f, as the slot's rank does; the target's top-5 is as it was."""
    trace = record_headless(nan_pair, tmp_path / "nan.jsonl", 2)

    async def scenario(size):
        app = ReplayApp(load(trace), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=size) as pilot:
            await press_and_settle_replay(pilot, "end")
            record = app.record
            assert record.complete and 0 in record.nonfinite_logit_slots  # else this proves nothing
            drafter = widget_text(app, app.main.query_one("#ranks-drafter-top")).split("\n")
            assert [line.rstrip() for line in drafter if line.strip()] == \
                ["drafter, slot 0", "n/f: NaN / Inf logits"], drafter
            target = widget_text(app, app.main.query_one("#ranks-target-top")).split("\n")
            rows = [line for line in target if line.strip()][2:]  # under the title and header
            assert len(rows) == len(record.ranks[0].target_top) == 5, target
            assert not any(NONFINITE in row for row in rows), target

    run(scenario((80, 24)))
    run(scenario(SIZE))


def test_the_selectors_candidates_of_nan_logits_read_nf_not_their_noise(nan_pair, tmp_path):
    """Tab 2 listed the K candidates of a slot whose drafter logits held NaN (\\x17 \\x13
    \\x14 ..., what the NaN logits ranked first, marked ● pick and ★ argmax) and drew their
    lattice, and the path table named one of them the slot's argmax: noise that read like
    a walk, where tab 1's top-5 reads n/f. The candidates read n/f as tab 1's top-5 does,
    the lattice is left empty, the argmax and path cells read n/f; the pick, the proposal the target
    judged, and the target's token stay."""
    trace = record_headless(nan_pair, tmp_path / "nan.jsonl", 2)

    async def scenario(size):
        app = ReplayApp(load(trace), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=size) as pilot:
            await press_and_settle_replay(pilot, "end", "2")
            record = app.record
            assert record.selector is not None and 0 in record.nonfinite_logit_slots
            candidates = widget_text(app, app.main.query_one("#selector-candidates")).split("\n")
            shown = [line.rstrip() for line in candidates if line.strip()]
            assert len(shown) == 2 and shown[0].startswith("slot 0 after "), shown
            assert shown[1] == "n/f: NaN / Inf logits", shown
            assert widget_text(app, app.main.query_one("#selector-lattice")).strip() == ""
            path = table_rows(app.main.query_one("#selector-path", FastTable))
            pick, argmax, target = path[0][1:4]  # slot 0's
            assert argmax == NONFINITE and NONFINITE not in (pick, target), path[0]
            assert path[0][-1] == NONFINITE, path[0]  # the walk's verdict on noise: none

    run(scenario((80, 24)))
    run(scenario(SIZE))


def test_replay_logs_the_setup_of_an_old_trace_without_the_mask_text(tmp_path):
    """A trace written before the mask token's text was kept: its id alone, whole in `L`
    and in the wide header."""
    trace = Path(__file__).parent / "data" / "trace-v1.jsonl"

    async def scenario():
        app = ReplayApp(load(trace), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=(200, 50)) as pilot:
            await pilot.pause()
            info = app.info
            assert info.mask_token_text is None
            layers = ",".join(map(str, info.target_layer_ids))
            header = widget_text(app, app.main.query_one("#header"))
            assert f" reads {layers} mask {info.mask_token_id}  {info.dtype}" in header
            setups = [e.text for e in app.status_log if e.text.startswith("session: ")]
            assert setups == [f"session: {info.drafter_kind} drafter reads target layers "
                              f"{', '.join(map(str, info.target_layer_ids))} of "
                              f"{info.target_layers}; mask token {info.mask_token_id}; block "
                              f"{info.block_size}; {info.dtype} on {info.backend}"]

    run(scenario())


def test_replay_play_speed_keys_go_round_by_round_and_faster(pair, tmp_path):
    """`c` played a stage every 0.08 s whatever the recording's length (a 5,000-round trace
    took 33 minutes to watch). `+` / `-` set the speed, before `c` or while playing
    (which goes on): the status line names it, and past stage by stage every frame drawn is
    a round's end, whole rounds a tick."""
    from dflash_tui.app.play_speed import DEFAULT_SPEED, PLAY_SPEEDS

    trace = record_headless(pair, tmp_path / "long.jsonl", 40)

    async def scenario():
        app = ReplayApp(load(trace), show_timings=False, export_dir=Path("unused"),
                        armed=Breakpoints(nonfinite=False))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            drawn = []
            show = app.show_position
            app.show_position = lambda: (show(), drawn.append((app.record.round, app.record.stage)))
            keys = widget_text(app, app.main.query_one("#keys"))
            assert " + faster " in keys and " - slower " in keys
            assert app.speed == DEFAULT_SPEED and PLAY_SPEEDS[DEFAULT_SPEED].unit == "stage"
            await press_and_settle_replay(pilot, "minus", "minus")
            assert app.speed == 0 and app.status.message == "play speed 4 stages/s (slowest): c plays"
            await press_and_settle_replay(pilot, "plus", "plus")
            assert app.status.message == "play speed 10 rounds/s: c plays"
            await pilot.press("c")
            assert app.playing and app.status.message.startswith("playing at 10 rounds/s")
            await wait_for(pilot, lambda: app.record.round >= 3, what="three rounds played")
            await pilot.press("plus")  # faster while playing: it plays on
            assert app.playing and app.status.message.startswith("playing at 100 rounds/s")
            await wait_for(pilot, lambda: not app.playing, what="the end of the recording")
            assert app.status.kind == "finished" and app.record.round == 39
            assert drawn and all(stage == "commit" for _, stage in drawn), drawn
            rounds = [r for r, _ in drawn]
            assert rounds == sorted(rounds) and len(rounds) < 40  # not a frame a round at 100/s

    run(scenario())


@pytest.mark.parametrize("argv, message", [
    (["replay", "{tmp}/missing.jsonl"], "no such trace"),
    (["{tmp}/no-model"], "no such file or directory"),
    (["{target}", "--draft", "{tmp}/no-drafter"], "no such drafter directory"),
    (["{target}", "--block", "0"], "--block 0"),
    (["{target}", "--max-tokens", "0"], "--max-tokens 0"),
    (["{target}", "--prompt", "  "], "the prompt is empty"),
    (["{target}", "--prompt-file", "{tmp}/none.txt"], "no such prompt file"),
    (["{target}", "--keep-rounds", "0"], "--keep-rounds 0"),
    (["{target}", "--trace", "{tmp}/t.jsonl", "--no-trace"], "not allowed with argument --trace"),
    (["replay", "{tmp}/missing.jsonl", "--export-dir", "{target}/config.json"], "is not a directory"),
])
def test_bad_arguments_end_with_one_line_and_exit_2(pair, tmp_path, capsys, argv, message):
    argv = [a.format(tmp=tmp_path, target=pair[0]) for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("dflash-tui: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_the_header_numbers_fit_the_width_they_are_given(live_session):
    """The header's numbers each whole or left out: where they fitted but for the gap after
    the last one, that gap went past the edge and Textual cut the line there, the stage with
    it (`stage verif…`, seen at 80 columns on replay's round 31/399)."""
    trace, _, _ = live_session

    async def scenario():
        app = ReplayApp(load(trace), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await press_and_settle_replay(pilot, "right", "backspace")
            header, frame = app.main.query_one("#header"), app.frame()
            whole = header._numbers(frame).plain.rstrip()
            assert whole.endswith("stage verify")
            for width in range(len(whole) - 30, len(whole) + 3):
                numbers = header._numbers(frame, width).plain
                assert len(numbers) <= width and numbers.rstrip().endswith("stage verify"), \
                    (width, numbers)

    run(scenario())


def test_going_to_a_damaged_round_of_a_long_trace_says_it_is_damaged_and_what_is_held(
        live_session, tmp_path):
    """Opened as `dflash-tui replay` opens it (indexed, not read through), a trace whose
    round 1 of 0-3 is torn: `g 1` says the round's line is damaged, where, and the rounds
    held as spans. It said `is not in this recording (it holds rounds 0, 1, 2, …` in a long
    trace: the first 12 numbers, round 1 among them, its damage found only by reading it."""
    from dflash_tui.app.replay import open_recording

    trace, _, _ = live_session
    header, first, second, third = trace.read_bytes().splitlines(keepends=True)
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(header + first + second[: len(second) // 2] + b"\n" + third)

    async def scenario():
        app = ReplayApp(open_recording(torn), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await pilot.press("g")
            await wait_for(pilot, lambda: app.main.asking, what="the question line")
            await pilot.press("1", "enter")
            await pilot.pause()
            assert any(f"round 1 is damaged in this recording ({torn}:3) (it holds rounds 0, 2)"
                       in n.message for n in app._notifications), \
                [n.message for n in app._notifications]

    run(scenario())


def test_the_rounds_a_recording_holds_are_said_as_spans():
    from dflash_tui.app.replay_app import _spans

    assert list(_spans([0, 1, 2, 4, 6, 7])) == ["0–2", "4", "6–7"]
    assert list(_spans([])) == []
