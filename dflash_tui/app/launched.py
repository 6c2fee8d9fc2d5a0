"""`dflash-tui MODEL --distributed` under mlx.launch: the app on rank 0, a follower on every
other rank (app/lockstep.py), and rank 0 on the launcher's terminal.

mlx.launch gives every rank pipes for stdin, stdout and stderr: it reads the keyboard
itself, copies what it reads to every rank's stdin, and copies their output to its own. An
app needs a terminal, so rank 0 draws straight on the launcher's (/dev/tty) and reads its
keys from stdin, where the launcher forwards them. The launcher leaves the terminal in line
mode, so rank 0 switches it to the app's raw mode itself (keys arrive one at a time,
unechoed) and restores it on the way out. Started on a terminal of its own (by hand, or as
a remote rank over `ssh -tt`), rank 0 uses that as any app does.

A rank can end at any moment; the launcher then sends the others SIGTERM. On rank 0 that
(or the engine thread's own SIGTERM when the group breaks, app/lockstep.py) leaves the app as
`q` does, so the terminal is restored and the last line says why.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import termios
from contextlib import contextmanager

from ..engine.errors import GroupError, InputError
from .engine_thread import Launch


def run_group(launch: Launch, **app_options) -> int:
    mesh = launch.mesh
    if mesh.rank > 0:
        from ..engine.api import load_pair
        from .lockstep import follow

        pair = load_pair(launch.model, launch.draft, dtype=launch.dtype,
                         keep_quantized=launch.keep_quantized, mesh=mesh)
        return follow(pair, mesh)
    from .main import run_live

    return run_live(launch, **app_options)


@contextmanager
def rank0_terminal(app, mesh):
    """The app on rank 0: on the launcher's terminal, leaving on SIGTERM, and with a last
    line saying why, when the group broke."""
    exit_on_sigterm(app, mesh)
    with launcher_terminal():
        yield
        if mesh.failure is not None:
            print(f"dflash-tui: error: {mesh.who}: {mesh.failure}", file=sys.stderr, flush=True)


@contextmanager
def launcher_terminal():
    """Rank 0 on the terminal mlx.launch runs in (module docstring)."""
    if sys.stdin.isatty():
        yield
        return
    try:
        tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        raise InputError("--distributed: rank 0 has no terminal to draw on (no /dev/tty): run "
                         "mlx.launch from a terminal, or use dflash-tui probe / bench") from None
    from textual.drivers.linux_driver import LinuxDriver

    before = termios.tcgetattr(tty)
    raw = termios.tcgetattr(tty)
    raw[3] = LinuxDriver._patch_lflag(raw[3])  # the app's own settings, as on its own terminal
    raw[0] = LinuxDriver._patch_iflag(raw[0])
    raw[6][termios.VMIN] = 1
    saved_out, saved_err = os.dup(1), os.dup(2)
    # The launcher's snapshot of the size would pin it; the terminal answers from now on.
    size_env = {name: os.environ.pop(name) for name in ("COLUMNS", "LINES") if name in os.environ}
    os.dup2(tty, 1)
    os.dup2(tty, 2)
    termios.tcsetattr(tty, termios.TCSANOW, raw)
    try:
        yield
    finally:
        termios.tcsetattr(tty, termios.TCSADRAIN, before)
        sys.stdout.flush()
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        for fd in (saved_out, saved_err, tty):
            os.close(fd)
        os.environ.update(size_env)


def exit_on_sigterm(app, mesh) -> None:
    """Leave the app cleanly when SIGTERM comes (module docstring)."""

    def handler(signum, frame):
        if mesh.failure is None:  # not our own engine thread: the launcher, for another rank
            other = "rank 1" if mesh.size == 2 else "another rank"
            mesh.failure = f"{other} ended, and mlx.launch ended this one"
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # the app is not running (yet, or any more)
            raise SystemExit(GroupError.exit_code) from None
        loop.call_soon_threadsafe(app.exit, None, GroupError.exit_code)

    signal.signal(signal.SIGTERM, handler)

