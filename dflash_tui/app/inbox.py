"""Engine events on their way to the app: batched, with backpressure.

The engine thread appends events here; the app takes them all at once when woken. At most
one wake-up message is ever queued, so a fast engine cannot bury the user's keys under its
events, and an engine run can wait (between stages) until the app has caught up.
"""

from __future__ import annotations

import threading
from collections import deque

from textual.message import Message

BACKPRESSURE_TIMEOUT = 0.5  # seconds an engine run waits at most for the app to keep up


class EngineWake(Message):
    """The engine thread has put events in the app's inbox."""


class Inbox:
    """Engine events on their way to the app, with at most one wake-up message queued.

    A tiny model runs hundreds of stages a second; posting one message per event would
    queue them ahead of the user's keys and the app would fall ever further behind. Instead
    the engine appends here and posts a wake-up only when none is pending; the app takes
    everything that arrived in one go and draws once.
    """

    def __init__(self, post) -> None:
        self._post = post
        self._events: deque = deque()
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._wake_pending = False

    def put(self, event: object) -> None:
        with self._lock:
            self._events.append(event)
            if self._wake_pending:
                return
            self._wake_pending = True
        self._post(EngineWake())

    def take(self) -> list:
        with self._lock:
            self._wake_pending = False
            events = list(self._events)
            self._events.clear()
            self._drained.notify_all()
        return events

    def wait_drained(self, timeout: float = BACKPRESSURE_TIMEOUT) -> None:
        """Block (the engine thread, between stages of a run) while the app has not taken
        the last events: a busy UI thread then gets the interpreter to itself instead of
        sharing it with an engine racing ahead. An idle app takes events at once."""
        with self._lock:
            self._drained.wait_for(lambda: not self._wake_pending, timeout)
