"""Replay's reading pass: every round of a recording read once, for the histories' summary
columns (the history panel, aggregates, search, the compare tab).

A trace is not held in memory (recorded_rounds.py), so these columns need one pass over
every round. A small trace is read through before the first frame; a longer one on a thread
of its own after it, the screen saying how far it has read. Parsing is the cost
(milliseconds a round on the sample); the histories are added to on the UI thread alone
(they are not shared across threads), a batch at a time, two batches at most handed over
and not yet taken in (each holds full records). A round whose line turns out damaged is
remembered as such (its session's `rounds.damaged`) and counted.

Keys come first. The pass shares the interpreter with the UI thread, and a key took twice
as long to act while it parsed (0.09 s against 0.045 s, tab 4 at 80 x 24:
benchmarks/bench_replay_keys.py), so it stands still for a moment after each key
(`give_way`). The progress the screen shows (`shown`) moves on a few
times a second, not at every batch: the panels that count the whole history again (the
aggregates) do so when it moves, not at each key's frame.

No MLX; Textual only for the message that carries a batch and the worker thread.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable, Iterable, Iterator, Optional

from textual.app import App
from textual.message import Message
from textual.worker import Worker, get_current_worker

from ..engine.errors import InputError
from ..engine.records import RoundRecord
from .recorded_rounds import RoundsInFiles, RoundsInTrace, read_all
from .replay import Loaded

READ_FIRST_BYTES = 2 * 2**20  # a trace up to this size is read through before the first frame
READ_BATCH = 32  # rounds the reading pass hands over at once, at most (full records: memory)
READ_EVERY = 0.25  # seconds: the reading pass hands over at least this often (the progress)
READ_DRAW_EVERY = 0.5  # seconds: while it reads, the progress on screen moves on at most this often
BATCHES_HELD = 2  # batches handed over and not yet taken in, at most
KEY_PAUSE = 0.3  # seconds the pass stands still after each key (longer than a key's frame)

Read = tuple[int, int, Optional[RoundRecord]]  # (session, position, record; None: damaged)


class RoundsRead(Message):
    """Full records the reading pass read, for the histories (None: a damaged line)."""

    def __init__(self, rounds: list[Read], done: int, failure: str = "") -> None:
        super().__init__()
        self.rounds, self.done, self.failure = rounds, done, failure


class ReadingPass:
    """Every round of a recording read once into each session's history (and its
    reference's, --compare), and how far that has come."""

    def __init__(self, recording: Loaded) -> None:
        self.recording = recording
        self.total = sum(len(s.rounds) for s in recording.sessions)
        self.done = 0  # rounds taken in
        self._histories: dict = {}  # session -> (history, reference's history or None)
        self.shown = self.progress()  # the progress on screen
        self._turns = threading.Semaphore(BATCHES_HELD)
        self._shown_at = 0.0  # when `shown` last moved on
        self._key_at = float("-inf")  # when the last key came

    def quick(self) -> bool:
        """Worth reading through before the first frame: held in memory already, or a
        trace quick to parse."""
        traces = {s.rounds.path for s in self.recording.sessions if isinstance(s.rounds, RoundsInTrace)}
        # a directory of snapshots (probe --out) is read as a trace is, file by file
        traces.update(file for s in self.recording.sessions if isinstance(s.rounds, RoundsInFiles)
                      for files in s.rounds.files for file in files)
        try:
            return sum(os.path.getsize(path) for path in traces) <= READ_FIRST_BYTES
        except OSError:
            return False

    def read_through(self) -> None:
        """Every round now, on this thread."""
        self._take_in(self._every_round(), self.total)
        self.shown = self.progress()

    def progress(self) -> Optional[tuple[int, int]]:
        """(rounds read, rounds in all) while it reads; None once it has read every one."""
        return (self.done, self.total) if self.done < self.total else None

    def histories(self, s: int):
        """Session s's history, and its reference's (--compare; else None), as far as the
        pass has filled them."""
        if s not in self._histories:
            from ..history import History  # numpy: after the first frame

            # replay reads full records from its rounds, not from the history's window
            self._histories[s] = (History(keep=1), None)
        return self._histories[s]

    # ---- the thread --------------------------------------------------------------------

    def start(self, app: App) -> Worker:
        """Read on a worker thread, handing batches to `app` as RoundsRead messages."""
        return app.run_worker(lambda: self._read(app.post_message), thread=True,
                              exclusive=True, group="read", exit_on_error=False)

    def _every_round(self) -> Iterator[Read]:
        for s, session in enumerate(self.recording.sessions):
            for r, record in read_all(session.rounds):
                yield s, r, record

    def give_way(self) -> None:
        """A key came (UI thread): the thread stands still for KEY_PAUSE."""
        self._key_at = time.monotonic()

    def _read(self, post: Callable[[Message], object]) -> None:
        worker = get_current_worker()
        batch, done, since = [], 0, time.monotonic()
        try:
            for read in self._every_round():
                self._stand_after_keys(worker)
                if worker.is_cancelled:
                    return
                batch.append(read)
                done += 1
                if len(batch) >= READ_BATCH or time.monotonic() - since >= READ_EVERY:
                    if not self._hand_over(worker, post, RoundsRead(batch, done)):
                        return
                    batch, since = [], time.monotonic()
        except InputError as error:  # the trace went away, or became unreadable
            self._hand_over(worker, post, RoundsRead(batch, self.total, failure=str(error)))
            return
        except Exception as error:  # a bug: said in one line, not `reading …` for good
            self._hand_over(worker, post, RoundsRead(batch, self.total, failure=(
                f"{self.recording.path}: reading the trace stopped ({type(error).__name__}: "
                f"{error})")))
            return
        self._hand_over(worker, post, RoundsRead(batch, done))

    def _stand_after_keys(self, worker: Worker) -> None:
        while time.monotonic() - self._key_at < KEY_PAUSE and not worker.is_cancelled:
            time.sleep(KEY_PAUSE / 10)

    def _hand_over(self, worker: Worker, post, message: RoundsRead) -> bool:
        while not self._turns.acquire(timeout=0.1):
            if worker.is_cancelled:
                return False
        post(message)
        return True

    # ---- the UI thread -----------------------------------------------------------------

    def take(self, message: RoundsRead) -> bool:
        """A batch the thread handed over, into the histories. True where the progress on
        screen moves on (`shown`), to be drawn: the pass has ended, or it last moved a while
        ago (the aggregates count every row again each time: a few times a second leaves the
        UI thread's time to the keys, and the reading thread the GIL)."""
        self._turns.release()
        self._take_in(message.rounds, message.done)
        now = time.monotonic()
        if self.done < self.total and now - self._shown_at < READ_DRAW_EVERY:
            return False
        self._shown_at, self.shown = now, self.progress()
        return True

    def _take_in(self, rounds: Iterable[Read], done: int) -> None:
        for s, r, record in rounds:
            if record is None:
                self.recording.sessions[s].rounds.damaged.add(r)
            else:
                self._add(s, record)
        self.done = done

    def _add(self, s: int, record: RoundRecord) -> None:
        from ..history import History, reference_side

        if not record.complete:
            # a snapshot exported mid-round: not judged yet, so no round of the aggregates
            # (the live app's history holds completed rounds alone); replay still shows it
            return
        history, reference = self.histories(s)
        history.add(record)
        if record.compare is not None:
            if reference is None:
                reference = History(keep=1, side=reference_side)
                self._histories[s] = (history, reference)
            reference.add(record)
