"""How the TUI feels: time from launch to the first frame, and key-press-to-screen latency
while the engine is computing rounds.

    python -m benchmarks.bench_tui [MODEL] [--draft DIR] [--keys 20] [--launches 5] [--json F]

(from the repository root: it shares tests/pty_terminal.py with the quit test)

Runs the real `dflash-tui` console script (OpenBLAS re-exec included) on a pseudo-terminal,
so what is measured is what a person sees: bytes reaching the terminal.

  launch -> first frame   spawn until the first full frame (header and footer) is written;
                          model loading happens afterwards, on the engine thread
  key -> screen           with a continuous run going (`c`, the engine computing round after
                          round), the time from writing `?` to the help screen's text on the
                          terminal, from `3` to the probes tab's text and from `4` to the
                          aggregates tab's; then the same tab switches with the run paused
  rounds per second       rounds the status line counted while the run went on (keys and all)

Goals: first frame under 1 s, key -> screen under 50 ms.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

from benchmarks.json_out import print_and_write
from tests.pty_terminal import Terminal

FIRST_FRAME = ("dflash-tui", "quit")  # header and key bar: the whole screen is drawn
READY = "ready after prefill"
RUNNING = "running ·"
PAUSED = "paused after"  # the status line once c has stopped the run
SETTLE = 0.15  # seconds between keys when paused: the previous switch's last frames are out
HELP = "dflash-tui help"
PROBES = "buffers"  # the probes tab's summary line
AGGREGATES = "per slot"  # the aggregates tab's first table
RANKS = "p(tgt)"  # the ranks table's header: hidden under the help, and on other tabs


def summary(values: list[float]) -> dict:
    ms = sorted(v * 1000 for v in values)
    return {"n": len(ms), "median_ms": round(statistics.median(ms), 1),
            "p90_ms": round(ms[min(len(ms) - 1, int(0.9 * len(ms)))], 1), "max_ms": round(ms[-1], 1)}


def last_round(term: Terminal, since: int) -> int:
    """The last round number the status line showed after output offset `since`."""
    with term.changed:
        data = bytes(term.output[since:])
    plain = re.sub(r"\x1b\[[0-9;?<>=$]*[a-zA-Z~]", "", data.decode("utf-8", "replace"))
    return int(re.findall(r"round (\d+)", plain)[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", help="MODEL_DIR or .gguf (default: the bundled sample)")
    parser.add_argument("--draft", help="drafter directory (default: MODEL_DIR/draft, or the sample's)")
    parser.add_argument("--block", type=int, default=4)
    parser.add_argument("--launches", type=int, default=5)
    parser.add_argument("--keys", type=int, default=20, help="key presses per measurement")
    parser.add_argument("--json", help="write the numbers here")
    args = parser.parse_args()

    exe = shutil.which("dflash-tui") or str(Path(sys.executable).parent / "dflash-tui")
    if os.environ.get("BENCH_EXE"):
        exe = os.environ["BENCH_EXE"]
    # no MODEL: the bundled sample pair (the CLI's own default)
    base = [exe, *([args.model] if args.model else []), "--block", str(args.block),
            "--max-tokens", "100000"]
    if args.draft:
        base += ["--draft", args.draft]

    launches = []
    for _ in range(args.launches):
        term = Terminal(base)
        try:
            launches.append(term.when(FIRST_FRAME) - term.started)
        finally:
            term.close()

    term = Terminal(base)
    help_open, probes_tab, aggregates_tab = [], [], []
    probes_paused, aggregates_paused = [], []
    try:
        t_ready = term.when(READY, timeout=600)
        load_seconds = t_ready - term.started
        since = term.mark()
        term.type("c")
        run_started = term.when(RUNNING, since=since)
        first_round = last_round(term, since)
        for _ in range(args.keys):
            since = term.mark()
            pressed = term.type("?")
            help_open.append(term.when(HELP, since=since) - pressed)
            since = term.mark()
            term.type("?")  # closes the help; the ranks table shows again
            term.when(RANKS, since=since)
            for key, text, times in (("3", PROBES, probes_tab), ("4", AGGREGATES, aggregates_tab)):
                since = term.mark()
                pressed = term.type(key)
                times.append(term.when(text, since=since) - pressed)
                since = term.mark()
                term.type("1")
                term.when(RANKS, since=since)
        # the same tab switches with the session paused (c again): nothing else to draw
        since = term.mark()
        term.type("c")
        run_ended = term.when(PAUSED, since=since)
        rounds_per_s = (last_round(term, since) - first_round) / (run_ended - run_started)
        for _ in range(args.keys):
            for key, text, times in (("3", PROBES, probes_paused), ("4", AGGREGATES, aggregates_paused)):
                time.sleep(SETTLE)
                since = term.mark()
                pressed = term.type(key)
                times.append(term.when(text, since=since) - pressed)
                time.sleep(SETTLE)
                since = term.mark()
                term.type("1")
                term.when(RANKS, since=since)
    finally:
        term.close()

    result = {
        "command": " ".join([Path(exe).name, *base[1:]]),
        "launch_to_first_frame": summary(launches),
        "model_ready_s": round(load_seconds, 2),
        "key_to_screen_while_running": {"help (?)": summary(help_open), "probes tab (3)": summary(probes_tab),
                                        **({"aggregates tab (4)": summary(aggregates_tab)} if aggregates_tab else {})},
        "rounds_per_s_while_running": round(rounds_per_s, 3),
        "key_to_screen_paused": {"probes tab (3)": summary(probes_paused),
                                 "aggregates tab (4)": summary(aggregates_paused)},
    }
    print_and_write(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
