"""The compare lab in the TUI, its trace, replay and export: the Compare tab (drift table,
slots side by side, running means) following the round on screen, the breakpoint
"configurations diverge beyond tol", and the compare columns of the flat tables. Every
number on screen or in a table is checked against the Compare records the engine produced.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from textual.widgets import Static, TabbedContent

from dflash_tui import cli, load_trace
from dflash_tui.app.live import LiveApp
from dflash_tui.app.replay import load
from dflash_tui.app.replay_app import ReplayApp
from dflash_tui.breakpoints import Breakpoints, hits
from dflash_tui.panels.ranks import DIFFERS
from dflash_tui.panels.table import FastTable

from app_helpers import SIZE, check_every_column_reachable, launch, oracle_proposer, press_and_settle, run, \
    table_rows, wait_for, wait_idle, wait_loaded, widget_text
from one_line import refusal

OFF_BY_ONE = "layer-offset=-1"  # diverges at the context capture in every round
ROUNDS = 3


def compare_tab(app):
    return app.main.query_one("#inspector", TabbedContent).get_tab("tab-compare")


def drift_rows(app) -> list[list[str]]:
    return table_rows(app.main.query_one("#compare-drift", FastTable))


def slot_rows(app) -> list[list[str]]:
    return table_rows(app.main.query_one("#compare-slots", FastTable))


def summary(app) -> str:
    return widget_text(app, app.main.query_one("#compare-summary"))


def expected_drift(compare) -> list[list[str]]:
    """The drift table's first five columns, straight from the record."""
    first = compare.first_divergent
    rows = []
    for b in compare.buffers:
        mark = "▶" if first is not None and (b.stage, b.layer, b.buffer) == (
            first.stage, first.layer, first.buffer) else ""
        rows.append([mark, b.stage, "—" if b.layer is None else str(b.layer), b.buffer, rel_text(b)])
    return rows


def rel_text(b) -> str:
    return "n/f" if b.nonfinite else "0" if b.rel_err == 0 else f"{b.rel_err:.2e}"


def expected_slots(record) -> list[list[str]]:
    """Per slot: the drafter's proposal, rank (↷: its walk left the argmax) and fate, then
    the reference's (its rank against its own target: none where the target never saw its
    prefix), the drafter's target and the reference's ("=": the same)."""
    c = record.compare
    walks = {s.slot: s for s in record.selector.slots}  # the fixture drafters are DFlash2
    rows = []
    for r in record.ranks:
        fate = "✓" if r.accepted else "·" if r.after_rejection else "✗"
        theirs = "✓" if r.slot < c.accepted else "·" if r.slot > c.accepted else "✗"
        mine = "↷" if walks[r.slot].off_argmax else " "
        own = c.targets[r.slot]
        rank = "—" if own is None else str(c.ranks[r.slot])
        rank += "↷" if c.left_argmax[r.slot] else " "
        target = "—" if own is None else "=" if own == r.target else record.text(own)
        rows.append([str(r.slot), record.text(r.proposal), f"{r.rank}{mine}", fate,
                     record.text(c.proposals[r.slot]), rank, theirs, record.text(r.target), target])
    return rows


def visible(token: str) -> str:
    """A token as a table cell holds it (panels.format.token_cell)."""
    from dflash_tui.panels.format import token_cell

    return token_cell(token)


def shown_slots(app) -> list[list[str]]:
    return slot_rows(app)


def with_visible_tokens(rows):
    return [[r[0], visible(r[1]), r[2], r[3], visible(r[4]), r[5], r[6], visible(r[7]),
             r[8] if r[8] in ("=", "—") else visible(r[8])] for r in rows]


@pytest.fixture(scope="module")
def off_by_one(pair, tmp_path_factory):
    """The live app with --compare layer-offset=-1: three rounds, what the Compare tab
    showed on the way (the live round, round 1 by ←, round 1 beside a pinned round 2), and
    the trace the session wrote."""
    root = tmp_path_factory.mktemp("compare-live")
    seen = {}

    async def scenario():
        app = LiveApp(launch(pair, compare=OFF_BY_ONE), show_timings=False, export_dir=root)
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            seen["tab shown"] = compare_tab(app).display
            await press_and_settle(pilot, *"n" * ROUNDS, "5")
            seen["active"] = app.main.query_one("#inspector", TabbedContent).active
            seen["records"] = [app.history.record(r) for r in range(ROUNDS)]
            seen["live"] = (app.record, drift_rows(app), shown_slots(app), summary(app))
            seen["left out shown"] = app.main.query_one("#compare-left-out").display
            app.main.query_one("#compare-slots", FastTable).focus()
            await press_and_settle(pilot, "down")  # a slot picked here is the app's slot
            seen["slot"] = (app.slot, app.main.query_one("#ranks-table", FastTable).cursor_row)
            await press_and_settle(pilot, "left")
            seen["back"] = (app.record, drift_rows(app), shown_slots(app), summary(app))
            await press_and_settle(pilot, "right", "P", "left")
            seen["pinned"] = (app.record, drift_rows(app), summary(app),
                              app.main.query_one("#compare-drift", FastTable).labels)
            await pilot.press("q")

    run(scenario())
    session, = root.iterdir()
    return session / "trace.jsonl", seen


def test_the_compare_tab_shows_the_reference_beside_the_drafter(off_by_one):
    _, seen = off_by_one
    assert seen["tab shown"] and seen["active"] == "tab-compare"
    assert seen["slot"] == (1, 1)
    records = seen["records"]
    record, drift, slots, text = seen["live"]
    assert record is records[-1] and record.round == ROUNDS - 1
    assert [row[:5] for row in drift] == expected_drift(record.compare)
    assert drift[0][:4] == ["▶", "context", "—", "capture"]  # the off-by-one parts there
    assert record.compare.left_out == () and not seen["left out shown"]
    assert slots == with_visible_tokens(expected_slots(record))
    assert f"reference {OFF_BY_ONE} · tol 0.01" in text
    assert "▶ context capture: rel err" in text
    # the running means up to the round on screen, both sides, from the records themselves
    drafter = sum(r.accepted for r in records) / ROUNDS
    reference = sum(r.compare.accepted for r in records) / ROUNDS
    mean_line = next(line for line in text.splitlines() if "mean r0–2" in line)
    assert mean_line.split()[2:4] == [f"{drafter:.2f}", f"{reference:.2f}"]
    assert mean_line.split()[-1] == f"{ROUNDS}/{ROUNDS}"  # every round diverged


