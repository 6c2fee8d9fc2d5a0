"""Keys in the order they were typed, whatever the timing.

A terminal hands over what was typed fast, held down (auto-repeat) or pasted in one read,
and Textual queues those keys on the app at once. The app then routes each key as it comes
to it: a priority binding runs there and then, any other key is passed on to the focused
widget's own queue, and a question's answer arrives through more queues after that (enter
→ the field → `Input.Submitted` → the question line → the focus back on a table). So a key
was routed before the keys ahead of it had done their work: `g 30 enter →` sent the → to the
go-to field (the answer had not closed it yet), `/sk enter n n` typed the n's into the
search, `→ → backspace x` exported before the backspace stepped back.

TypedKeys holds each key from the terminal until the app is quiet, that is, no message the
keys before it caused waits in any widget's queue or in the app's own, then hands it on to
be routed as usual. One key at a time, so every key acts on the state that the keys before
it produced, in the order typed, with no waits when typing is slow. Messages that come of
time or of other threads (timers, the engine's events, replay's reading) are no key's doing
and do not hold keys up. Keys that come before the main screen is up wait for it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Awaitable, Callable, Iterable, Optional

from textual import events, messages
from textual.app import App
from textual.message import Message
from textual.message_pump import MessagePump

# Textual's own: time, and the screen being drawn again (a key acts on the state, not on
# whether the last frame is out; waiting for frames made a burst of 20 → draw up to 20),
# with what is to run after the next frame (call_after_refresh).
DRAWING = (events.Timer, messages.Prompt, messages.Update, messages.Layout, messages.UpdateScroll,
           messages.InvokeLater)
# A key waits for a quiet app while the app gets on with its messages, and goes on anyway
# once none has been handled for STUCK_AFTER seconds (a widget stuck mid-message) or after
# HOLD_AT_MOST in all. Counted from progress, not from the key's arrival: on a loaded
# machine (a CI run, a busy laptop) a screen's mount alone can take longer than 0.5 s, and a
# limit counted from arrival let keys act on a screen not yet built.
STUCK_AFTER = 1.0
HOLD_AT_MOST = 5.0
SPINS = 20  # checks on the next turn of the event loop, before checking every RETRY seconds
RETRY = 0.005


def typed(event: events.Event) -> bool:
    """A key or a paste from the terminal (not one the app passed on to a widget)."""
    return isinstance(event, (events.Key, events.Paste)) and not event.is_forwarded


def _waiting(pump: MessagePump) -> Iterable[Message]:
    """The messages a pump has yet to handle (Textual keeps one it peeked at aside)."""
    pending = pump._pending_message
    if pending is not None:
        yield pending
    yield from pump._message_queue.values


class TypedKeys:
    """Holds keys and pastes from the terminal and hands them on, one at a time, each once
    the app is quiet after the one before."""

    def __init__(self, app: App, take: Callable[[events.Event], Awaitable[None]],
                 ready: Callable[[], bool], background: tuple[type, ...] = ()) -> None:
        """take: routes a key (the app's own routing); ready: the screen keys go to is up;
        background: message types that come of time or other threads, not of keys."""
        self.app = app
        self._take = take
        self._ready = ready
        self._background = (*DRAWING, *background)
        self._held: deque[events.Event] = deque()
        # when the first held key began to wait for a quiet app (None: for the screen)
        self._since: Optional[float] = 0.0
        # what the app had yet to handle at the last check, and when that last changed
        self._waiting_seen: tuple[int, ...] = ()
        self._progress_at = 0.0
        self._scheduled = False
        self._spins = 0

    @property
    def held(self) -> int:
        return len(self._held)

    async def arrived(self, event: events.Event) -> None:
        """A key from the terminal: routed now if the app is quiet, else held."""
        if not self._held:
            self._since = time.monotonic()
        self._held.append(event)
        if not self._scheduled:
            await self.go_on()

    async def go_on(self) -> None:
        """Hand on the held keys while the app is quiet; check again soon if some wait."""
        while self._held:
            if not self._ready():
                self._since = None  # the wait for a quiet app starts with the screen
                return  # the screen's arrival calls go_on
            now = time.monotonic()
            if self._since is None:
                self._since = self._progress_at = now
            if not self.quiet() and not self._given_up(now):
                self._check_soon()
                return
            self._spins = 0
            await self._take(self._held.popleft())
            self._since = self._progress_at = time.monotonic()

    def _given_up(self, now: float) -> bool:
        """The app has handled nothing for STUCK_AFTER seconds, or the key has waited
        HOLD_AT_MOST: it goes on rather than wait for good."""
        waiting = tuple(id(m) for m in self._busy())
        if waiting != self._waiting_seen:
            self._waiting_seen, self._progress_at = waiting, now
        return now - self._progress_at >= STUCK_AFTER or now - self._since >= HOLD_AT_MOST

    def settled(self) -> bool:
        """Every key from the terminal has been routed and what it set off has run: none is
        held here, none waits in the app's queue to arrive (a burst arrives one key at a
        time, so between two of them none is held), and the app is quiet."""
        return not self._held and not any(typed(m) for m in _waiting(self.app)) and self.quiet()

    def quiet(self) -> bool:
        """No message waits anywhere but what comes of time and other threads (and the keys
        typed after, which wait their turn here)."""
        return next(self._busy(), None) is None

    def _busy(self) -> Iterable[Message]:
        """The messages that keep the app from being quiet."""
        app = self.app
        yield from (m for m in _waiting(app) if not (typed(m) or isinstance(m, self._background)))
        for screen in app.screen_stack:
            for node in screen.walk_children(with_self=True):
                if not (node._closing or node._closed):
                    yield from (m for m in _waiting(node) if not isinstance(m, self._background))

    def _check_soon(self) -> None:
        # Through the app's queue, behind what is in it now; on the next turn of the event
        # loop, so the widgets with messages get theirs first (the app never spins alone).
        if self._scheduled:
            return
        self._scheduled = True
        self._spins += 1
        delay = 0.0 if self._spins <= SPINS else RETRY
        asyncio.get_running_loop().call_later(delay, self.app.call_later, self._checked)

    async def _checked(self) -> None:
        self._scheduled = False
        await self.go_on()
