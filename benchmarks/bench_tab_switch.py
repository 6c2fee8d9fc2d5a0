"""What a tab switch costs the TUI: CPU from a key to the new tab on screen, per tab, in
process on the tiny fixture pair (or a real one).

    python -m benchmarks.bench_tab_switch [MODEL|sample] [--running] [--switches 15]
                                          [--gamma 15] [--size 120x35] [--profile FILE]
                                          [--no-freeze]

(from the repository root: it writes the fixture checkpoints with tests/fixtures.py)

The live app runs headless on a real engine (the fixture pair, γ 15, by default), steps
--rounds rounds and then:

  paused      the tabs 2, 3 and 4 are shown by their keys, each followed by 1 (ranks), --switches
              times over. A switch is timed as the process's CPU time (all threads:
              time.process_time) from handing the key to the driver, as a terminal's bytes
              would arrive, until the screen stands still; and as wall time from the key to
              the first frame with the new tab. `idle` is the same wait with no key.
  --running   the same with a run going (c): wall time from the key to the first frame with
              the new tab, and the UI thread's CPU time in it (the engine's thread is not
              counted).

Each frame is rendered to terminal bytes as the real driver does (headless Textual skips
that), so what is counted is what a person waits for, less the terminal itself.
--profile FILE writes a cProfile of the switches alone (pstats format). The app freezes
what is alive once the pair has loaded, as `dflash-tui` does (Launch.freeze_loaded);
--no-freeze leaves that out, for a before/after. Both report the full (generation 2)
garbage collections made while switching: how many, and their median and longest time.
Goal: a tab switch under 50 ms from key to screen while rounds run (docs/TUI.md).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

from benchmarks.json_out import print_and_write

KEYS = {"1": "ranks", "2": "selector", "3": "probes", "4": "aggregates"}
# what only a frame drawing the tab writes (the frame before the layout repaints the old one)
NEEDLES = {"tab-ranks": ("p(tgt)",), "tab-selector": ("pick", "argmax"), "tab-probes": ("buffers",),
           "tab-aggregates": ("per slot",)}
SETTLE = 0.06  # seconds of wall clock after a key: the frame is on screen well within it
BETWEEN = 0.15  # --running: seconds between keys (a round or two is drawn in between)


def median_ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 1)


async def settle(app, seconds: float) -> None:
    """Let the app run on its own (timers, the screen's update timer) for a while, and on
    until the screen has nothing left to lay out or paint."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    screen = app.screen
    while screen._layout_required or screen._repaint_required or screen._dirty_widgets:
        if time.monotonic() > deadline + 5:
            raise AssertionError("the screen never stood still")
        await asyncio.sleep(0.005)


def render_frames_to_bytes(app, shown) -> None:
    """Headless Textual composites each frame but writes nothing: render the update to the
    terminal's bytes here, as the real driver path does (App._display). Then shown(text)
    is called with them: a frame has reached the terminal."""
    from textual._compositor import CompositorUpdate

    original = app._display

    def display(screen, renderable) -> None:
        original(screen, renderable)
        if isinstance(renderable, CompositorUpdate):
            shown(renderable.render_segments(app.console))

    app._display = display


def send_key(app, key: str) -> None:
    """As a terminal's bytes arrive: the driver hands the app a key event."""
    from textual import events

    event = events.Key(key, key)
    event.set_sender(app)
    app._driver.send_message(event)


async def switch(app, watch, key: str, tab: str) -> tuple[float, float]:
    """A switch with the session paused: CPU seconds until the screen stands still, and
    wall seconds until the new tab's first frame."""
    start = time.process_time()
    watch.press(app, key, tab)
    await settle(app, SETTLE)
    cpu = time.process_time() - start
    return cpu, (await watch.wait())[0]


class FrameWatch:
    """Wall and UI-thread CPU seconds from a key until the frames since have drawn the new
    tab (the engine's own thread is not counted)."""

    def __init__(self) -> None:
        self.tab: Optional[str] = None
        self.written = ""  # terminal output since the key
        self.start = (0.0, 0.0)
        self.result: Optional[tuple[float, float]] = None
        self.done = asyncio.Event()  # set when the tab is on screen: no polling to count

    def press(self, app, key: str, tab: str) -> None:
        self.tab, self.result, self.written = tab, None, ""
        self.done.clear()
        self.start = (time.perf_counter(), time.thread_time())
        send_key(app, key)

    def shown(self, text: str) -> None:
        if self.tab is None:
            return
        self.written += text
        if all(needle in self.written for needle in NEEDLES[self.tab]):
            self.result = (time.perf_counter() - self.start[0], time.thread_time() - self.start[1])
            self.tab = None
            self.done.set()

    async def wait(self) -> tuple[float, float]:
        try:
            await asyncio.wait_for(self.done.wait(), 10)
        except asyncio.TimeoutError:
            raise AssertionError("the tab never reached the screen") from None
        return self.result


async def measure(pair, args, profiler) -> dict:
    from dflash_tui.app.engine_thread import Launch
    from dflash_tui.app.live import LiveApp

    from tests.app_helpers import wait_for, wait_idle, wait_loaded

    target, draft = pair
    launch = Launch(model=target, draft=draft, prompt=args.prompt, gamma=args.gamma,
                    max_tokens=100000, freeze_loaded=not args.no_freeze)
    width, height = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory() as out:
        app = LiveApp(launch, show_timings=False, export_dir=Path(out))
        async with app.run_test(size=(width, height)) as pilot:
            await wait_loaded(pilot)
            for _ in range(args.rounds):
                await pilot.press("n")
                await wait_idle(pilot)
            await wait_for(pilot, lambda: app.record is not None and app.record.round == args.rounds - 1,
                           what="the rounds")
            watch = FrameWatch()
            render_frames_to_bytes(app, watch.shown)
            await settle(app, SETTLE)
            with FullCollections() as collections:
                if args.running:
                    result = await measure_running(app, watch, args, profiler)
                else:
                    result = await measure_paused(app, watch, args, profiler)
            return {**result, "full garbage collections while switching": collections.summary()}


class FullCollections:
    """Times every full (generation 2) garbage collection while it is entered (gc.callbacks)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._start = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds.append(time.perf_counter() - self._start)

    def __enter__(self) -> "FullCollections":
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self._callback)

    def summary(self) -> dict:
        if not self.seconds:
            return {"count": 0}
        return {"count": len(self.seconds), "median ms": median_ms(self.seconds),
                "longest ms": round(max(self.seconds) * 1000, 1),
                "objects it walks": len(gc.get_objects()), "frozen objects": gc.get_freeze_count()}


async def measure_paused(app, watch, args, profiler) -> dict:
    cpu = {name: [] for name in KEYS.values()}
    wall = {name: [] for name in KEYS.values()}
    idle = []
    for _ in range(args.switches):
        for key in "213141":  # from the ranks tab to each other one and back
            if profiler is not None:
                profiler.enable()
            seconds, to_frame = await switch(app, watch, key, f"tab-{KEYS[key]}")
            if profiler is not None:
                profiler.disable()
            cpu[KEYS[key]].append(seconds)
            wall[KEYS[key]].append(to_frame)
        start = time.process_time()
        await settle(app, SETTLE)
        idle.append(time.process_time() - start)
    return {"tab switch, session paused: median ms of CPU (all threads)":
            {name: median_ms(v) for name, v in cpu.items()},
            "all switches, median ms": median_ms([t for v in cpu.values() for t in v]),
            "key to the tab's first frame (wall), median ms": {name: median_ms(v) for name, v in wall.items()},
            "idle (no key), median ms": median_ms(idle)}


async def measure_running(app, watch, args, profiler) -> dict:
    send_key(app, "c")
    deadline = time.monotonic() + args.warmup
    while time.monotonic() < deadline or app.running != "run":
        await asyncio.sleep(0.01)
    rounds_before = len(app.history)
    wall = {name: [] for name in KEYS.values()}
    cpu = {name: [] for name in KEYS.values()}
    started = time.monotonic()
    for _ in range(args.switches):
        for key in "2341":
            if key != "1":
                await asyncio.sleep(BETWEEN)
                watch.press(app, "1", "tab-ranks")
                await watch.wait()
            await asyncio.sleep(BETWEEN)
            if profiler is not None:
                profiler.enable()
            watch.press(app, key, f"tab-{KEYS[key]}")
            seconds, thread_cpu = await watch.wait()
            if profiler is not None:
                profiler.disable()
            wall[KEYS[key]].append(seconds)
            cpu[KEYS[key]].append(thread_cpu)
    assert app.running == "run", "the run stopped (EOS or --max-tokens): a longer --prompt?"
    rate = (len(app.history) - rounds_before) / (time.monotonic() - started)
    return {"tab switch while running: median ms from key to the frame":
            {name: median_ms(v) for name, v in wall.items()},
            "UI thread CPU in that time, median ms": {name: median_ms(v) for name, v in cpu.items()},
            "all switches, median ms": median_ms([t for v in wall.values() for t in v]),
            "rounds in the history at the end": len(app.history),
            "rounds a second while switching": round(rate, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", help="MODEL_DIR or .gguf (default: the tiny fixture pair; "
                                                 "'sample': the bundled sample)")
    parser.add_argument("--draft", help="drafter directory (default: MODEL_DIR/draft, or the sample's)")
    parser.add_argument("--rounds", type=int, default=8, help="rounds stepped before switching")
    parser.add_argument("--switches", type=int, default=15, help="switches to each tab")
    parser.add_argument("--gamma", type=int, default=15)
    parser.add_argument("--prompt", help="default: a fixture prompt, or the sample's")
    parser.add_argument("--size", default="120x35", help="terminal WIDTHxHEIGHT")
    parser.add_argument("--running", action="store_true",
                        help="switch while a run (c) goes on: key to frame, wall and UI-thread CPU")
    parser.add_argument("--warmup", type=float, default=2.0, help="--running: seconds run before switching")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the switches here")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    parser.add_argument("--no-freeze", action="store_true",
                        help="leave the collector as it is after loading (before/after)")
    args = parser.parse_args()

    profiler = cProfile.Profile() if args.profile else None
    with tempfile.TemporaryDirectory() as root:
        if args.model is None:
            from tests.fixtures import write_pair

            pair = write_pair(Path(root))
            args.prompt = args.prompt or "The quick brown fox"
        else:
            from dflash_tui.sample import DEFAULT_PROMPT, resolve

            pair = resolve(None if args.model == "sample" else args.model, args.draft)
            args.prompt = args.prompt or DEFAULT_PROMPT
        result = asyncio.run(measure(pair, args, profiler))
        for thread in threading.enumerate():
            if thread.name == "dflash-engine":  # quits after its stage (the app sent Quit)
                thread.join(30)
    result = {"command": "python -m benchmarks.bench_tab_switch " + " ".join(sys.argv[1:]), **result}
    if profiler is not None:
        profiler.dump_stats(str(args.profile))
    print_and_write(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
