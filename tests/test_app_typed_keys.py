"""Keys typed faster than the screen (auto-repeat, fast typing, a paste): a terminal hands
them over in one read and the driver queues them on the app at once. Each must act on the
state the keys before it produced, in order: a key that asks (g, /, a, F) and the enter that
answers must neither take nor drop the keys after them, and a key that acts on the round on
screen (x) acts on the round the keys before it led to. The bursts here are queued at once,
as the driver queues one read's keys, with no wait between them."""

from __future__ import annotations

import asyncio
import json
import threading
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Optional

import pytest
from textual import events
from textual.message import Message
from textual.widgets import Static

from dflash_tui.app import typed_keys
from dflash_tui.app.replay import load
from dflash_tui.app.replay_app import ReplayApp
from dflash_tui.breakpoints import Breakpoints
from dflash_tui.panels.probes import ProbesPanel

from app_helpers import SIZE, WAIT, live_app, press_and_settle, record_headless, run, \
    wait_for, wait_idle, wait_loaded

ROUNDS = 8
CHARS = {"number_sign": "#", "slash": "/", "minus": "-", "full_stop": ".", "space": " "}


@pytest.fixture(scope="module")
def trace(pair, tmp_path_factory):
    """A trace of ROUNDS rounds of the fixture pair, recorded headless."""
    return record_headless(pair, tmp_path_factory.mktemp("typed") / "trace.jsonl", ROUNDS)


def burst(app, *keys: str) -> None:
    """Queue keys at once, as the driver queues what one read of the terminal held."""
    for key in keys:
        if isinstance(key, events.Event):
            app.post_message(key)
            continue
        char = {"enter": "\r"}.get(key, CHARS.get(key, key if len(key) == 1 else None))
        app.post_message(events.Key(key, char))


def typed(text: str) -> list[str]:
    """The keys that type `text` (a question's answer)."""
    names = {char: key for key, char in CHARS.items()}
    return [names.get(char, char) for char in text]


async def handled(pilot) -> None:
    """Until every key queued has been routed and what it set off has run."""
    app = pilot.app
    typed_keys = getattr(app, "typed_keys", None)
    await wait_for(pilot, lambda: typed_keys is None or typed_keys.settled(), timeout=10,
                   what="the keys typed")
    await pilot.pause()


def busiest_token(app, trace) -> int:
    """A committed token id the search finds in the most rounds (a search with hits to step)."""
    from dflash_tui.search import search

    rounds = load(trace).sessions[0].rounds
    ids = {t for r in range(len(rounds)) for t in rounds.get(r).committed_tokens}
    return max(sorted(ids), key=lambda t: len({h.round for h in search(app.history, f"#{t}")}))


def replay(trace) -> ReplayApp:
    return ReplayApp(load(trace), show_timings=False, export_dir=Path("out"),
                     armed=Breakpoints(nonfinite=False))


def test_a_key_after_a_go_to_acts_once_the_go_to_has_landed(trace):
    """`g 3 enter →` in one read: the → went into the go-to field (the question was still
    open when it arrived) and was lost; it steps to round 4 after the go-to lands."""
    async def scenario():
        app = replay(trace)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            burst(app, "g", "3", "enter", "right")
            await handled(pilot)
            assert not app.main.asking
            assert (app.record.round, app.record.stage) == (4, "commit")

    run(scenario())


def test_next_hit_keys_after_a_search_step_through_its_hits(trace):
    """`/ #ID enter n n` in one read: the n's were typed into the search (`#IDnn`, found
    nowhere); they are next hit twice once the search is answered."""
    from dflash_tui.search import search

    async def scenario():
        app = replay(trace)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            token = busiest_token(app, trace)
            hits = search(app.history, f"#{token}")
            assert len({h.round for h in hits}) >= 3, "a token in three rounds or more"
            burst(app, "slash", *typed(f"#{token}"), "enter", "n", "n")
            await handled(pilot)
            assert not app.main.asking
            assert app.searching is not None and app.searching.query == f"#{token}"
            assert app.searching.index == 2
            assert (app.record.round, app.slot) == (hits[2].round, hits[2].shown_slot)

    run(scenario())


