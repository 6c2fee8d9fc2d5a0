"""What the app tests share: running a pilot scenario, waiting on conditions, reading the
screen, launching a session on a fixture pair, forced proposals.

The pilot tests wait on conditions with a deadline (pilot.pause loops), never on sleeps.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from dflash_tui.app.engine_thread import Launch

WAIT = 60.0  # seconds: generous for a cold first MLX import on a busy CI machine
SIZE = (120, 35)  # the terminal most app tests run in


def run(coro):
    """Run one pilot scenario (an `async def` using `app.run_test`) to its end."""
    return asyncio.run(coro)


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


async def scroll_columns_to_the_bell(pilot, table, key: str) -> list[int]:
    """Press `key` (`greater_than_sign`, `less_than_sign`) until `table` scrolls no further:
    its scroll_x before the first press and after each that moved it. The press that moved
    nothing must ring the bell (another table in the tab may ring too, at its own end)."""
    bells = []
    pilot.app.bell = lambda: bells.append(1)
    stops = [int(table.scroll_x)]
    for _ in range(len(table.labels) + 1):
        rung = len(bells)
        await press_and_settle(pilot, key)
        if int(table.scroll_x) == stops[-1]:
            assert len(bells) > rung, f"{key} moved nothing and rang no bell"
            return stops
        stops.append(int(table.scroll_x))
    raise AssertionError(f"{key} scrolled past every column: {stops}")


async def check_every_column_reachable(pilot, table) -> None:
    """`table` has columns off screen; `>` brings them in a whole column at a time, the
    first (naming the row) staying put, until the last column's header is on screen and
    the bell rings; `<` walks the same stops back to the start, then the bell."""
    def header() -> str:  # a label may be two words ("ref target")
        return widget_text(pilot.app, table).splitlines()[0]

    first, last = table.labels[0], table.labels[-1]
    assert last not in header(), "the last column starts off screen"
    stops = await scroll_columns_to_the_bell(pilot, table, "greater_than_sign")
    assert stops == table._edges() and len(stops) > 1, "a stop at every column's edge"
    assert header().split()[0] == first and header().rstrip().endswith(last)
    back = await scroll_columns_to_the_bell(pilot, table, "less_than_sign")
    assert back == stops[::-1]
    assert header().split()[0] == first and last not in header()


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


def live_app(pair, app_options: dict | None = None, **launch_options):
    """The live app on a fixture pair, clocks frozen, its files under ./out (the test's
    temporary directory)."""
    from pathlib import Path

    from dflash_tui.app.live import LiveApp

    options = {"show_timings": False, "export_dir": Path("out"), **(app_options or {})}
    return LiveApp(launch(pair, **launch_options), **options)



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


def record_headless(pair, path: Path, rounds: int, gamma: int = 3, probes: bool = True) -> Path:
    """A trace of `rounds` rounds of `pair`, recorded without the app."""
    from dflash_tui.engine.api import load_pair
    from dflash_tui.engine.session import SessionOptions
    from dflash_tui.snapshot import TraceWriter

    session = load_pair(*pair).open("hi", options=SessionOptions(gamma=gamma, max_tokens=1000,
                                                                 probes=probes))
    writer = TraceWriter(path, session.info, session.prefill_record)
    for record in session.run(rounds):
        writer.write(record)
    writer.close()
    session.close()
    return path
