"""SVG snapshots of the app (pytest-textual-snapshot; textual is pinned in pyproject.toml).

Deterministic by construction: greedy decoding of fixed fixture checkpoints, clocks frozen
(show_timings=False hides tokens/s and stage times), fixed terminal sizes, no paths that
vary between runs on screen (no session directory is named: no trace, nothing exported). Update after an intended change with
`python -m pytest tests/test_app_snapshots.py --snapshot-update` and look at the SVGs.
"""

from __future__ import annotations

from pathlib import Path


from dflash_tui.app.live import LiveApp
from dflash_tui.app.replay import load
from dflash_tui.app.replay_app import ReplayApp

from app_helpers import launch, oracle_proposer, press_and_settle, wait_for, wait_idle, \
    wait_loaded


def live(pair, **kwargs) -> LiveApp:
    return LiveApp(launch(pair, **kwargs), show_timings=False, export_dir=Path("snapshots"),
                   record_trace=False)


def test_main_screen_after_three_rounds(snap_compare, pair):
    """Proposals forced to match the target on two slots: accepted, rejected and bonus
    tokens all show, and the history has something to say."""
    proposer = oracle_proposer(pair, "The quick brown fox", 40, good=2)

    async def steps(pilot):
        await wait_loaded(pilot)
        await press_and_settle(pilot, "n", "n", "n", "s", "s", "s", "s")  # round 3 at verify

    assert snap_compare(live(pair, proposer=proposer), terminal_size=(120, 35), run_before=steps)


def test_selector_tab_at_100x30(snap_compare, pair):
    async def steps(pilot):
        await wait_loaded(pilot)
        await press_and_settle(pilot, "n", "n", "s", "s", "s", "s", "2", "full_stop")

    assert snap_compare(live(pair), terminal_size=(100, 30), run_before=steps)


def test_selector_side_by_side_at_160x45(snap_compare, pair):
    """Wide screens put the candidates and the lattice heat map side by side."""
    proposer = oracle_proposer(pair, "The quick brown fox", 40, good=1)

    async def steps(pilot):
        await wait_loaded(pilot)
        await press_and_settle(pilot, "n", "s", "s", "s", "s", "2", "full_stop")

    assert snap_compare(live(pair, proposer=proposer), terminal_size=(160, 45), run_before=steps)


def test_nonfinite_breakpoint_hit(snap_compare, nan_pair):
    async def steps(pilot):
        app = pilot.app
        await wait_loaded(pilot)
        await pilot.press("c")
        await wait_for(pilot, lambda: app.status.kind == "breakpoint", what="the breakpoint")
        await wait_idle(pilot)
        await press_and_settle(pilot, "f")
        # the note naming the NaN weight (test_app_status) expires on its own clock; the
        # picture is of the probes table under it
        app.clear_notifications()
        await pilot.pause()

    assert snap_compare(live(nan_pair), terminal_size=(120, 35), run_before=steps)


def test_replay_of_a_trace(snap_compare, pair, tmp_path):
    from dflash_tui.engine.api import load_pair
    from dflash_tui.engine.session import SessionOptions
    from dflash_tui.snapshot import TraceWriter

    session = load_pair(*pair).open("The quick brown fox", options=SessionOptions(gamma=4))
    writer = TraceWriter(tmp_path / "session.jsonl", session.info, session.prefill_record)
    for record in session.run(4):
        writer.write(record)
    writer.close()
    session.close()
    app = ReplayApp(load(tmp_path / "session.jsonl"), show_timings=False, export_dir=Path("snapshots"))

    async def steps(pilot):
        await pilot.press("right", "right", "backspace", "backspace")  # round 2 at select
        pilot.app.render_now()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 35), run_before=steps)


def test_main_screen_at_80x24(snap_compare, pair):
    """The standard terminal: round number on screen, state values unwrapped, the history
    visible, the key bar's step keys first."""
    proposer = oracle_proposer(pair, "The quick brown fox", 60, good=2)

    async def steps(pilot):
        await wait_loaded(pilot)
        await press_and_settle(pilot, "n", "n", "n", "s", "s", "s", "s")

    assert snap_compare(live(pair, proposer=proposer, gamma=15), terminal_size=(80, 24), run_before=steps)


def test_aggregates_tab(snap_compare, pair):
    proposer = oracle_proposer(pair, "The quick brown fox", 60, good=3)

    async def steps(pilot):
        await wait_loaded(pilot)
        await press_and_settle(pilot, "n", "n", "n", "n", "4")

    assert snap_compare(live(pair, proposer=proposer), terminal_size=(120, 45), run_before=steps)


def test_earlier_round_beside_a_pinned_one(snap_compare, pair):
    """Live, looking back at round 0 with round 2 pinned: the header says so, the ranks
    table shows both rounds with the differences marked."""
    proposer = oracle_proposer(pair, "The quick brown fox", 60, good=2)

    async def steps(pilot):
        await wait_loaded(pilot)
        await press_and_settle(pilot, "n", "n", "n", "P", "home")

    assert snap_compare(live(pair, proposer=proposer), terminal_size=(160, 40), run_before=steps)


def test_probes_sorted_and_filtered_at_200_columns(snap_compare, pair):
    """A wide screen: the status line's right side whole (armed breakpoints, where files
    go); the probes table filtered to the draft stage and sorted by fp16 headroom."""
    async def steps(pilot):
        app = pilot.app
        await wait_loaded(pilot)
        await press_and_settle(pilot, "n", "b")
        await wait_for(pilot, lambda: app.screen is not app.main, what="the menu")
        await pilot.press("a", "ctrl+s")  # arm accepted == 0 as well
        await wait_for(pilot, lambda: app.screen is app.main, what="the menu to close")
        await pilot.press("F")
        await pilot.press(*"draft", "enter")
        await press_and_settle(pilot, *"oooooo")

    assert snap_compare(live(pair), terminal_size=(200, 40), run_before=steps)


def test_compare_tab_at_80x24(snap_compare, pair):
    """--compare layer-offset=-1 on the standard terminal: five tabs in short titles, the
    summary (this round, the running means, where the configurations part), both sides'
    slots, and the drift table with the first divergent buffer marked."""
    proposer = oracle_proposer(pair, "The quick brown fox", 60, good=2)

    async def steps(pilot):
        await wait_loaded(pilot)
        await press_and_settle(pilot, "n", "n", "n", "5")

    assert snap_compare(live(pair, proposer=proposer, compare="layer-offset=-1"),
                        terminal_size=(80, 24), run_before=steps)
