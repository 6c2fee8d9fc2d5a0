"""A command run on every rank of an mlx.distributed group (`--distributed`,
docs/DISTRIBUTED.md): join the group, keep every rank but rank 0 quiet, and never wait
forever.

Rank 0 prints and writes snapshots, summaries and traces; the other ranks compute the same
things and write nothing: their output paths are dropped and their stdout and stderr go to
/dev/null. The line saying why a rank ended still reaches the real stderr (the CLI prints
it to sys.__stderr__).

MLX's collectives cannot be interrupted, and Python runs a signal handler only when its main
thread gets back from them, so a watchdog thread ends a rank that would otherwise wait
forever: when the group's other ranks never join (JOIN_TIMEOUT_S); on ctrl+c, if the main
thread has not stopped by INTERRUPT_GRACE_S (exit code 130); and, for probe and bench, on
the SIGTERM mlx.launch sends every rank when one exits with an error, after TERM_GRACE_S,
which lets a rank that has just lost its peer say so itself (the line names the peer).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

OUTPUT_PATHS = ("out", "json", "csv", "trace")
JOIN_TIMEOUT_S = 300.0  # every rank joins right after starting Python, before loading anything
INTERRUPT_GRACE_S = 3.0  # time the main thread gets to act on ctrl+c itself
TERM_GRACE_S = 2.0  # time it gets to notice a lost peer (a collective fails within a second)


def join_group(args, app: bool = False):
    """The group this process was launched in (a Mesh), or an InputError saying why not.
    `app`: the TUI, whose rank 0 leaves on SIGTERM by itself (app/launched.py)."""
    from .engine.distributed import join

    rank = os.environ.get("MLX_RANK", "?")
    waiting = threading.Timer(JOIN_TIMEOUT_S, _give_up, (
        f"rank {rank}: the other ranks did not join within {JOIN_TIMEOUT_S:.0f} s",))
    waiting.daemon = True
    waiting.start()
    try:
        mesh = join()
    finally:
        waiting.cancel()
    _watch_signals(mesh.who, term=not app)
    if mesh.rank > 0:
        for name in OUTPUT_PATHS:
            if getattr(args, name, None) is not None:
                setattr(args, name, None)
        quiet = open(os.devnull, "w")
        sys.stdout = sys.stderr = quiet
    return mesh


def _give_up(message: str, code: int = 1) -> None:
    print(f"dflash-tui: error: {message}", file=sys.__stderr__, flush=True)
    os._exit(code)


def _watch_signals(who: str, term: bool) -> None:
    """End the process a grace period after SIGINT (or SIGTERM, with `term`) if the main
    thread has not ended it by then (module docstring). Signals reach this thread through
    Python's wakeup fd, which is written at the C level even while the main thread waits."""
    if term:  # the main thread carries on to the error of its next collective, or is ended
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
    ends = {signal.SIGINT: (INTERRUPT_GRACE_S, "interrupted while waiting on the other ranks", 130)}
    if term:
        ends[signal.SIGTERM] = (TERM_GRACE_S, "ended by SIGTERM (mlx.launch sends it to every "
                                              "rank when one exits with an error)", 143)
    read, write = os.pipe()
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)

    def watch() -> None:
        while (signum := os.read(read, 1)[0]) not in ends:
            pass
        grace, why, code = ends[signum]
        time.sleep(grace)  # a grace period, not a measurement
        _give_up(f"{who}: {why}", code)

    threading.Thread(target=watch, name="dflash-signals", daemon=True).start()
