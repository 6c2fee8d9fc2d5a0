"""How soon a key acts in replay while the reading pass reads a long trace, and after it, as
a person sees it: `dflash-tui replay TRACE` in tmux, a tab shown (4, the aggregates, by
default), then `→` pressed every 0.25 to 0.6 s, each timed from the key sent until the
header on the terminal shows the next round. (A benchmark that reports numbers, not a test.)

    python benchmarks/bench_replay_keys.py TRACE [--size 80x24] [--tab 4] [--after 12]
                                           [--code DIR] [--json FILE]

TRACE: a long trace, e.g. one kept by `python benchmarks/bench_replay.py --keep FILE`
(three sessions, 3,512 rounds, 106 MB). --code runs another checkout's dflash_tui (a
"before": its engine/ and panels/ linked in as the editable install maps them), with this
checkout's virtual environment. Reports the median, 90th percentile and longest wait, keys
pressed while it reads (`during`) and --after keys once it has read every round (`after`).
Needs tmux; runs on a server of its own (-L bench-replay-keys).
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from json_out import print_and_write  # beside this file (run as a script)

ROOT = Path(__file__).resolve().parent.parent
TMUX = ["tmux", "-L", "bench-replay-keys"]
HEADER_ROUND = re.compile(r"round (\d+)/")  # the header's round label, "round 12/2011"


def screen() -> str:
    return subprocess.run(TMUX + ["capture-pane", "-p", "-t", "b"], capture_output=True,
                          text=True).stdout


def on_screen(text: str) -> str | None:
    match = HEADER_ROUND.search(text)
    return match.group(1) if match else None


def wait_until(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit("bench_replay_keys: the screen did not show what was expected")
        time.sleep(0.01)


def summary(waits: list[float]) -> dict:
    if not waits:
        return {"keys": 0}
    waits = sorted(waits)
    return {"keys": len(waits), "median_s": round(statistics.median(waits), 3),
            "p90_s": round(waits[int(0.9 * (len(waits) - 1))], 3), "max_s": round(waits[-1], 3)}


def measure(trace: Path, code: Path, size: str, tab: str, after_keys: int) -> dict:
    cols, rows = size.lower().split("x")
    python = ROOT / ".venv" / "bin" / "python"
    command = f"cd /tmp && PYTHONPATH={code} {python} -m dflash_tui replay {trace}; sleep 600"
    subprocess.run(TMUX + ["kill-server"], capture_output=True)
    subprocess.run(TMUX + ["new-session", "-d", "-s", "b", "-x", cols, "-y", rows, command], check=True)
    try:
        wait_until(lambda: on_screen(screen()) is not None)
        subprocess.run(TMUX + ["send-keys", "-t", "b", tab])
        time.sleep(0.3)
        during, after, pause = [], [], random.Random(1)
        while len(after) < after_keys:
            text = screen()
            reading, before = "reading" in text, on_screen(text)
            sent = time.monotonic()
            subprocess.run(TMUX + ["send-keys", "-t", "b", "Right"])
            wait_until(lambda: on_screen(screen()) not in (None, before), timeout=10)
            (during if reading else after).append(time.monotonic() - sent)
            time.sleep(pause.uniform(0.25, 0.6))
    finally:
        subprocess.run(TMUX + ["kill-server"], capture_output=True)
    return {"code": str(code), "size": size, "tab": tab, "during": summary(during),
            "after": summary(after)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--size", default="80x24", help="the terminal, COLSxROWS")
    parser.add_argument("--tab", default="4", help="the tab shown while keys are pressed")
    parser.add_argument("--after", type=int, default=12, help="keys pressed once it has read every round")
    parser.add_argument("--code", default=str(ROOT), help="the checkout whose dflash_tui runs")
    parser.add_argument("--json", help="write the result here too")
    args = parser.parse_args(argv)
    code = Path(args.code).resolve()
    for package in ("engine", "panels"):  # as the editable install maps them
        link = code / "dflash_tui" / package
        if code != ROOT and not link.exists():
            link.symlink_to(code / package)
    result = measure(Path(args.trace).resolve(), code, args.size, args.tab, args.after)
    print_and_write(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
