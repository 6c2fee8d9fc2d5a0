"""The app's collector (docs/TUI.md, "The collector"): once the pair has loaded, what is alive
then is frozen out of the garbage collector's sight, once; the sessions made after it stay
collectable, so restarting many times holds no earlier session."""

from __future__ import annotations

import gc
import weakref

from app_helpers import SIZE, live_app, press_and_settle, run, wait_for, wait_loaded

from dflash_tui.app.main import launch_from_args
from dflash_tui.cli import parse


def test_the_app_the_cli_starts_freezes_what_has_loaded(make_pair):
    target, draft = make_pair()
    command, args = parse([str(target), "--draft", str(draft)])
    assert command == "tui" and launch_from_args(args).freeze_loaded


def test_a_frozen_app_still_frees_the_sessions_it_restarts(make_pair):
    gc.collect()
    frozen_before = gc.get_freeze_count()

    async def scenario():
        app = live_app(make_pair(), freeze_loaded=True)
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            frozen = gc.get_freeze_count()
            assert frozen > frozen_before  # the model, the tokenizer, Textual, the modules
            model = app.engine._pair.target.model
            assert all(o is not model for o in gc.get_objects())  # frozen: out of its sight
            first = weakref.ref(app.engine.session)
            for _ in range(3):
                await press_and_settle(pilot, "r")
                await wait_loaded(pilot)
            # frozen once, not at every restart (frozen objects still die when nothing holds them)
            assert gc.get_freeze_count() <= frozen
            await wait_for(pilot, lambda: gc.collect() is not None and first() is None,
                           what="the first session to be freed")

    try:
        run(scenario())
    finally:
        gc.unfreeze()  # the tests after this one run as they would without it
