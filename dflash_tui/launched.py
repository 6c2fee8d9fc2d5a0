"""A command run on every rank of an mlx.distributed group (`--distributed`,
docs/DISTRIBUTED.md): join the group, keep every rank but rank 0 quiet, and never wait
forever.

Rank 0 prints and writes snapshots, summaries and traces; the other ranks compute the same
things and write nothing: their output paths are dropped and their stdout and stderr go to
/dev/null. The line saying why a rank ended still reaches the real stderr (the CLI prints
it to sys.__stderr__).

MLX's collectives cannot be interrupted, and Python runs a signal handler only when its main
thread gets back from them, so two waits get a watchdog thread of their own: joining a group
whose other ranks never come (JOIN_TIMEOUT_S), and ctrl+c while a rank is inside a collective
(after INTERRUPT_GRACE_S, the rank ends with exit code 130).
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


def join_group(args):
    """The group this process was launched in (a Mesh), or an InputError saying why not."""
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
    _end_when_interrupted(mesh.who)
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


def _end_when_interrupted(who: str) -> None:
    """On SIGINT, give the main thread INTERRUPT_GRACE_S to stop (KeyboardInterrupt, as
    always); if it is stuck in a collective by then, end the process. The signal reaches
    this thread through Python's wakeup fd, which is written at the C level."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)

    def watch() -> None:
        while os.read(read, 1)[0] != signal.SIGINT:
            pass
        time.sleep(INTERRUPT_GRACE_S)  # a grace period, not a measurement
        _give_up(f"{who}: interrupted while waiting on the other ranks", 130)

    threading.Thread(target=watch, name="dflash-interrupt", daemon=True).start()
