"""Ctrl-C during training: finish the step in hand, save, exit 130.

A KeyboardInterrupt raised inside a step could land between the optimizer's update and the
loop taking the new weights, and a save then would pair one step's weights with the next
step's optimizer state; raised anywhere else it ends the command without a save, losing
every step since the last one (up to --save-every). So while the loop runs, the first
SIGINT only asks it to stop, and the loop looks between steps, as it looks at the deadline;
a second SIGINT interrupts at once, as usual.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator


class StopRequest:
    """Set by the first SIGINT; read by the loop between steps."""

    def __init__(self) -> None:
        self.requested = False


@contextmanager
def stop_on_interrupt(say: Callable[[str], None]) -> Iterator[StopRequest]:
    request = StopRequest()
    previous = signal.getsignal(signal.SIGINT)
    # Only the main thread may set a handler; a SIGINT that is ignored (a job started in
    # the background by a script) stays ignored.
    if threading.current_thread() is not threading.main_thread() or previous is signal.SIG_IGN:
        yield request
        return

    def ask_to_stop(signum, frame) -> None:
        if request.requested:
            raise KeyboardInterrupt
        request.requested = True
        say("train: interrupted: saving after the step in hand (ctrl-c again to stop at once, unsaved)")

    signal.signal(signal.SIGINT, ask_to_stop)
    try:
        yield request
    finally:
        signal.signal(signal.SIGINT, previous)