@pytest.mark.parametrize("keys, check", [
    # the tab key after the range's enter went into the range field (`1-2` + `1`)
    (["a", *typed("1-2"), "enter", "1"],
     lambda app: app.aggregate_rounds == (1, 2)
     and app.main.query_one("#inspector").active == "tab-ranks"),
    # the sort key after the filter's enter went into the filter (`drafto`)
    (["F", *typed("draft"), "enter", "o"],
     lambda app: str(app.main.query_one(ProbesPanel).filter) == "draft"
     and "sorted by" in app.status.message),
    # a paste answers the question as typing does, and the → after it waits for the answer
    (["g", events.Paste("5"), "enter", "left"], lambda app: app.record.round == 4),
])
def test_keys_after_an_answer_act_on_the_screen(trace, keys, check):
    async def scenario():
        app = replay(trace)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            burst(app, *keys)
            await handled(pilot)
            assert not app.main.asking
            assert check(app), (app.aggregate_rounds, app.status.message, app.record.round)

    run(scenario())


def test_an_export_after_stage_keys_exports_the_stage_they_led_to(trace):
    """`→ → backspace x` in one read: → is bound with priority and ran at once, backspace
    went by way of the focused table, so x (priority) exported round 2's commit before the
    backspace stepped back; it exports round 2's verify, what the keys before it showed."""
    async def scenario():
        app = replay(trace)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            assert (app.record.round, app.record.stage) == (0, "commit")
            burst(app, "right", "right", "backspace", "x")
            await handled(pilot)
            await wait_for(pilot, lambda: list(Path("out").glob("*/round-*.json")), timeout=10,
                           what="the export")
            assert (app.record.round, app.record.stage) == (2, "verify")
            exported, = Path("out").glob("*/round-*.json")
            snapshot = json.loads(exported.read_text())
            assert (snapshot["round"], snapshot["stage"]) == (2, "verify")

    run(scenario())


class SelectGate:
    """Forced proposals that hold the engine's select stage while the gate is held: keys
    typed meanwhile are handled while the stage they asked for is still computing, every time."""

    def __init__(self) -> None:
        self._open = threading.Event()
        self._open.set()

    def propose(self, committed: list[int], gamma: int) -> list[int]:
        assert self._open.wait(WAIT), "the test never opened the gate"
        return [0] * gamma

    @contextmanager
    def held(self):
        """Select stages wait inside the block; the gate opens at its end, whatever happens."""
        self._open.clear()
        try:
            yield
        finally:
            self._open.set()


@asynccontextmanager
async def live_after_round_0(pair, gate: SelectGate):
    """The live app on the fixture pair, proposing through `gate`, round 0 stepped: (app, pilot)."""
    app = live_app(pair, proposer=gate.propose)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await press_and_settle(pilot, "n")
        yield app, pilot


def exported() -> list[tuple[int, str]]:
    """(round, stage) of each JSON export, in the order written."""
    paths = sorted(Path("out").glob("*/round-*.json"), key=lambda p: p.stat().st_mtime_ns)
    return [(s["round"], s["stage"]) for s in (json.loads(p.read_text()) for p in paths)]


async def export_written(pilot) -> list[tuple[int, str]]:
    """exported(), once the engine is idle and an export has been written."""
    await wait_idle(pilot)
    await wait_for(pilot, exported, timeout=10, what="the export")
    return exported()


@pytest.mark.parametrize("keys, where", [
    # x exported round 1's draft, the stage on screen while s's select was computing
    (["s", "s", "s", "x"], (1, "select")),
    # x exported round 0, the round on screen while n's round was computing
    (["n", "x"], (1, "commit")),
])
def test_the_live_app_exports_the_stage_the_keys_before_x_led_to(pair, keys, where):
    """The live app: x typed after step keys exports what those steps led to, though the
    engine has not run them when x is handled (it queues behind them on the engine)."""
    gate = SelectGate()

    async def scenario():
        async with live_after_round_0(pair, gate) as (app, pilot):
            with gate.held():
                burst(app, *keys)
                await handled(pilot)
            assert await export_written(pilot) == [where]
            assert (app.record.round, app.record.stage) == where
            await wait_for(pilot, lambda: app.status.message.startswith("exported"),
                           timeout=10, what="the status to say so")
            assert f"round {where[0]} {where[1]}" in app.status.message

    run(scenario())


