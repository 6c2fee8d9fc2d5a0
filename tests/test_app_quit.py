"""Quitting a real process while its engine thread is inside a stage: the process leaves
within a second, exit code 0, no traceback, terminal restored.

The app runs in a child process on a pseudo-terminal (the real Linux driver, not the
headless test driver). The engine's forced-proposal hook holds the select stage open, as an
uninterruptible MLX op would: the child writes a marker file when it is inside.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import textwrap
import threading
import time

import pytest

CHILD = textwrap.dedent("""
    import sys, threading
    from pathlib import Path
    from dflash_tui.app.engine_thread import Launch
    from dflash_tui.app.main import run_live

    marker = Path(sys.argv[3])

    def proposer(tokens, gamma):
        marker.write_text("inside select")
        threading.Event().wait()  # never returns: an op that cannot be interrupted
        return []

    launch = Launch(model=Path(sys.argv[1]), draft=Path(sys.argv[2]), prompt="hi", gamma=3,
                    proposer=proposer)
    sys.exit(run_live(launch, export_dir=Path("unused")))
""")


class Terminal:
    """A child process on a pty of a given size, its output collected by a thread."""

    def __init__(self, argv: list[str], size=(120, 35), cwd=None):
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(size[0]), "LINES": str(size[1])}
        self.process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                        cwd=cwd, close_fds=True, start_new_session=True)
        os.close(slave)
        self.master = master
        self.output = bytearray()
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                self.output += chunk

    def text(self) -> str:
        with self._lock:
            return self.output.decode("utf-8", "replace")

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def wait_for(self, condition, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None:
                raise AssertionError(f"child exited ({self.process.returncode}) waiting for {what}:\n"
                                     + self.text()[-2000:])
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.01)  # polling a condition, not timing anything

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self.master)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pty test")
def test_quit_while_a_stage_runs_leaves_within_a_second(make_pair, tmp_path):
    target, draft = make_pair("llama", "DFlash2DraftModel")
    marker = tmp_path / "inside"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    term = Terminal([sys.executable, str(script), str(target), str(draft), str(marker)], cwd=tmp_path)
    try:
        term.wait_for(lambda: "dflash-tui" in term.text(), 30, "the first frame")
        term.type("c")  # queued while loading: the run starts after prefill
        term.wait_for(marker.exists, 60, "the engine to enter select")
        t0 = time.monotonic()
        term.type("q")
        code = term.process.wait(timeout=10)
        seconds = time.monotonic() - t0
    finally:
        term.close()
    output = term.text()
    print(f"quit to exit: {seconds * 1000:.0f} ms")
    assert code == 0, output[-2000:]
    assert seconds < 1.0, f"quit took {seconds:.2f} s"
    assert "Traceback" not in output and "Error" not in output
    assert "\x1b[?1049l" in output  # the alternate screen was left: terminal restored
