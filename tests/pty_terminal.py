"""A child process on a pseudo-terminal (the real Linux tty driver, not Textual's headless
one), for the tests that quit a real app and for benchmarks/bench_tui.py, which times it.

A reader thread collects the child's output and timestamps every chunk, so a caller can
ask when some text reached the terminal without polling for it.
"""

from __future__ import annotations

import bisect
import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
import threading
import time


class Terminal:
    """`argv` on a pty of `size` (columns, rows); its output, with when each part arrived."""

    def __init__(self, argv: list[str], size=(120, 35), cwd=None):
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(size[0]), "LINES": str(size[1])}
        self.started = time.perf_counter()
        self.process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                        cwd=cwd, close_fds=True, start_new_session=True)
        os.close(slave)
        self.master = master
        self.output = bytearray()
        self.ends: list[int] = []  # output length after each read ...
        self.times: list[float] = []  # ... and when that read returned
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the child closed the pty
                chunk = b""
            now = time.perf_counter()
            with self.changed:
                if chunk:
                    self.output += chunk
                    self.ends.append(len(self.output))
                    self.times.append(now)
                self.changed.notify_all()
            if not chunk:
                return

    def mark(self) -> int:
        """How much output there is so far: pass it as `since` to `when`."""
        with self.changed:
            return len(self.output)

    def text(self) -> str:
        with self.changed:
            return self.output.decode("utf-8", "replace")

    def type(self, keys: str) -> float:
        """Write keys to the child; returns when they were written."""
        t = time.perf_counter()
        os.write(self.master, keys.encode())
        return t

    def when(self, needles, since: int = 0, timeout: float = 120.0) -> float:
        """Time at which every needle had reached the terminal after output offset `since`.
        Waits on the reader (no polling: the measuring process must not eat the CPU the
        app needs)."""
        needles = [n.encode() for n in ([needles] if isinstance(needles, str) else needles)]
        deadline = time.perf_counter() + timeout
        with self.changed:
            while True:
                data = bytes(self.output[since:])
                found = [data.find(n) for n in needles]
                if all(f >= 0 for f in found):
                    end = since + max(f + len(n) for f, n in zip(found, needles))
                    return self.times[bisect.bisect_left(self.ends, end)]
                left = deadline - time.perf_counter()
                if left <= 0 or self.process.poll() is not None:
                    plain = re.sub(r"\x1b\[[0-9;?<>=$]*[a-zA-Z~]", "",
                                   data.decode("utf-8", "replace"))[-1200:]
                    state = "timed out" if left <= 0 else f"exited ({self.process.returncode})"
                    raise TimeoutError(f"{state} waiting for {needles}; screen since: {plain!r}")
                self.changed.wait(min(left, 0.5))

    def wait_for(self, condition, timeout: float, what: str) -> None:
        """Until `condition()` holds (it may look at files as well as the screen)."""
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None:
                raise AssertionError(f"child exited ({self.process.returncode}) waiting for {what}:\n"
                                     + self.text()[-2000:])
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.01)  # polling a condition, not timing anything

    def quit(self, timeout: float = 10) -> tuple[int, float]:
        """Type `q`; (exit code, seconds until the process had left)."""
        t0 = time.monotonic()
        self.type("q")
        code = self.process.wait(timeout=timeout)
        return code, time.monotonic() - t0

    def close(self) -> None:
        """Ask the app to quit (`q`); kill it if it has not left within 5 s."""
        if self.process.poll() is None:
            self.type("q")
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        # the child's last bytes (the terminal's restore) may still sit in the pty: read them
        # up to the end before closing our side, which would throw them away
        self.reader.join(timeout=5)
        os.close(self.master)