def test_an_export_queued_behind_a_paused_round_exports_where_it_paused(pair):
    """`x escape` during a round: the pause drops what was queued behind the round; the
    export among it is answered with the stage where the pause took effect, not dropped."""
    gate = SelectGate()

    async def scenario():
        async with live_after_round_0(pair, gate) as (app, pilot):
            with gate.held():
                burst(app, "n")
                await wait_for(pilot, lambda: app.engine.busy_stage == "select",
                               what="round 1's select computing")
                burst(app, "x", "escape")
                await handled(pilot)
            assert await export_written(pilot) == [(1, "select")]
            assert (app.record.round, app.record.stage) == (1, "select")

    run(scenario())


@pytest.mark.parametrize("armed, keys, answer", [
    # the menu's keys arrive before its screen is mounted
    (Breakpoints(nonfinite=False), ["p", "3"], Breakpoints(nonfinite=False, position=True,
                                                           position_at=3)),
    # a row's key then its number, letters and digits mixed: each digit after the letter
    # before it (bound with priority, the letters used to run ahead of the digits)
    (Breakpoints(), ["p", "3", "0", "0", "r", "5", "a", "n"],
     Breakpoints(nonfinite=False, zero_accepted=True, position=True, position_at=300,
                 rank_above=True, rank_threshold=5)),
    # `p` disarms an armed row; the number typed after it arms it again
    (Breakpoints(position=True, position_at=256), ["p", "3", "0", "0"],
     Breakpoints(position=True, position_at=300)),
])
def test_keys_after_the_breakpoints_key_go_to_the_menu_in_order(trace, armed, keys, answer):
    """`b`, the menu's keys and enter in one read."""
    async def scenario():
        app = ReplayApp(load(trace), show_timings=False, export_dir=Path("out"), armed=armed)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            burst(app, "b", *keys, "enter")
            await handled(pilot)
            assert app.screen is app.main
            assert app.armed == answer

    run(scenario())


def test_the_live_app_steps_after_a_go_to_too(pair):
    async def scenario():
        app = live_app(pair)
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n", "n", "n", "n", "n")
            burst(app, "g", "2", "enter", "right")
            await handled(pilot)
            await wait_idle(pilot)
            assert not app.main.asking and app.record.round == 3

    run(scenario())


def test_a_prompt_typed_after_p_goes_into_the_new_prompt(pair):
    """`p ctrl+n H i ctrl+s` in one read: the dialog's keys arrive before it is mounted and
    focused; they go into its editor, and the session restarts on "Hi"."""
    async def scenario():
        app = live_app(pair)
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n")
            burst(app, "p", "ctrl+n", "H", "i", "ctrl+s")
            await handled(pilot)
            assert app.screen is app.main
            await wait_loaded(pilot)
            assert app.info.prompt == "Hi"

    run(scenario())


def test_keys_typed_before_the_screen_is_up_act_once_it_is(trace):
    """Keys typed while the app starts (queued before the main screen's panels are up) act
    in order once they are, rather than being dropped by the view keys."""
    class TypedEarly(ReplayApp):
        def on_mount(self) -> None:
            assert not self._panels
            burst(self, "g", "3", "enter", "right", "2")

    async def scenario():
        app = TypedEarly(load(trace), show_timings=False, export_dir=Path("out"))
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await handled(pilot)
            assert not app.main.asking
            assert app.record.round == 4
            assert app.main.query_one("#inspector").active == "tab-selector"

    run(scenario())


