"""Replay of a long trace: how soon its first frame comes, how long until the history's
summaries are filled in, and the memory it takes. (A benchmark that reports numbers, not a
test.)

    python benchmarks/bench_replay.py [TRACE] [--rounds 2500,1000,500] [--keep FILE]
                                      [--size 120x35] [--json FILE]

Without TRACE it writes one with the tiny fixture pair of tests/fixtures.py (about 29 KB a
round): a session per number in --rounds, one after another in one file, as an explicit
`--trace FILE` records a session and its restarts (a session ends early at the fixture
target's context, about 2,000 rounds). --keep FILE keeps the trace it wrote.

Then replay runs headless in a fresh process, so that its memory is replay's alone, as
`dflash-tui replay TRACE` opens it (replay.open_recording, then the app), and reports:

  open_s         the trace opened (indexed: where each round's line starts)
  first_frame_s  from before opening it until the app has drawn its first frame
  read_s         from before opening it until the reading pass has filled every session's
                 history (the history panel, aggregates, search, compare)
  end_ms         `end` pressed after that: the last round read from the file and drawn
  peak_rss_mb    the process's peak resident memory (VmHWM), and rss_mb at the end
  records_held   full round records in memory at the end: the histories' windows and the
                 rounds read back and kept (recorded_rounds.READ_BACK a session)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from json_out import print_and_write  # beside this file (run as a script)

ROOT = Path(__file__).resolve().parent.parent


def write_trace(path: Path, sessions: list[int]) -> list[int]:
    """A trace of the fixture pair, a session per entry; the rounds each one ran."""
    sys.path.insert(0, str(ROOT / "tests"))
    from fixtures import write_pair

    from dflash_tui.engine.api import load_pair
    from dflash_tui.engine.session import SessionOptions
    from dflash_tui.snapshot import TraceWriter

    pair = load_pair(*write_pair(path.parent / "pair"))
    ran = []
    for rounds in sessions:
        session = pair.open("The quick brown fox",
                            options=SessionOptions(gamma=4, max_tokens=5 * rounds + 16))
        writer = TraceWriter(path, session.info, session.prefill_record)
        ran.append(0)
        for record in session.run(rounds):
            writer.write(record)
            ran[-1] += 1
        writer.close()
        session.close()
    return ran


def memory_mb() -> dict:
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmHWM:", "VmRSS:")):
                found[line.split(":")[0]] = round(int(line.split()[1]) / 1024, 1)
    return {"peak_rss_mb": found.get("VmHWM"), "rss_mb": found.get("VmRSS")}


async def measure(trace: Path, size: tuple[int, int]) -> dict:
    start = time.perf_counter()
    from dflash_tui.app.replay import open_recording
    from dflash_tui.app.replay_app import ReplayApp

    recording = open_recording(trace)
    opened = time.perf_counter() - start
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as out:
        app = ReplayApp(recording, show_timings=False, export_dir=Path(out))
        async with app.run_test(size=size) as pilot:
            while app._drawn is None:
                await pilot.pause(0.01)
            first_frame = time.perf_counter() - start
            while app.reading() is not None:
                await pilot.pause(0.05)
            read = time.perf_counter() - start
            key = time.perf_counter()
            await pilot.press("end")
            app.render_now()
            end_ms = (time.perf_counter() - key) * 1000
            histories = [app._session_history(s)[0] for s in range(len(recording.sessions))]
            held = sum(len(h.kept()) for h in histories) + sum(s.rounds.kept() for s in recording.sessions)
            return {"trace_mb": round(trace.stat().st_size / 2**20, 1),
                    "sessions": len(recording.sessions),
                    "rounds": sum(len(s.rounds) for s in recording.sessions),
                    "open_s": round(opened, 2), "first_frame_s": round(first_frame, 2),
                    "read_s": round(read, 2), "end_ms": round(end_ms, 1), **memory_mb(),
                    "records_held": held, "history_rows": sum(len(h) for h in histories)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", nargs="?", help="a trace to replay (default: one written now)")
    parser.add_argument("--rounds", default="2500,1000,500",
                        help="without TRACE: the rounds of each session written (comma-separated)")
    parser.add_argument("--keep", help="without TRACE: keep the trace written here")
    parser.add_argument("--size", default="120x35", help="the terminal, COLSxROWS")
    parser.add_argument("--json", help="write the result here too")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # the child
    args = parser.parse_args(argv)
    size = tuple(int(n) for n in args.size.lower().split("x"))
    if args.measure:
        print(json.dumps(asyncio.run(measure(Path(args.trace), size))))
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        trace = Path(args.trace) if args.trace else Path(args.keep or Path(tmp) / "trace.jsonl")
        if not args.trace:
            started = time.perf_counter()
            ran = write_trace(trace, [int(n) for n in args.rounds.split(",")])
            print(f"wrote {trace}: sessions of {', '.join(map(str, ran))} rounds, "
                  f"{trace.stat().st_size / 2**20:.0f} MB, in {time.perf_counter() - started:.0f} s",
                  file=sys.stderr)
        child = subprocess.run([sys.executable, __file__, str(trace), "--measure", "--size", args.size],
                               capture_output=True, text=True, cwd=ROOT)
        if child.returncode != 0:
            print(child.stderr, file=sys.stderr)
            return child.returncode
        result = json.loads(child.stdout.strip().splitlines()[-1])
    print_and_write(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