def test_the_compare_tab_follows_the_round_on_screen_and_a_pinned_one(off_by_one):
    _, seen = off_by_one
    records = seen["records"]
    record, drift, slots, text = seen["back"]
    assert record.round == 1 and record.compare == records[1].compare
    assert [row[:5] for row in drift] == expected_drift(records[1].compare)
    assert slots == with_visible_tokens(expected_slots(records[1]))
    assert "mean r0–1" in text
    record, drift, text, labels = seen["pinned"]
    assert record.round == 1 and labels[-1] == "r2 rel err"
    theirs = {(b.stage, b.layer, b.buffer): b for b in records[2].compare.buffers}
    for row, b in zip(drift, records[1].compare.buffers):
        assert row[-1] == rel_text(theirs[(b.stage, b.layer, b.buffer)])
    assert f"r2: accepted {records[2].accepted} · ref {records[2].compare.accepted} · ▶ context capture" in text


def test_at_80x24_less_and_greater_than_reach_every_column_of_the_slots(pair):
    from tokenizers import Tokenizer

    # a special token proposed at every slot: its name is wider than the fixture's words,
    # so the slots are wider than the view (the sample's tokens are, at 80 x 24)
    tokenizer = Tokenizer.from_file(str(Path(pair[0]) / "tokenizer.json"))
    wide = tokenizer.token_to_id("<|endoftext|>")

    async def scenario():
        app = LiveApp(launch(pair, compare=OFF_BY_ONE, proposer=lambda tokens, gamma: [wide] * gamma),
                      show_timings=False, export_dir=Path("out"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n", "5")
            await check_every_column_reachable(pilot, app.main.query_one("#compare-slots", FastTable))

    run(scenario())


def test_the_trace_carries_every_rounds_compare_and_replay_shows_it(off_by_one):
    trace, seen = off_by_one
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert lines[0]["session"]["compare"] == OFF_BY_ONE and lines[0]["session"]["compare_tol"] == 0.01
    assert [line["compare"]["accepted"] for line in lines[1:]] == \
        [r.compare.accepted for r in seen["records"]]

    async def scenario():
        app = ReplayApp(load(trace), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            assert compare_tab(app).display
            await pilot.press("5", "right")
            await pilot.pause()
            app.render_now()
            assert app.record.round == 1 and app.record.compare == seen["records"][1].compare
            assert [row[:5] for row in drift_rows(app)] == expected_drift(app.record.compare)
            assert shown_slots(app) == with_visible_tokens(expected_slots(seen["records"][1]))
            # a stage back: verify, before the reference's record exists (as it was live)
            await pilot.press("backspace")
            app.render_now()
            assert app.record.stage == "verify" and app.record.compare is None
            assert drift_rows(app) == [] and "round 1: the reference runs at commit" in summary(app)
            assert [row[4:] for row in slot_rows(app)] == [["…", "…", "…", row[7], "…"]
                                                            for row in slot_rows(app)]

    run(scenario())


def test_compare_against_itself_shows_no_drift_and_the_breakpoint_never_fires(pair):
    _, draft = pair

    async def scenario():
        app = LiveApp(launch(pair, compare=str(draft), max_tokens=12), show_timings=False,
                      export_dir=Path("unused"), armed=Breakpoints(nonfinite=False, diverge=True))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await pilot.press("c")
            await wait_for(pilot, lambda: app.status.kind in ("breakpoint", "finished"), what="a stop")
            await wait_idle(pilot)
            assert app.status.kind == "finished" and len(app.history) > 1
            await press_and_settle(pilot, "5")
            record = app.record
            drift = drift_rows(app)
            assert drift and all(row[4] == "0" for row in drift)
            assert [row[:5] for row in drift] == expected_drift(record.compare)
            assert "✓ every buffer within tol 0.01" in summary(app)
            table = app.main.query_one("#compare-slots", FastTable)
            for i in range(table.row_count):  # the reference's cells: nothing marked different
                for cell in table.get_row_at(i)[4:9]:
                    assert DIFFERS not in str(cell.style) and not any(DIFFERS in str(s.style) for s in cell.spans)
            assert shown_slots(app) == with_visible_tokens(expected_slots(record))
            mean_line = next(line for line in summary(app).splitlines() if line.startswith(" mean"))
            assert mean_line.split()[2] == mean_line.split()[3] and "±0.00" in mean_line
            assert mean_line.split()[-1] == f"0/{len(app.history)}"

    run(scenario())


def test_the_diverge_breakpoint_stops_at_the_first_round_that_diverges(pair):
    async def scenario():
        app = LiveApp(launch(pair, compare=OFF_BY_ONE, max_tokens=60), show_timings=False,
                      export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await pilot.press("b")
            await wait_for(pilot, lambda: app.screen is not app.main, what="the menu")
            await pilot.press("n", "d", "ctrl+s")  # non-finite off, diverge on
            await wait_for(pilot, lambda: app.screen is app.main, what="the menu to close")
            assert app.armed == Breakpoints(nonfinite=False, diverge=True)
            assert "breaks: diverge" in app.status.right
            assert app.status.message == "breakpoints: diverge"  # what the menu did, said
            await pilot.press("b")
            await wait_for(pilot, lambda: app.screen is not app.main, what="the menu")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: app.screen is app.main, what="the menu to close")
            assert app.status.message == "breakpoints unchanged: diverge"
            await pilot.press("c")
            await wait_for(pilot, lambda: app.status.kind in ("breakpoint", "finished"), what="a stop")
            await wait_idle(pilot)
            record = app.record
            assert app.status.kind == "breakpoint"
            assert (record.round, record.stage) == (0, "commit")
            assert "diverged at context capture: rel err " in app.status.message
            assert "(tol 0.01)" in app.status.message

    run(scenario())


def test_the_breakpoint_fires_on_the_commit_of_a_round_that_diverges_only(pair):
    """Stage by stage (the engine's records, checked by the same function the engine thread
    and replay call): only a commit carries a reference's record."""
    from dflash_tui.engine import SessionOptions, load_pair

    armed = Breakpoints(nonfinite=False, diverge=True)
    for spec, fires in ((OFF_BY_ONE, True), (str(pair[1]), False)):
        session = load_pair(*pair, compare=spec).open("The quick brown fox",
                                                      options=SessionOptions(gamma=4))
        for _ in range(2 * 5):
            record = session.step_stage()
            found = hits(record, armed)
            if record.stage == "commit" and fires:
                first = record.compare.first_divergent
                assert found == (f"diverged at {first.where}: {first.why} (tol 0.01)",)
            else:
                assert found == ()
        session.close()


def test_without_compare_the_tab_is_hidden_and_its_key_says_how(pair):
    async def scenario():
        app = LiveApp(launch(pair), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n", "5")
            assert not compare_tab(app).display
            assert app.main.query_one("#inspector", TabbedContent).active == "tab-ranks"
            assert any("run with --compare SPEC" in n.message for n in app._notifications)
            tabs = widget_text(app, app.main.query_one("#inspector")).splitlines()[0]
            assert "4 Aggregates" in tabs and "Compare" not in tabs
            await pilot.press("b")  # "diverge" can never fire here: shown, not armable
            await wait_for(pilot, lambda: app.screen is not app.main, what="the menu")
            assert app.screen.query_one("#bp-diverge").disabled
            await pilot.press("d", "ctrl+s")
            await wait_for(pilot, lambda: app.screen is app.main, what="the menu to close")
            assert not app.armed.diverge and "diverge" not in app.status.right

    run(scenario())


# ---- the flat tables ---------------------------------------------------------------------------

def read_csv(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def number(text: str):
    return None if text == "" else float(text)


def test_export_adds_the_compare_columns_equal_to_the_records(off_by_one, tmp_path):
    trace, seen = off_by_one
    records = seen["records"]
    out = tmp_path / "tables"
    assert cli.main(["export", str(trace), "--out", str(out)]) == 0
    rounds, slots, buffers = (read_csv(out / f"{n}.csv") for n in ("rounds", "slots", "buffers"))
    assert list(rounds[0])[-4:] == ["compare_accepted", "compare_first_divergent", "compare_ms",
                                    "compare_top_k"]
    assert list(slots[0])[-9:-6] == ["compare_proposal", "compare_rank", "compare_accepted"]
    assert list(slots[0])[-2:] == ["compare_logits_nonfinite", "compare_target_p1"]
    assert {s["compare_logits_nonfinite"] for s in slots} == {"false"}  # a healthy reference
    assert list(buffers[0])[-4:] == ["compare_max_abs_diff", "compare_rel_err", "compare_nonfinite",
                                     "compare_rms_rel_err"]
    assert [(int(r["compare_accepted"]), r["compare_first_divergent"]) for r in rounds] == \
        [(r.compare.accepted, r.compare.first_divergent.where) for r in records]
    # the reference's K (here the drafter's own checkpoint's), and where its prefix is the
    # drafter's, the target's top probability of that verify row
    assert [int(r["compare_top_k"]) for r in rounds] == [r.selector.top_k for r in records]
    assert [number(s["compare_target_p1"]) for s in slots] == [
        r.ranks[i].target_top[0].prob if r.compare.proposals[:i] == r.proposals[:i] else None
        for r in records for i in range(r.gamma)]
    assert [(int(s["compare_proposal"]), int(s["compare_rank"]), s["compare_accepted"]) for s in slots] == \
        [(p, k, "true" if i < r.compare.accepted else "false") for r in records
         for i, (p, k) in enumerate(zip(r.compare.proposals, r.compare.ranks))]
    for r in records:
        drift = {(b.stage, b.layer, b.buffer): b for b in r.compare.buffers}
        rows = [b for b in buffers if int(b["round"]) == r.round]
        assert len(rows) == len(r.probes)  # one row per probed buffer, as without --compare
        compared = [b for b in rows if b["compare_max_abs_diff"] != ""]
        assert len(compared) == len(drift)
        for b in compared:
            d = drift.pop((b["stage"], None if b["layer"] == "" else int(b["layer"]), b["buffer"]))
            assert (number(b["compare_max_abs_diff"]), number(b["compare_rel_err"]),
                    number(b["compare_rms_rel_err"])) == (d.max_abs_diff, d.rel_err, d.rms_rel_err)
            assert d.rms_rel_err is not None  # the off-by-one: a number in every compared buffer
            assert b["compare_nonfinite"] == (d.nonfinite or "")
    tables = load_trace(trace)
    assert [r["compare_accepted"] for r in tables.rounds] == [r.compare.accepted for r in records]
    assert tables.buffers[0]["compare_rel_err"] == records[0].compare.buffers[0].rel_err


def test_compared_buffers_of_a_run_without_probes_still_export(pair, tmp_path):
    """probe --no-probes --compare: no probe rows, yet every compared buffer has its row."""
    from dflash_tui.engine import SessionOptions, load_pair
    from dflash_tui.snapshot import export_round

    session = load_pair(*pair, compare=OFF_BY_ONE).open(
        "The quick brown fox", options=SessionOptions(gamma=4, probes=False))
    records = list(session.run(2))
    for record in records:
        export_round(tmp_path / "snapshots", record, session.info)
    session.close()
    tables = load_trace(tmp_path / "snapshots")
    assert [(b["round"], b["stage"], b["layer"], b["buffer"], b["compare_rel_err"], b["absmax"])
            for b in tables.buffers] == \
        [(r.round, d.stage, d.layer, d.buffer, d.rel_err, None) for r in records for d in r.compare.buffers]


def test_replay_shows_the_tab_for_the_sessions_that_ran_a_reference(pair, tmp_path):
    """One trace, two sessions (an explicit --trace FILE across a restart): one run with
    --compare, one without. The tab is there for the first only; leaving it for the second
    moves to another tab."""
    from dflash_tui.engine import SessionOptions, load_pair
    from dflash_tui.snapshot import TraceWriter

    trace = tmp_path / "trace.jsonl"
    for compare in (OFF_BY_ONE, None):
        session = load_pair(*pair, compare=compare).open("The quick brown fox",
                                                         options=SessionOptions(gamma=4))
        writer = TraceWriter(trace, session.info, session.prefill_record)
        for record in session.run(2):
            writer.write(record)
        writer.close()
        session.close()

    async def scenario():
        app = ReplayApp(load(trace), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            inspector = app.main.query_one("#inspector", TabbedContent)
            await pilot.press("5", "right")
            await pilot.pause()
            assert app.record.round == 1 and compare_tab(app).display
            assert inspector.active == "tab-compare" and drift_rows(app)
            await pilot.press("right")  # the second session: no reference
            await wait_for(pilot, lambda: inspector.active != "tab-compare", what="another tab")
            assert app.record.compare is None and not compare_tab(app).display
            await pilot.press("left")  # back to the first session's last round
            await pilot.pause()
            assert compare_tab(app).display

    run(scenario())


# ---- the first divergence in view; the --compare-tol hint ---------------------------------------

FAR = "bits=4"  # on the fixture every buffer after the capture is 5-90% off the drafter's...
FAR_TOL = 0.6  # ...so at this tolerance the first divergent one is far down the drift table


def first_divergent_row(compare) -> int:
    first = compare.first_divergent
    return next(i for i, b in enumerate(compare.buffers)
                if (b.stage, b.layer, b.buffer) == (first.stage, first.layer, first.buffer))


def marked_row_on_screen(app) -> bool:
    """The drift table's ▶ row is among the rows on screen."""
    drift = app.main.query_one("#compare-drift", FastTable)
    return any(line.lstrip().startswith("▶") for line in widget_text(app, drift).splitlines()[1:])


def mid_view(drift, view: int) -> bool:
    """The cursor's row sits in the view's middle, so the rows after it show too (unless
    the table ends first)."""
    below = drift.cursor_row - int(drift.scroll_offset.y)
    return below == view // 2 or drift.scroll_offset.y == drift.max_scroll_y


def test_at_80x24_a_round_drawn_brings_its_first_divergent_buffer_into_view(pair):
    async def scenario():
        app = LiveApp(launch(pair, compare=FAR, compare_tol=FAR_TOL), show_timings=False,
                      export_dir=Path("out"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "5", "n", "n")
            drift = app.main.query_one("#compare-drift", FastTable)
            view = drift.scrollable_content_region.height - 1  # rows under the header
            rows = [first_divergent_row(app.history.record(r).compare) for r in (0, 1)]
            assert min(rows) >= view, "the first divergence starts below the view"
            assert app.record.round == 1 and drift.cursor_row == rows[1]
            assert marked_row_on_screen(app) and mid_view(drift, view)
            await press_and_settle(pilot, "left")  # moving to a round brings its own row
            assert app.record.round == 0 and drift.cursor_row == rows[0]
            assert marked_row_on_screen(app) and mid_view(drift, view)
            # the user scrolls the table back up; the same round drawn again (a round added
            # to the history while round 0 is on screen) leaves it there
            drift.focus()
            await press_and_settle(pilot, *["pageup"] * 10)
            assert drift.scroll_offset.y == 0 and not marked_row_on_screen(app)
            await press_and_settle(pilot, "n")
            assert len(app.history) == 3 and app.record.round == 0
            assert drift.scroll_offset.y == 0 and not marked_row_on_screen(app)
            await press_and_settle(pilot, "right")  # another round: its row again
            assert app.record.round == 1 and drift.cursor_row == rows[1]
            assert marked_row_on_screen(app)

    run(scenario())


def tol_hints(app) -> int:
    from dflash_tui.compare_notes import TOL_HINT

    return sum(n.message == TOL_HINT for n in app._notifications)


async def toggle_diverge(pilot) -> None:
    app = pilot.app
    await pilot.press("b")
    await wait_for(pilot, lambda: app.screen is not app.main, what="the menu")
    await pilot.press("d", "ctrl+s")
    await wait_for(pilot, lambda: app.screen is app.main, what="the menu to close")


@pytest.mark.parametrize("spec, tol, hinted", [
    ("bits=4", None, True),  # quantized, default tolerance: it would stop every round
    ("dtype=float16", None, True),  # another float type (the fixture runs float32)
    ("bits=4", 0.05, False),  # a tolerance of the user's own: they know the bar
    (OFF_BY_ONE, None, False),  # same numbers, other layers: its divergence is the finding
])
def test_arming_diverge_against_a_quantized_or_other_dtype_reference_names_compare_tol(
        pair, spec, tol, hinted):
    async def scenario():
        app = LiveApp(launch(pair, compare=spec, compare_tol=tol), show_timings=False,
                      export_dir=Path("out"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await toggle_diverge(pilot)
            assert app.armed.diverge and tol_hints(app) == hinted
            await toggle_diverge(pilot)  # off, and on again: said once only
            await toggle_diverge(pilot)
            assert app.armed.diverge and tol_hints(app) == hinted

    run(scenario())


def test_three_diverge_stops_in_a_row_name_compare_tol_once(pair):
    async def scenario():
        app = LiveApp(launch(pair, compare=OFF_BY_ONE, max_tokens=60), show_timings=False,
                      export_dir=Path("out"), armed=Breakpoints(nonfinite=False, diverge=True))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n", "n")
            assert app.status.kind == "breakpoint" and app.record.round == 1
            assert tol_hints(app) == 0
            await press_and_settle(pilot, "n")
            assert tol_hints(app) == 1
            await press_and_settle(pilot, "n", "n")
            assert app.record.round == 4 and tol_hints(app) == 1

    run(scenario())


def test_diverge_stops_at_an_overflow_do_not_name_compare_tol(fp16_overflow_pair):
    """A float16 reference that overflows against the float32 drafter: each round's first
    divergence is a buffer non-finite on the reference side only (no relative error), so
    no tolerance would pass it. Three such stops in a row said "try --compare-tol 0.05"."""
    async def scenario():
        app = LiveApp(launch(fp16_overflow_pair, compare="dtype=float16"), show_timings=False,
                      export_dir=Path("out"), armed=Breakpoints(nonfinite=False, diverge=True))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n", "n", "n", "n")
            assert app.status.kind == "breakpoint" and app.record.round == 3
            first = app.record.compare.first_divergent
            assert first.nonfinite == "reference" and first.rel_err is None  # else this proves nothing
            assert tol_hints(app) == 0

    run(scenario())


def record_trace(pair, trace: Path, spec, tol=None, rounds: int = 4) -> list:
    """A session's rounds, written to `trace` as the app's trace writes them."""
    from dflash_tui.engine import SessionOptions, load_pair
    from dflash_tui.snapshot import TraceWriter

    session = load_pair(*pair, compare=spec, compare_tol=tol).open(
        "The quick brown fox", options=SessionOptions(gamma=4))
    writer = TraceWriter(trace, session.info, session.prefill_record)
    records = list(session.run(rounds))
    for record in records:
        writer.write(record)
    writer.close()
    session.close()
    return records


def test_replay_compare_tol_judges_a_recording_as_a_live_run_at_that_tolerance(pair, tmp_path):
    """The --compare-tol hint says "try --compare-tol 0.05", and replay takes it: each
    round's divergence found again from the recorded relative errors is what the engine
    found live at that tolerance."""
    from dflash_tui.app.replay import at_tolerance

    trace = tmp_path / "trace.jsonl"
    recorded = record_trace(pair, trace, FAR)  # the default 0.01: every round diverges early
    live = record_trace(pair, tmp_path / "live.jsonl", FAR, FAR_TOL)
    _, args = cli.parse(["replay", str(trace), "--compare-tol", str(FAR_TOL)])
    session, = at_tolerance(load(trace), args.compare_tol).sessions
    assert session.info.compare_tol == FAR_TOL
    judged = [r.compare for r in session.rounds]
    assert [(c.tolerance, c.first_divergent) for c in judged] == \
        [(c.tolerance, c.first_divergent) for c in (r.compare for r in live)]
    # the new tolerance moved where they part (else this would prove nothing)
    assert all(a.first_divergent != b.compare.first_divergent for a, b in zip(judged, recorded))
    assert all(a.buffers == b.compare.buffers for a, b in zip(judged, recorded))


def test_replay_compare_tol_lets_a_play_pass_the_rounds_that_diverge(pair, tmp_path):
    """Armed "diverge", a recording judged at the default tolerance stops every round; at a
    tolerance above every recorded relative error, `c` plays to the end."""
    from dflash_tui.app.replay import at_tolerance

    trace = tmp_path / "trace.jsonl"
    records = record_trace(pair, trace, FAR)
    above = 10.0
    assert max(b.rel_err for r in records for b in r.compare.buffers) < above

    async def play(recording):
        app = ReplayApp(recording, show_timings=False, export_dir=Path("unused"),
                        armed=Breakpoints(nonfinite=False, diverge=True))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            await pilot.press("5", "c")
            await wait_for(pilot, lambda: not app.playing, what="the play to stop")
            await pilot.pause()
            return app.status.kind, app.record.round, summary(app)

    kind, round_, _ = run(play(load(trace)))
    assert (kind, round_) == ("breakpoint", 1)  # the next round: replay opens on round 0, whole
    kind, round_, text = run(play(at_tolerance(load(trace), above)))
    assert (kind, round_) == ("finished", records[-1].round)
    assert f"tol {above:g}" in text and f"✓ every buffer within tol {above:g}" in text


def test_replay_compare_tol_refuses_a_recording_without_a_reference_and_bad_values(pair, tmp_path, capsys):
    trace = tmp_path / "trace.jsonl"
    record_trace(pair, trace, None, rounds=1)
    assert cli.main(["replay", str(trace), "--compare-tol", "0.05"]) == 2
    assert "--compare-tol: " in capsys.readouterr().err
    assert cli.main(["replay", str(trace), "--compare-tol", "nan"]) == 2
    assert "--compare-tol nan: expected" in capsys.readouterr().err


def test_export_compare_tol_judges_the_column_as_a_live_run_at_that_tolerance(pair, tmp_path):
    """export --compare-tol, as replay's: compare_first_divergent found again from the
    recorded relative errors is what a live run at that tolerance wrote."""
    trace = tmp_path / "trace.jsonl"
    recorded = record_trace(pair, trace, FAR)  # the default 0.01: every round diverges early
    live = record_trace(pair, tmp_path / "live.jsonl", FAR, FAR_TOL)

    def column(*flags: str) -> list[str]:
        out = tmp_path / f"tables{len(list(tmp_path.iterdir()))}"
        assert cli.main(["export", str(trace), "--out", str(out), *flags]) == 0
        return [r["compare_first_divergent"] for r in read_csv(out / "rounds.csv")]

    assert column() == [r.compare.first_divergent.where for r in recorded]
    judged = column("--compare-tol", str(FAR_TOL))
    assert judged == [r.compare.first_divergent.where for r in live]
    assert all(a != b.compare.first_divergent.where for a, b in zip(judged, recorded))
    assert column("--compare-tol", "10") == [""] * len(recorded)  # within it everywhere


def test_export_compare_tol_refuses_a_recording_without_a_reference_and_bad_values(
        pair, tmp_path, capsys):
    trace = tmp_path / "trace.jsonl"
    record_trace(pair, trace, None, rounds=1)
    out = tmp_path / "tables"
    refusal(capsys, ["export", trace, "--out", out, "--compare-tol", "0.05"],
            f"error: --compare-tol: the exported session of {trace} has no round with a "
            "reference configuration")
    assert not out.exists()  # refused before the tables' folder was made
    for bad in ("nan", "-1"):
        refusal(capsys, ["export", trace, "--out", out, "--compare-tol", bad],
                f"error: --compare-tol {bad}: expected a relative error of 0 or more")  # as typed


def test_a_quantized_float16_reference_on_a_cpu_is_noted_once(pair):
    from dflash_tui.compare_notes import SLOW_ON_CPU

    async def scenario():
        # kept quantized: on the CPU the loader otherwise computes it in float, not slowly
        app = LiveApp(launch(pair, compare="bits=4,dtype=float16", keep_quantized=True),
                      show_timings=False, export_dir=Path("out"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            notes = lambda: sum(n.message == f"note: {SLOW_ON_CPU}" for n in app._notifications)  # noqa: E731
            assert app.info.backend == "cpu" and notes() == 1
            first = app.trace
            await pilot.press("r")  # a restart opens the same reference: not said again
            await wait_for(pilot, lambda: app.trace not in (None, first), what="the restarted session")
            await wait_idle(pilot)
            assert notes() == 1

    run(scenario())


# ---- the reference's own targets and walk, its time, the buffers left out ------------------------

def reference_forced(monkeypatch, proposer) -> None:
    """Every pair the app loads gets forced reference proposals (engine Reference.proposer,
    read when a session opens)."""
    from dflash_tui.engine import api

    load_pair = api.load_pair

    def forced(*args, **kwargs):
        pair = load_pair(*args, **kwargs)
        pair.reference.proposer = proposer
        return pair

    monkeypatch.setattr(api, "load_pair", forced)


def test_where_the_reference_got_further_its_slots_show_its_own_targets(pair, monkeypatch):
    """The drafter forced to get only slot 0 right, the reference slots 0-2 (both the target's
    greedy continuation, then wrong): every round the reference gets right the slot the
    drafter missed, its ranks count against the target's tokens after its OWN prefix (a
    second verify), and the table shows those tokens beside the drafter's; each side's rank
    says whether its argmax was right, its ↷ whether its walk left the argmax. Tab 4 then
    has the reference's per-slot table beside the drafter's, counted from the same rounds."""
    prompt = "The quick brown fox"
    drafter = oracle_proposer(pair, prompt, 60, good=1)
    reference_forced(monkeypatch, oracle_proposer(pair, prompt, 60, good=3))

    async def scenario():
        app = LiveApp(launch(pair, compare=str(pair[1]), max_tokens=40, proposer=drafter),
                      show_timings=False, export_dir=Path("out"))
        async with app.run_test(size=(200, 50)) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "5", *"nnn")
            records = [app.history.record(r) for r in range(3)]
            assert [(r.accepted, r.compare.accepted, r.compare.reverified) for r in records] == \
                [(1, 3, True)] * 3
            await press_and_settle(pilot, "home")
            for record in records:
                assert app.record.round == record.round
                shown = shown_slots(app)
                assert shown == with_visible_tokens(expected_slots(record))
                c = record.compare
                # past the drafter's miss the reference was judged on another prefix
                assert any(row[8] not in ("=", "—") for row in shown)
                for row, own in zip(shown, c.targets):
                    if row[6] == "✓":  # what it got right is the token it was judged against
                        assert row[4] == (row[7] if row[8] == "=" else row[8]) == visible(record.text(own))
                await press_and_settle(pilot, "right")
            await press_and_settle(pilot, "4")
            mine, theirs = (table_rows(app.main.query_one(f"#{name}", FastTable))
                            for name in ("agg-slots", "agg-ref-slots"))
            gammas = [r.gamma for r in records]
            for rows, counts in ((mine, [r.accepted for r in records]),
                                 (theirs, [r.compare.accepted for r in records])):
                proposed = [sum(g > s for g in gammas) for s in range(max(gammas))]
                accepted = [sum(a > s for a in counts) for s in range(max(gammas))]
                assert [row[1] for row in rows] == [f"{100 * a / p:.0f}%" for a, p in zip(accepted, proposed)]
            assert [row[1] for row in theirs][:4] == ["100%", "100%", "100%", "0%"]
            assert f"per slot, reference {pair[1]}" in widget_text(app, app.main.query_one("#agg-ref-title"))
            assert widget_text(app, app.main.query_one("#agg-slots-title")).strip() == "per slot, drafter"

    run(scenario())


def test_without_compare_the_aggregates_tab_has_no_reference_table(pair):
    async def scenario():
        app = LiveApp(launch(pair), show_timings=False, export_dir=Path("out"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n", "4")
            assert app.reference_history is None
            assert not app.main.query_one("#agg-ref-slots").display
            assert not app.main.query_one("#agg-ref-title").display

    run(scenario())


def test_the_summary_gives_the_references_own_time_and_tok_s_leaves_it_out(pair):
    async def scenario():
        app = LiveApp(launch(pair, compare=OFF_BY_ONE), show_timings=True, export_dir=Path("out"))
        # (at 80 columns the line leaves out the time: one cell too many with the tolerance)
        async with app.run_test(size=(100, 24)) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "5", "n", "n")
            records = [app.history.record(r) for r in range(2)]
            c = app.record.compare
            assert c.ms > 0
            assert f"reference {OFF_BY_ONE} · {c.ms:.0f} ms · tol" in summary(app)
            # tokens per second: the drafter's stage times only, the reference's time left out
            tokens = sum(len(r.committed_tokens) for r in records)
            stages = sum(s.ms for r in records for s in r.stages) / 1000
            assert app.history.ms.values.tolist() == [sum(s.ms for s in r.stages) for r in records]
            header = widget_text(app, app.main.query_one("#header"))
            assert f"tok/s {tokens / stages:.1f}" in header
            app.show_timings = False  # frozen clocks (screenshots): no time in the summary
            app.main.query_one("ComparePanel")._shown = None
            await press_and_settle(pilot)
            assert " ms" not in summary(app)

    run(scenario())


LONG_SPEC = "dtype=float16,residual-scale=8"


def test_at_80_columns_the_summary_keeps_the_tolerance_and_cuts_no_number(pair):
    """A SPEC too long for the line: the time goes, the SPEC ends in …, `tol 0.01` stays
    whole (it was cut to `tol 0.0`, or lost with the time); a wider terminal fits it again."""
    def first_line(app) -> str:
        return summary(app).splitlines()[0].strip()

    async def scenario():
        app = LiveApp(launch(pair, compare=LONG_SPEC), show_timings=True, export_dir=Path("out"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "5", "n")
            line = first_line(app)
            assert line.startswith("reference dtype=float16,") and line.endswith("… · tol 0.01")
            assert " ms" not in line
            await pilot.resize_terminal(120, 24)
            await wait_for(pilot, lambda: first_line(app).endswith(" ms · tol 0.01"), what="the whole line")
            assert first_line(app) == f"reference {LONG_SPEC} · {app.record.compare.ms:.0f} ms · tol 0.01"

    run(scenario())


@pytest.mark.parametrize("spec", [LONG_SPEC, "dtype=bfloat16"])
def test_the_summarys_first_line_drops_whole_items_at_any_width(spec):
    from rich.cells import cell_len

    from dflash_tui.panels.compare import summary_head

    whole = f"reference {spec} · 242 ms · tol 0.01"
    for width in range(len("reference x… · tol 0.01"), len(whole) + 3):
        line = summary_head(spec, 242.0, 0.01, width).plain
        head, *items = line.split(" · ")
        assert cell_len(line) <= width, line
        assert items in (["242 ms", "tol 0.01"], ["tol 0.01"]), line  # whole, the tolerance kept
        assert head == f"reference {spec}" or head.endswith("…") and "ms" not in line, line
        assert (line == whole) == (width >= len(whole)), line
    assert summary_head(spec, 242.0, 0.01, None).plain == whole


def test_a_taller_terminal_never_shows_fewer_drift_rows(pair):
    """Drift under the slots (80 columns), the sparklines and the slots past 4 take the
    lines a taller terminal adds one at a time, once the drift table has ten: no height
    shows fewer drift rows than a shorter one (at 30 rows the sparklines and 8 slots came
    in at once, and the drift table showed 4 rows against 7 at 24)."""
    async def scenario():
        app = LiveApp(launch(pair, compare=FAR, gamma=15), show_timings=False, export_dir=Path("out"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "5", "n", "n")
            drift = app.main.query_one("#compare-drift", FastTable)
            slots = app.main.query_one("#compare-slots", FastTable)
            trend = app.main.query_one("#compare-trend")
            shown = {}  # height -> (drift rows, slot rows, sparkline lines) on screen
            for height in range(24, 42):
                await pilot.resize_terminal(80, height)
                await wait_for(pilot, lambda: app.main.size.height == height, what="the new size")
                await pilot.pause()
                shown[height] = (drift.scrollable_content_region.height - 1,
                                 slots.region.height - 1, trend.region.height)
            drift_rows = [rows for rows, _, _ in shown.values()]
            assert drift_rows == sorted(drift_rows), shown
            assert shown[24][1:] == (4, 0)
            assert shown[30][0] > shown[24][0] and shown[30][2] == 3  # sparklines from 30 rows
            assert shown[41][1:] == (8, 3)  # and 8 slots on a tall one
            await press_and_settle(pilot, "m")  # zoomed, the panel is taller still
            assert drift.scrollable_content_region.height - 1 >= shown[41][0]

    run(scenario())


def test_zoomed_at_80x24_the_compare_tab_shows_8_slots(pair):
    """`m` on the compare tab at 80 x 24: the zoom's lines used to go to the drift table (10
    lines) with the slots left at 4 of 8; now the slots get all 8 and the drift table keeps
    its header and 5 rows. Zoomed, a taller terminal still never shows fewer drift rows, and
    unzoomed, 80 x 24 is as it was."""
    async def scenario():
        app = LiveApp(launch(pair, compare=FAR, gamma=15), show_timings=False, export_dir=Path("out"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "5", "n", "n")
            drift = app.main.query_one("#compare-drift", FastTable)
            slots = app.main.query_one("#compare-slots", FastTable)

            def shown() -> tuple[int, int]:  # (drift rows, slot rows) on screen
                return drift.scrollable_content_region.height - 1, slots.region.height - 1

            assert shown() == (6, 4)
            await press_and_settle(pilot, "m")
            assert app.main.maximized is not None
            assert shown() == (5, 8)
            assert [line.split()[0] for line in widget_text(app, slots).splitlines()[1:]] == \
                [str(s) for s in range(8)]
            zoomed = {}
            for height in range(24, 42):
                await pilot.resize_terminal(80, height)
                await wait_for(pilot, lambda: app.main.size.height == height, what="the new size")
                await pilot.pause()
                zoomed[height] = shown()
            assert [rows for rows, _ in zoomed.values()] == sorted(r for r, _ in zoomed.values())
            assert {slot_rows for _, slot_rows in zoomed.values()} == {8}, zoomed
            await pilot.resize_terminal(80, 24)
            await wait_for(pilot, lambda: app.main.size.height == 24, what="80 x 24 again")
            await press_and_settle(pilot, "m")
            assert app.main.maximized is None and shown() == (6, 4)

    run(scenario())


def test_the_buffers_the_drift_left_out_are_named_under_it(pair, fixture_root):
    """A reference with another MLP width: one dim line under the drift table says how many
    buffers could not be compared and why, the same buffers of every layer named once."""
    from fixtures import write_drafter

    config = json.loads((pair[1] / "config.json").read_text())
    narrow = write_drafter(fixture_root / "narrow-mlp-tab", {**config, "intermediate_size": 96}, seed=2)
    layers = config["num_hidden_layers"]

    async def scenario():
        app = LiveApp(launch(pair, compare=str(narrow)), show_timings=False, export_dir=Path("out"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "5", "n")
            left_out = app.record.compare.left_out
            assert len(left_out) == 3 * layers
            shapes = {("x".join(map(str, b.primary_shape)), "x".join(map(str, b.reference_shape)))
                      for b in left_out}
            (mine, theirs), = shapes
            line = app.main.query_one("#compare-left-out")
            assert line.display
            text = widget_text(app, line)
            full = (f"{3 * layers} buffers not compared: draft L0–{layers - 1} ffn_gate, ffn_up, "
                    f"ffn_act ({mine} vs {theirs})")
            assert text.strip() == (full if len(full) <= line.region.width else
                                    full[: line.region.width - 1] + "…")
            await press_and_settle(pilot, "m")  # zoomed: the whole line
            assert widget_text(app, line).strip() == full

    run(scenario())


def test_the_walk_mark_and_the_help_hurt_counts_share_one_rule():
    """The ↷'s colour (green: the walk helped, red: it hurt) and the aggregates' help / hurt
    counts (slot_stats, over arrays) judge a walk that left the argmax by one rule: for
    every pattern of pick, argmax and target they agree."""
    import numpy as np

    from dflash_tui.panels.compare import walk_mark
    from dflash_tui.walk_effect import helped_hurt

    cases = [(p, a, t) for p in range(3) for a in range(3) for t in range(3) if p != a]
    helped, hurt = helped_hurt(*(np.array(column) for column in zip(*cases)))
    colours = [str(walk_mark(True, p, a, t).style) for p, a, t in cases]
    assert colours == ["bold green" if h else "bold red" if x else "magenta"
                       for h, x in zip(helped, hurt)]
    assert helped.any() and hurt.any() and not (helped & hurt).any()


def test_at_80x24_the_reference_tables_title_reads_whole(pair):
    """Tab 4's reference title was cut by the screen's edge: `(its own proposals, jud`."""
    async def scenario():
        app = LiveApp(launch(pair, compare=OFF_BY_ONE), show_timings=False, export_dir=Path("out"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n", "4")
            title = app.main.query_one("#agg-ref-title")
            panel = title.parent
            panel.scroll_to_widget(title, animate=False)  # below the drafter's two tables
            await pilot.pause()
            shown = [line.strip() for line in widget_text(app, title).splitlines()]
            assert shown[0] == f"per slot, reference {OFF_BY_ONE}", shown
            assert shown[-1].startswith("(") and shown[-1].endswith(")"), shown
            assert title.region.right <= panel.region.right, (title.region, panel.region)

    run(scenario())


def test_an_overflow_behind_the_first_divergence_is_named_and_marked(fp16_overflow_pair):
    """A float16 reference that overflows, at a tolerance its rounding passes (a bfloat16
    drafter against float16 at the default): the summary names, under the ▶ line, the
    buffer where it first went NaN / Inf and (where the line has room, never cut) in how
    many slots its logits did; the drift table marks that row ✗. The ▶ line alone named a
    rounding-level buffer, the overflow only findable by scrolling some thirty rows."""
    def nonfinite_line(app) -> str:
        return next((l.strip() for l in summary(app).splitlines() if "✗" in l), "")

    async def scenario():
        app = LiveApp(launch(fp16_overflow_pair, compare="dtype=float16", compare_tol=1e-5),
                      show_timings=False, export_dir=Path("out"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "5", "n")
            c = app.record.compare
            first, bad = c.first_divergent, c.first_nonfinite
            assert first.nonfinite is None and bad.nonfinite == "reference"
            assert f"▶ {first.stage}" in summary(app)
            named = f"✗ n/f from draft L0 {bad.buffer}, ref only"
            assert nonfinite_line(app) == named  # at 80 columns the count is left out, whole
            marks = [(row[0], row[1], row[3]) for row in drift_rows(app) if row[0]]
            assert marks == [("▶", first.stage, first.buffer), ("✗", "draft", bad.buffer)]
            await pilot.resize_terminal(120, 35)
            gamma = app.record.gamma
            await wait_for(pilot, lambda: nonfinite_line(app) == f"{named}; logits {gamma}/{gamma}",
                           what="the logits count on a wider line")
            await pilot.press("q")

    run(scenario())


def test_the_nonfinite_breakpoint_stops_where_the_reference_overflowed(fp16_overflow_pair):
    """A drafter that holds 1e5 against a float16 reference that overflows: the
    default-armed NaN / Inf breakpoint stops at each round's commit (the reference's record
    comes with it), saying the reference and the buffer where it went bad; no other stage
    stops. It did not fire at all: only "diverge" stopped there, which against bfloat16
    fires at rounding level every round. With diverge armed too, a first divergence that is
    that same buffer (the default tolerance, float32) is said once; one at rounding level
    (a tolerance float16's rounding passes) follows it."""
    from dflash_tui.engine import SessionOptions, load_pair

    for dtype, tol, armed, sentences in (("bfloat16", None, Breakpoints(), 1),
                                         ("float32", None, Breakpoints(diverge=True), 1),
                                         ("float32", 1e-5, Breakpoints(diverge=True), 2)):
        session = load_pair(*fp16_overflow_pair, dtype=dtype, compare="dtype=float16",
                            compare_tol=tol).open("The quick brown fox",
                                                  options=SessionOptions(gamma=4))
        for _ in range(2 * 5):
            record = session.step_stage()
            found = hits(record, armed)
            if record.stage != "commit":
                assert found == (), (record.stage, found)
                continue
            c = record.compare
            bad = c.first_nonfinite
            assert bad.nonfinite == "reference" and record.nonfinite_logit_slots == ()
            assert c.nonfinite_logit_slots == (0, 1, 2, 3)
            assert found[:1] == (f"reference non-finite from draft L0 {bad.buffer}",), found
            assert len(found) == sentences, found
            if sentences == 2:
                assert c.first_divergent.nonfinite is None
                assert found[1].startswith(f"diverged at {c.first_divergent.where}: rel err ")
            assert hits(record, Breakpoints(nonfinite=False)) == ()
        session.close()


def test_a_nan_drafters_reference_stops_once_a_round_not_again_at_commit(nan_pair):
    """A drafter with a NaN weight against another dtype of itself: the reference is NaN
    where the drafter is, no buffer on its side only. The NaN / Inf breakpoint stops at
    draft (probes on: the probe; off: the drafter's logits) and not again at commit: the
    reference's logits there were the same evidence, and `c` from the draft stop stopped
    at commit with `reference logits non-finite at slots 0–3` in every round."""
    from dflash_tui.engine import SessionOptions, load_pair

    for probes in (True, False):
        session = load_pair(*nan_pair, compare="dtype=float16").open(
            "The quick brown fox", options=SessionOptions(gamma=4, probes=probes))
        stops = []
        for _ in range(2 * 5):
            record = session.step_stage()
            if record.stage == "commit":  # else this proves nothing
                assert record.compare.nonfinite_logit_slots == record.nonfinite_logit_slots != ()
            if hits(record, Breakpoints()):
                stops.append((record.round, record.stage))
        session.close()
        assert stops == [(0, "draft"), (1, "draft")], (probes, stops)


def test_at_80x24_a_reference_overflow_stop_and_the_tol_hint_both_read(fp16_overflow_pair):
    """At 80 columns the --compare-tol notification (arming diverge against another float
    type) covered the status line's right half, so the stop reason under it read
    `⚑ round 0 commit: diverged at draft la▌`. Notifications now sit above the status line
    and the key bar; the stop reason is whole, the reference's overflow first."""
    from textual.widgets._toast import Toast

    async def scenario():
        app = LiveApp(launch(fp16_overflow_pair, dtype="bfloat16", compare="dtype=float16"),
                      show_timings=False, export_dir=Path("out"))
        async with app.run_test(size=(80, 24), notifications=True) as pilot:  # (off by default)
            await wait_loaded(pilot)
            await toggle_diverge(pilot)
            assert tol_hints(app) == 1
            await pilot.press("c")
            await wait_for(pilot, lambda: app.status.kind == "breakpoint", what="the stop")
            await wait_idle(pilot)
            toasts = list(app.screen.query(Toast))
            assert toasts, "the hint is still up: else this proves nothing"
            line = app.main.query_one("#status").region
            assert all(t.region.bottom <= line.y for t in toasts), \
                [(t.region, line) for t in toasts]
            shown = widget_text(app, app.main.query_one("#status"))
            stop = f"⚑ round 0 commit: reference non-finite from draft L0 "
            assert shown.lstrip().startswith(stop), shown
            assert app.record.compare.first_nonfinite.buffer in shown

    run(scenario())


def test_at_80x24_a_stop_with_two_reasons_says_there_are_two(fp16_overflow_pair):
    """NaN / Inf and diverge armed, a float32 drafter against a float16 reference at a
    tolerance its rounding does not pass: the commit stops for both (the reference's
    overflow, a divergence before it). At 80 columns the line was cut in the second reason
    (`...ffn_out; diverged at… [L]`), which read as one reason; it now reads the first
    whole and that one more is in the log, which has both."""
    async def scenario():
        app = LiveApp(launch(fp16_overflow_pair, dtype="float32", compare="dtype=float16",
                             compare_tol=1e-5), show_timings=False, export_dir=Path("out"))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await toggle_diverge(pilot)
            await pilot.press("c")
            await wait_for(pilot, lambda: app.status.kind == "breakpoint", what="the stop")
            await wait_idle(pilot)
            bad = app.record.compare.first_nonfinite.buffer
            first = f"⚑ round 0 commit: reference non-finite from draft L0 {bad}"
            shown = widget_text(app, app.main.query_one("#status")).strip()
            assert shown == f"{first} (+1 more: L)", shown
            logged = app.status_log.entries[-1].text
            assert logged.startswith(first[2:] + "; diverged at "), logged

    run(scenario())


def test_a_rank_from_nonfinite_logits_reads_nf_on_either_side(fp16_overflow_pair, nan_pair,
                                                              make_pair):
    """The compare tab's slot table showed 319 (the fixture vocabulary - 1: rank_of puts the
    target's token last where the logits are NaN) as the rank of a float16 reference that
    overflowed, a number that reads like a real rank. Such a slot's rank reads n/f, on the
    reference's side and on the drafter's (the ranks tab too), and only there; tab 4's
    per-slot tables read n/f for the rank-counted cells, as bench --slots does."""
    def rank_cells(app, column: int) -> list[str]:
        return [row[column].rstrip(" ↷") for row in slot_rows(app)]

    async def scenario(pair, spec, bad_column, good_column):
        app = LiveApp(launch(pair, compare=spec), show_timings=False, export_dir=Path("out"),
                      armed=Breakpoints(nonfinite=False))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "5", "n")
            record = app.record
            bad = rank_cells(app, bad_column)
            assert bad[0] == "n/f" and all(cell in ("n/f", "—") for cell in bad), bad
            assert all(cell.isdigit() or cell == "—" for cell in rank_cells(app, good_column))
            assert "319" not in bad
            await press_and_settle(pilot, "1")
            rows = table_rows(app.main.query_one("#ranks-table", FastTable))
            drafter_bad = bool(record.nonfinite_logit_slots)
            assert all((row[3] == "n/f") == drafter_bad for row in rows), rows
            # in K: the candidates of NaN logits are noise, as tab 4 counts them
            assert all((row[5] == "n/f") == drafter_bad for row in rows), rows
            # tab 4 counts the round as bench --slots does: slot 0's argmax, mean, off, in K
            await press_and_settle(pilot, "4")
            for table, side_bad in (("#agg-slots", drafter_bad), ("#agg-ref-slots", not drafter_bad)):
                slot0 = table_rows(app.main.query_one(table, FastTable))[0]
                assert (slot0[4:8] == ["n/f"] * 4) == side_bad, (table, slot0)
            # the legend says what n/f means, whichever side's table holds it
            legend = str(app.main.query_one("#agg-legend", Static).render())
            assert "n/f: the slot's logits held a NaN or Inf" in legend, legend

    run(scenario(fp16_overflow_pair, "dtype=float16", 5, 2))  # the reference overflowed
    healthy = make_pair("llama", "DFlash2DraftModel")[1]
    run(scenario(nan_pair, str(healthy), 2, 5))  # the drafter's NaN weight