def test_every_view_key_typed_before_the_screen_is_up_acts_once_it_is(trace):
    """The view keys that touch the panels (tabs, slots, columns, layers, probes' sort and
    filter, zoom, go-to, search, pin, the aggregates' range), typed while the app starts:
    each is held until the panels are up (they used to need a guard of their own, which
    dropped them), then acts in order."""
    keys = ["2", "full_stop", "greater_than_sign", "less_than_sign",  # selector tab, slot 1
            "right_square_bracket", "left_square_bracket", "f", "o", "O",  # probes
            "F", *typed("draft"), "enter",
            "m", "m",  # zoomed and back
            "g", "3", "enter", "P",  # round 3, pinned
            "slash", "escape",  # a search asked, then dismissed
            "a", *typed("1-2"), "enter"]  # the aggregates' range (its tab shown)

    class TypedEarly(ReplayApp):
        def on_mount(self) -> None:
            assert not self._panels
            burst(self, *keys)

    async def scenario():
        app = TypedEarly(load(trace), show_timings=False, export_dir=Path("out"))
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await handled(pilot)
            assert app.screen is app.main and not app.main.asking
            assert app.main.maximized is None
            assert app.slot == 1
            assert str(app.main.query_one(ProbesPanel).filter) == "draft"
            assert app.record.round == 3 and app.pinned is not None and app.pinned.round == 3
            assert app.aggregate_rounds == (1, 2)
            assert app.main.query_one("#inspector").active == "tab-aggregates"

    run(scenario())


def test_run_pause_run_in_one_read_leaves_the_session_running(pair):
    """`c c c` typed fast: run, pause, run. The third `c` came while the engine had not yet
    answered the pause, and was taken for a second pause: the session ended paused."""
    async def scenario():
        app = live_app(pair, max_tokens=10_000)
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n")
            burst(app, "c", "c", "c")
            await handled(pilot)
            rounds = len(app.history)
            await wait_for(pilot, lambda: len(app.history) >= rounds + 3, what="the run going on")
            assert app.running == "run"
            await pilot.press("space")
            await wait_idle(pilot)
            assert app.status.kind == "paused" and not app.pause_sent

    run(scenario())


class Slow(Message):
    """Work for a widget that takes a while (a stand-in for a screen's mount on a loaded
    machine)."""

    def __init__(self, number: int, release: Optional[asyncio.Event] = None) -> None:
        super().__init__()
        self.number, self.release = number, release


class SlowWidget(Static):
    started = -1

    async def on_slow(self, message: Slow) -> None:
        self.started = message.number
        if message.release is not None:
            await message.release.wait()  # stuck until the test lets it go
        else:
            await asyncio.sleep(0.1)


def test_a_key_waits_for_slow_work_that_keeps_going(trace):
    """Eight pieces of work of 0.1 s each, queued before a key: the key waits for all of
    them, 0.8 s in all, since the app keeps getting on with them (a limit of 0.5 s counted
    from the key's arrival let keys act on a screen still being built on a loaded machine)."""
    seen = []

    class Watched(ReplayApp):
        async def take_typed(self, event):
            seen.append(self.main.query_one(SlowWidget).started)
            await super().take_typed(event)

    async def scenario():
        app = Watched(load(trace), show_timings=False, export_dir=Path("out"))
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            widget = SlowWidget()
            await app.main.mount(widget)
            for number in range(8):
                widget.post_message(Slow(number))
            burst(app, "2")
            await handled(pilot)
            assert seen == [7]

    run(scenario())


def test_a_key_goes_on_when_a_widget_is_stuck(trace, monkeypatch):
    """A widget stuck mid-message, more work queued behind it: the key goes on after
    STUCK_AFTER with nothing handled, rather than wait for good."""
    monkeypatch.setattr(typed_keys, "STUCK_AFTER", 0.1)

    async def scenario():
        app = replay(trace)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            widget, release = SlowWidget(), asyncio.Event()
            await app.main.mount(widget)
            widget.post_message(Slow(0, release))
            widget.post_message(Slow(1))
            try:
                burst(app, "2")
                # polled without the pilot, whose pause waits for every widget (this one never)
                for _ in range(1000):
                    if app.main.query_one("#inspector").active == "tab-selector":
                        break
                    await asyncio.sleep(0.01)
                assert app.main.query_one("#inspector").active == "tab-selector"
                assert widget.started == 0 and not app.typed_keys.quiet()
            finally:
                release.set()

    run(scenario())
