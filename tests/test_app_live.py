"""Pilot tests of the live app: the real engine on tiny fixture checkpoints, stepped by keys,
checked by what the panels show."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest
from textual.command import CommandList
from textual.widgets import TabbedContent

from dflash_tui.breakpoints import Breakpoints
from dflash_tui.app.live import LiveApp
from dflash_tui.engine.records import STAGE_ORDER
from dflash_tui.panels.stream import round_tokens
from dflash_tui.panels.table import FastTable

from app_helpers import SIZE, launch, oracle_proposer, press_and_settle, run, table_rows, wait_for, \
    wait_idle, wait_loaded, widget_text


def test_stage_by_stage_every_panel_follows(pair):
    async def scenario():
        app = LiveApp(launch(pair), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            header = widget_text(app, app.main.query_one("#header"))
            assert "llama-target" in header and "DFlash2 2L H64 K8" in header
            assert "float32 · cpu" in header
            prompt_tokens = app.info.prompt_tokens
            ranks_table = app.main.query_one("#ranks-table", FastTable)
            for stage in STAGE_ORDER:
                await press_and_settle(pilot, "s")
                record = app.record
                assert record.stage == stage and record.round == 0
                state = widget_text(app, app.main.query_one("#state"))
                assert f"after {stage}" in state
                last = record.stages[-1]
                cursor_line = next(line for line in state.splitlines() if "cursor" in line)
                cells = [c for c in cursor_line.split() if c != "│"]
                assert cells[-2:] == [str(last.before.cursor), str(last.after.cursor)]
                if stage == "context":  # the context write brings the cursor to the anchor
                    assert last.after.cursor == prompt_tokens == record.position
                probes = app.main.query_one("#probes-table", FastTable)
                assert probes.row_count == len(record.probes)
                if stage == "select":
                    rows = table_rows(ranks_table)
                    assert len(rows) == record.gamma
                    assert all(row[-1] == "pending" for row in rows)
                    path = table_rows(app.main.query_one("#selector-path", FastTable))
                    assert [r[0] for r in path] == [str(s) for s in range(record.gamma)]
                if stage == "verify":
                    rows = table_rows(ranks_table)
                    assert [int(r[3]) for r in rows] == [r.rank for r in record.ranks]
                    accepted = [r[-1] for r in rows].count("✓ accepted")
                    assert accepted == record.accepted
            stream = widget_text(app, app.main.query_one("#stream"))
            assert "The quick brown fox" in stream
            assert f"{record.accepted}/{record.gamma} accepted" in stream
            history = widget_text(app, app.main.query_one("#history"))
            assert "over 1 round " in history  # one round, not "1 rounds"
            assert "round 0" in widget_text(app, app.main.query_one("#header"))

    run(scenario())


def test_accepted_rejected_and_bonus_tokens_are_shown(pair):
    """With proposals that match the target for two slots, verify accepts two, the stream
    colours them, the ranks say so and the history counts acceptance by slot."""
    proposer = oracle_proposer(pair, "The quick brown fox", 40, good=2)

    async def scenario():
        app = LiveApp(launch(pair, proposer=proposer), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n", "n", "s", "s", "s", "s")  # round 2 at verify
            record = app.record
            assert record.stage == "verify" and record.accepted == 2
            fates = [fate for _, fate in round_tokens(record)]
            assert fates == ["accepted", "accepted", "rejected", "rejected", "bonus"]
            assert record.bonus == record.target_tokens[2]
            rows = table_rows(app.main.query_one("#ranks-table", FastTable))
            assert [r[-1] for r in rows] == ["✓ accepted", "✓ accepted", "✗ rejected", "· after reject"]
            stream = widget_text(app, app.main.query_one("#stream"))
            shown = "".join(record.text(t) for t in record.proposals[:2])
            assert shown.strip() in stream.replace("\n", "")
            history = widget_text(app, app.main.query_one("#history"))
            assert "mean 2.00 over 2 rounds" in history
            assert "s0 100% (2/2)" in history
            await press_and_settle(pilot, "full_stop", "full_stop")
            assert "s2 0% (0/2)" in widget_text(app, app.main.query_one("#history"))
            header = widget_text(app, app.main.query_one("#header"))
            assert "mean acc 2.00" in header and "tokens 7" in header

    run(scenario())


def test_sliding_ring_and_sampling_are_shown(make_pair):
    """A drafter with a sliding layer shows its ring; at T > 0 the selector shows q."""
    sliding = make_pair("llama", "DFlash2DraftModel", sliding=True)

    async def scenario():
        app = LiveApp(launch(sliding, temperature=0.8), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n", "s", "s", "s", "2")
            after = app.record.state_after
            assert after.ring_window is not None
            ring = next(line for line in widget_text(app, app.main.query_one("#state")).splitlines()
                        if "ring" in line)
            assert f"{after.ring_occupancy}/{after.ring_window}" in ring
            assert "T=0.8" in widget_text(app, app.main.query_one("#header"))
            candidates = widget_text(app, app.main.query_one("#selector-candidates"))
            header = next(line for line in candidates.splitlines() if "unary" in line).split()
            assert header == ["#", "token", "unary", "edge", "total", "q"]
            q = app.record.selector.slots[0].q
            assert abs(sum(q) - 1) < 1e-6 and f"{q[0]:.3f}" in candidates

    run(scenario())


def test_dflash_v1_on_a_recurrent_target(make_pair):
    """No selector to show; the rollback of a gated-DeltaNet target is a replay."""
    v1 = make_pair("qwen35", "DFlashDraftModel")

    async def scenario():
        app = LiveApp(launch(v1), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            assert "DFlash 2L H64 block 16" in widget_text(app, app.main.query_one("#header"))
            await press_and_settle(pilot, "n", "2")
            record = app.record
            assert record.selector is None and record.rollback.kind == "replay"
            assert "no candidate selector" in widget_text(app, app.main.query_one("#selector"))
            state = widget_text(app, app.main.query_one("#state"))
            rows = record.rollback.rows
            assert f"replay {rows} row{'s' * (rows != 1)}" in state
            ranks = table_rows(app.main.query_one("#ranks-table", FastTable))
            assert [r[5] for r in ranks] == ["—"] * record.gamma  # "in K" has no meaning here

    run(scenario())


def test_the_end_marker_keeps_its_reason_on_its_line(pair):
    """At 80 columns the tokens panel of this 20-token decode ended one line with `⏹` and
    began the next with `length`: the marker and its reason keep to one line, at 80
    columns and wider (the panel's text wraps anew)."""
    async def scenario():
        app = LiveApp(launch(pair, max_tokens=20), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await pilot.press("c")
            await wait_for(pilot, lambda: app.finished == "length", what="the budget")
            await wait_idle(pilot)
            for width in (80, 84, 90, 100, 120):
                await pilot.resize_terminal(width, 24)
                app.render_now()
                await pilot.pause()
                stream = widget_text(app, app.main.query_one("#stream-text")).split("\n")
                marked = [line.rstrip() for line in stream if "⏹" in line]
                assert len(marked) == 1 and marked[0].endswith("⏹ length"), (width, stream)

    run(scenario())


def test_round_then_run_to_the_token_budget(pair):
    async def scenario():
        app = LiveApp(launch(pair, max_tokens=12), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n")
            assert app.record.complete and len(app.history) == 1
            await pilot.press("c")
            await wait_for(pilot, lambda: app.finished is not None, what="the budget")
            await wait_idle(pilot)
            app.render_now()
            await pilot.pause()
            generated = int(app.history.committed.values.sum()) + 1
            assert generated == 12 and app.finished == "length"
            assert app.status.kind == "finished"
            assert app.status.message.startswith("finished: reached the token budget (12 tokens) · ")
            assert f"over {len(app.history)} rounds" in widget_text(app, app.main.query_one("#history"))
            header = widget_text(app, app.main.query_one("#header"))
            assert "tokens 12" in header
            # a finished session refuses more steps and says how to go on
            rounds = len(app.history)
            await pilot.press("n")
            await pilot.pause()
            assert len(app.history) == rounds
            gamma = app.gamma_next
            await pilot.press("plus")  # no γ for rounds that will never come
            await pilot.pause()
            assert app.gamma_next == gamma and "γ " + str(gamma) + "→" not in widget_text(
                app, app.main.query_one("#header"))
            assert app._notifications and list(app._notifications)[-1].message.startswith(
                "the session has finished: reached the token budget (12 tokens); r restarts")
            keys = widget_text(app, app.main.query_one("#keys"))
            assert keys.split()[:4] == ["p", "prompt", "r", "restart"]  # what goes on, first

    run(scenario())


def test_gamma_keys_take_effect_next_round(pair):
    async def scenario():
        app = LiveApp(launch(pair, gamma=2), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "s", "s")  # mid-round: context, draft
            await press_and_settle(pilot, "plus")
            assert "γ 2→3" in widget_text(app, app.main.query_one("#header"))
            await press_and_settle(pilot, "n")
            assert app.record.gamma == 2 and app.record.complete  # this round keeps its gamma
            await press_and_settle(pilot, "n")
            assert app.record.gamma == 3
            assert app.main.query_one("#ranks-table", FastTable).row_count == 3
            assert not app.main.query_one("#ranks-note").display  # finite logits: no line
            await press_and_settle(pilot, "minus", "minus", "minus")
            assert app.gamma_next == 1  # and not 0: refused with a warning

    run(scenario())


def test_nonfinite_breakpoint_stops_the_run_and_f_finds_it(nan_pair):
    async def scenario():
        app = LiveApp(launch(nan_pair), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await pilot.press("c")
            await wait_for(pilot, lambda: app.status.kind == "breakpoint", what="the breakpoint")
            await wait_idle(pilot)
            record = app.record
            assert (record.round, record.stage) == (0, "draft")
            first = record.first_nonfinite
            assert (first.stage, first.layer) == ("draft", 1)
            assert "non-finite in draft L1 ffn_out (5 buffers)" in app.status.message
            # the ranks tab, before any rank: the slots whose drafter logits went NaN, and
            # the first buffer the probes found non-finite before them
            note = app.main.query_one("#ranks-note")
            assert note.display and widget_text(app, note).strip() == (
                f"✗ drafter logits NaN/Inf: slots 0–{record.gamma - 1}, "
                "after draft layer 1 ffn_out")
            await pilot.press("f")
            await pilot.pause()
            assert app.main.query_one("#inspector", TabbedContent).active == "tab-probes"
            table = app.main.query_one("#probes-table", FastTable)
            row = table_rows(table)[table.cursor_row]
            assert row[:3] == ["draft", "1", f"{first.name} ◀ first"]
            assert int(row[3]) == first.nan > 0
            summary = widget_text(app, app.main.query_one("#probes-summary"))
            assert "5 non-finite, first draft L1 ffn_out (f)" in summary
            # resuming runs past the stage that tripped, to the next bad one: round 1's draft
            await pilot.press("c")
            await wait_for(pilot, lambda: app.record.round == 1 and app.status.kind == "breakpoint",
                           what="the next round's breakpoint")
            await wait_idle(pilot)
            assert app.record.stage == "draft" and len(app.history) == 1

    run(scenario())


@pytest.mark.parametrize("armed, stage", [
    (Breakpoints(nonfinite=False, zero_accepted=True), "verify"),
    (Breakpoints(nonfinite=False, rank_above=True, rank_threshold=0), "verify"),
])
def test_verify_breakpoints_stop_on_verify(pair, armed, stage):
    async def scenario():
        app = LiveApp(launch(pair, max_tokens=60), show_timings=False, armed=armed,
                      export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await pilot.press("c")
            await wait_for(pilot, lambda: app.status.kind in ("breakpoint", "finished"),
                           what="a stop")
            await wait_idle(pilot)
            assert app.status.kind == "breakpoint"
            assert app.record.stage == stage
            if armed.zero_accepted:
                assert app.record.accepted == 0 and "accepted == 0" in app.status.message
            else:
                assert any(r.rank > 0 for r in app.record.ranks if not r.after_rejection)
                assert "true-token rank" in app.status.message

    run(scenario())


def test_breakpoints_menu_arms_position_and_the_run_stops_there(pair):
    async def scenario():
        app = LiveApp(launch(pair, max_tokens=60), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            target = app.prefill.state.anchor_position + 3
            await pilot.press("b")
            await wait_for(pilot, lambda: app.screen is not app.main, what="the menu")
            await pilot.press("p")  # arm "position reached"
            position = app.screen.query_one("#bp-position_at")
            position.value = str(target)
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: app.screen is app.main, what="the menu to close")
            assert app.armed.position and app.armed.position_at == target
            assert f"pos≥{target}" in app.status.right
            await pilot.press("c")
            await wait_for(pilot, lambda: app.status.kind in ("breakpoint", "finished"), what="a stop")
            await wait_idle(pilot)
            record = app.record
            assert record.stage == "commit"
            assert record.state_before.anchor_position < target <= record.state_after.anchor_position
            assert f"position {record.state_after.anchor_position} reached" in app.status.message

    run(scenario())


def test_pause_stops_a_run_after_the_stage_in_flight(pair):
    async def scenario():
        app = LiveApp(launch(pair, max_tokens=10_000), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await pilot.press("c")
            await wait_for(pilot, lambda: len(app.history) >= 3, what="three rounds")
            await pilot.press("space")
            await wait_idle(pilot)
            assert app.status.kind == "paused"
            stopped = (len(app.history), app.record.stage)
            await pilot.pause(0.2)  # the engine stays put (no stage runs after a pause)
            assert (len(app.history), app.record.stage) == stopped
            assert app.engine.busy_stage is None

    run(scenario())


def test_new_prompt_and_restart_open_fresh_sessions(pair):
    async def scenario():
        app = LiveApp(launch(pair), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n", "n")
            assert len(app.history) == 2
            await pilot.press("p")
            await wait_for(pilot, lambda: app.screen is not app.main, what="the prompt dialog")
            await pilot.press("ctrl+n")
            await pilot.press(*"def add")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: app.info is not None and app.info.prompt == "def add",
                           what="the new session")
            assert len(app.history) == 0 and app.record is None
            assert "def add" in widget_text(app, app.main.query_one("#stream"))
            await press_and_settle(pilot, "n")
            first = app.record
            await press_and_settle(pilot, "r")
            await wait_for(pilot, lambda: not app.loading, what="the restart")
            assert len(app.history) == 0 and app.info.prompt == "def add"
            await press_and_settle(pilot, "n")
            assert app.record.committed_tokens == first.committed_tokens  # greedy: same again

    run(scenario())


def test_a_refused_restart_makes_no_directory_and_is_shown_as_a_refusal(pair):
    """A new prompt past the target's context (2048 tokens) is refused: the session goes on
    in the directory it had; a restart that opens gets its own once it writes its trace."""
    out = Path("out")

    async def scenario():
        app = LiveApp(launch(pair), show_timings=False, export_dir=out)
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n")
            first = app.session_dir.path
            assert [p.name for p in out.iterdir()] == [first.name]
            await pilot.press("p")
            await wait_for(pilot, lambda: app.screen is not app.main, what="the prompt dialog")
            app.screen.query_one("#prompt-text").text = "fox " * 3000
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: app.screen is app.main and not app.loading, what="the refusal")
            assert app.status.kind == "paused"  # not an engine error: the session is as it was
            assert app.status.message.startswith("restart refused: the prompt dialog (p): the prompt is ")
            assert "context of 2048 tokens" in app.status.message
            assert not any("engine error" in n.message or n.title == "engine error"
                           for n in app._notifications)
            refusals = [e for e in app.status_log if "the prompt is " in e.text]
            assert len(refusals) == 1, refusals  # the notice repeats the status: logged once
            assert [p.name for p in out.iterdir()] == [first.name] and app.session_dir.path == first
            assert not app.main.has_class("-restarting")  # no longer dimmed: it is the session
            await press_and_settle(pilot, "n")  # the old session goes on, into its own trace
            assert len(app.history) == 2
            assert len((first / "trace.jsonl").read_text().splitlines()) == 3  # header + 2 rounds
            app._restart(None)  # as `r` does; nothing from the engine lands before the await
            assert app.main.has_class("-restarting")  # the old session's panels, dimmed
            pending = app._next_session_dir
            app.action_restart()  # a second restart while the first loads: refused, not queued
            app.action_prompt()
            assert app._next_session_dir is pending and app.screen is app.main
            assert "a session is loading" in app.status_log.entries[-1].text
            await wait_for(pilot, lambda: not app.loading, what="the restart")
            assert not app.main.has_class("-restarting")
            second = app.session_dir.path
            assert second != first
            assert sorted(p.name for p in out.iterdir()) == sorted([first.name, second.name])
            assert (second / "trace.jsonl").exists()

    run(scenario())


def test_prompt_dialog_starts_a_sample_prompt(pair, tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "01-add.txt").write_text("def add(a, b):\n")
    (tmp_path / "prose").mkdir()
    # A file's final newline is not part of the prompt: the bench drops it, so must the dialog.
    (tmp_path / "prose" / "01-fox.txt").write_text("The rain in Spain\n")

    async def scenario():
        app = LiveApp(launch(pair), show_timings=False, export_dir=Path("unused"), prompts_dir=tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await pilot.press("p")
            await wait_for(pilot, lambda: app.screen is not app.main, what="the prompt dialog")
            options = app.screen.query_one("#prompt-samples")
            assert [o.id for o in options.options] == [str(tmp_path / "code" / "01-add.txt"),
                                                       str(tmp_path / "prose" / "01-fox.txt")]
            options.focus()
            await pilot.press("down", "enter")  # the second sample, into the editor
            assert app.screen.query_one("#prompt-text").text == "The rain in Spain"
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: app.info is not None and app.info.prompt == "The rain in Spain",
                           what="the new session")
            await pilot.press("p")
            await wait_for(pilot, lambda: app.screen is not app.main, what="the prompt dialog")
            await pilot.press("escape")  # cancel: the session stays as it was
            await wait_for(pilot, lambda: app.screen is app.main, what="the dialog to close")
            assert app.info.prompt == "The rain in Spain" and not app.loading

    run(scenario())


def test_prompt_dialog_lists_a_sample_a_line_at_80_columns(pair, tmp_path):
    """Each sample's name and the start of its text on one line, cut at the edge with `…`:
    wrapped, each took two lines and the list showed three of its eight rows' worth, the
    text stopping mid-word (`removes duplica`) with nothing saying it went on."""
    names = [f"code/{i:02d}-a-sample-with-a-long-name" for i in range(1, 7)]
    for name in names:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / f"{name}.txt").write_text("Write a function that " + "does a thing and " * 20)
    (tmp_path / "code" / "07-short.txt").write_text("Add two numbers.\n")

    async def scenario():
        app = LiveApp(launch(pair), show_timings=False, export_dir=Path("unused"), prompts_dir=tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await pilot.press("p")
            await wait_for(pilot, lambda: app.screen is not app.main, what="the prompt dialog")
            await pilot.pause()
            lines = [line.strip("▊▎▔▁▂▃▄▅▆▇█ ") for line in  # the box's edges, the scrollbar
                     widget_text(app, app.screen.query_one("#prompt-samples")).splitlines()]
            lines = [line for line in lines if line]
            assert len(lines) == 6  # the list's rows, one sample each
            assert [line.split()[0] for line in lines] == names
            assert all(line.endswith("…") for line in lines), lines
            options = app.screen.query_one("#prompt-samples").options
            assert str(options[0].prompt).endswith("a thing and doe…")  # cut: said so, on any width
            assert str(options[-1].prompt).endswith("07-short  Add two numbers.")  # whole: no mark

    run(scenario())


def test_command_palette_runs_engine_commands_and_toggles_breakpoints(pair):
    async def scenario():
        app = LiveApp(launch(pair), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            for text in ("Step one round", "Breakpoint: accepted == 0"):
                await pilot.press("ctrl+p")
                await wait_for(pilot, lambda: app.screen is not app.main, what="the palette")
                await pilot.press(*text)
                await wait_for(pilot, lambda: app.screen.query_one(CommandList).option_count > 0,
                               what="a match")
                await pilot.press("enter")
                await wait_for(pilot, lambda: app.screen is app.main, what="the palette to close")
                await wait_idle(pilot)
            assert len(app.history) == 1
            assert app.armed.zero_accepted and "accepted=0" in app.status.right
            assert app.engine.armed.zero_accepted  # the engine got the new breakpoints too

    run(scenario())


def test_export_failure_is_reported_and_the_session_goes_on(pair, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the export directory should be")

    async def scenario():
        app = LiveApp(launch(pair), show_timings=False, export_dir=blocker / "snapshots")
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n")
            await pilot.press("x")
            await wait_for(pilot, lambda: app.status.kind == "error", what="the export error")
            assert "export failed" in app.status.message and "not-a-dir" in app.status.message
            await press_and_settle(pilot, "n")
            assert len(app.history) == 2

    run(scenario())


def test_a_checkpoint_refused_while_loading_is_shown_and_exits_2(pair, tmp_path):
    from fixtures import drafter_tensors, write_drafter

    target, draft = pair
    config = json.loads((draft / "config.json").read_text())
    config["vocab_size"] += 1  # a drafter built for another vocabulary
    bad = write_drafter(tmp_path / "other-vocab", config, tensors=drafter_tensors(config))

    async def scenario():
        app = LiveApp(launch((target, bad)), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.failure is not None, what="the refusal")
            assert "vocab_size" in app.failure.message and not app.failure.detail
            assert app.status.kind == "error" and "vocab_size" in app.status.message
            await pilot.press("n")  # nothing to step: not taken, not crashed
            await pilot.press("q")
        return app

    app = run(scenario())
    assert app.return_code == 2


def other_vocab_drafter(pair, tmp_path) -> Path:
    """The pair's drafter with a vocabulary one larger than its target's: a load refused."""
    from fixtures import drafter_tensors, write_drafter

    config = json.loads((pair[1] / "config.json").read_text())
    config["vocab_size"] += 1
    return write_drafter(tmp_path / "other-vocab", config, tensors=drafter_tensors(config))


def test_after_a_failed_load_the_header_says_so_and_the_key_bar_keeps_what_works(pair, tmp_path):
    """A session that cannot open leaves nothing to step: the header, which said `loading…`
    for good, says the load failed, and the key bar drops the step and session keys (s, n, c,
    γ, p, r), which could only answer "no session"; help, the log and quit stay."""
    target, bad = pair[0], other_vocab_drafter(pair, tmp_path)

    async def scenario():
        app = LiveApp(launch((target, bad)), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.failure is not None, what="the refusal")
            await pilot.pause()
            header = widget_text(app, app.main.query_one("#header"))
            assert "load failed" in header and "loading" not in header
            assert "loading" not in widget_text(app, app.main.query_one("#stream"))
            keys = widget_text(app, app.main.query_one("#keys")).split()
            assert "quit" in keys and "help" in keys
            assert not {"stage", "round", "run", "γ+", "prompt", "restart"} & set(keys), keys
            await pilot.press("p", "r", "L")  # the dialog and a restart are not taken; the log is
            assert type(app.screen).__name__ == "MessagesScreen"
            assert "vocab_size" in widget_text(app, app.screen)
            await pilot.press("escape", "q")
        return app

    assert run(scenario()).return_code == 2


def test_after_a_failed_load_the_palette_offers_only_what_works(pair, tmp_path):
    """The key bar kept only help, the log and quit after a failed load, but the palette
    (ctrl+p) went on listing Step one stage, Run / pause, Export round, ..., each of which
    then said "no session". Now it lists what the key bar does, with Textual's own commands
    (quit among them)."""
    target, bad = pair[0], other_vocab_drafter(pair, tmp_path)

    async def scenario():
        app = LiveApp(launch((target, bad)), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.failure is not None, what="the refusal")
            await pilot.press("ctrl+p")
            await wait_for(pilot, lambda: app.screen is not app.main, what="the palette")
            commands = app.screen.query_one(CommandList)
            await wait_for(pilot, lambda: commands.option_count > 0, what="the commands")
            await pilot.pause()
            titles = {str(commands.get_option_at_index(i).prompt).split("\n")[0]
                      for i in range(commands.option_count)}
            assert {"Help", "Message log", "Quit"} <= titles, titles
            assert not {"Step one stage", "Step one round", "Run / pause", "Increase γ",
                        "New prompt", "Restart session", "Export round", "Go to round",
                        "Breakpoints menu", "Show ranks"} & titles, titles
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is app.main, what="the palette to close")
            await pilot.press("q")
        return app

    assert run(scenario()).return_code == 2


def test_a_draft_folder_the_loader_refuses_is_named_as_draft(pair, tmp_path):
    """The app loads the drafter on its engine thread: its refusal, shown on the status
    line, starts with the option that named the folder (as one from --compare does)."""
    target, draft = pair
    broken = tmp_path / "torn-weights"
    shutil.copytree(draft, broken)
    (broken / "model.safetensors").write_bytes(b"")

    async def scenario():
        app = LiveApp(launch((target, broken)), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.failure is not None, what="the refusal")
            assert app.failure.message.startswith(f"--draft {broken}: {broken / 'model.safetensors'}: ")
            assert not app.failure.detail  # a refusal, no traceback
            assert app.status.message.startswith(f"cannot open the session: --draft {broken}: ")
            await pilot.press("q")
        return app

    assert run(scenario()).return_code == 2


def test_a_draft_folder_the_session_refuses_is_named_as_draft(pair, tmp_path):
    """A drafter whose target_layer_ids this target does not have is refused when the
    session opens, not by the loader: that refusal started with the bare folder."""
    from fixtures import drafter_tensors, write_drafter

    target, draft = pair
    config = json.loads((draft / "config.json").read_text())
    config["dflash_config"]["target_layer_ids"] = [1, 7]
    bad = write_drafter(tmp_path / "other-layers", config, tensors=drafter_tensors(config))

    async def scenario():
        app = LiveApp(launch((target, bad)), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.failure is not None, what="the refusal")
            assert app.failure.message.startswith(f"--draft {bad}: target_layer_ids[1] = 7 ")
            assert app.status.message.startswith(f"cannot open the session: --draft {bad}: ")
            await pilot.press("q")
        return app

    assert run(scenario()).return_code == 2


def test_quit_mid_stage_returns_at_once(pair):
    """An MLX op cannot be interrupted: quitting must not wait for the stage in flight. The
    engine's own forced-proposal hook holds the select stage open until the test lets go."""
    inside, release = threading.Event(), threading.Event()

    def proposer(tokens, gamma):
        inside.set()
        release.wait(30)
        return [tokens[-1]] * gamma

    async def scenario():
        app = LiveApp(launch(pair, proposer=proposer), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await pilot.press("c")
            await wait_for(pilot, inside.is_set, what="the engine to enter select")
            assert app.engine.busy_stage == "select"
            t0 = time.monotonic()
            await pilot.press("q")
        return app, time.monotonic() - t0

    try:
        app, seconds = run(scenario())
        # The stage is held for 30 s: a quit that waited for it would take that long and
        # find the engine done. The bar is far from both a loaded CI machine's second and
        # the hold, so it tells the two apart without timing the machine.
        assert seconds < 10, f"quit took {seconds:.2f} s"
        assert app.return_code == 0
        assert app.engine.is_alive()  # still inside the stage: nobody waited for it
    finally:
        release.set()
    app.engine.join(10)
    assert not app.engine.is_alive()  # it finished the stage, saw Quit and closed


def test_the_tokens_panel_title_keeps_its_numbers_whole_at_80_columns(pair):
    """`round 0 · 15/15 accepted · +16 tokens` is wider than the panel's edge at 80 columns:
    Textual's own cut left `+1…`, a number that was never there. The parts go whole, the
    last first, and come back on a wider terminal."""
    prompt = "The quick brown fox"
    proposer = oracle_proposer(pair, prompt, 40, good=15)

    def title(app) -> str:
        return widget_text(app, app.main.query_one("#stream")).splitlines()[-1].strip("╰─╯ ")

    async def scenario():
        app = LiveApp(launch(pair, prompt=prompt, gamma=15, max_tokens=40, proposer=proposer),
                      show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n")
            assert app.record.accepted == 15 and len(app.record.committed_tokens) == 16
            assert title(app) == "round 0 · 15/15 accepted · +16"
            await pilot.resize_terminal(120, 35)
            await wait_for(pilot, lambda: title(app).endswith("+16 tokens"), what="the whole title")
            assert title(app) == "round 0 · 15/15 accepted · +16 tokens"

    run(scenario())


def test_the_selector_tab_names_the_slots_off_the_argmax_at_80x24(pair):
    """The note above the path table is the tab's answer to "where did the walk leave the
    argmax": at 80 columns it used to read `top-K 8  walk left the argmax at slot` and the
    slot numbers fell off the screen (the path column is past the view there too)."""
    from dflash_tui.breakpoints import spans

    async def scenario():
        app = LiveApp(launch(pair, gamma=15, max_tokens=200), show_timings=False,
                      export_dir=Path("unused"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "2")
            for _ in range(10):  # the fixture drafter's walk leaves its argmax within a few
                await press_and_settle(pilot, "n")
                off = app.record.selector.off_argmax_slots
                if off and off[-1] >= 10:
                    break
            assert off and off[-1] >= 10, "no round left the argmax at a two-digit slot"
            note = widget_text(app, app.main.query_one("#selector-note"))
            assert f"slot{'s' * (len(off) > 1)} {spans(off)}" in note, note

    run(scenario())


def test_a_finished_sessions_history_keeps_every_slot_it_proposed(pair):
    """The round before --max-tokens proposes only the tokens left (`γ 1→7 capped`); the
    history's slot bars followed that round's γ, so every finished session ended showing one
    bar, the others' acceptance gone from the panel."""
    async def scenario():
        app = LiveApp(launch(pair, gamma=7, max_tokens=12), show_timings=False,
                      export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await pilot.press("c")
            await wait_for(pilot, lambda: app.finished is not None, what="the budget")
            await press_and_settle(pilot)
            assert app.record.gamma < 5  # the last round was capped below slot 5
            ruler = widget_text(app, app.main.query_one("#history")).splitlines()[-2]
            axis = ruler.split(" s0 ")[0].split()  # the slot axis, before the selected slot
            assert axis[1:3] == ["0", "·"] and "5" in axis, ruler

    run(scenario())
