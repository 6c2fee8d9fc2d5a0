"""Replay: the same screen over a recording, with no model and no MLX.

The position is (round, stage) over every round of every session in the recording. A round
part-way through is rebuilt from its complete record (rounds.record_at_stage), so stepping a
replay stage by stage shows what the live app showed. `c` plays forward and stops at the
armed breakpoints, as a live run does.

A trace is not held in memory: a round's record is read from the file when it is shown
(recorded_rounds.py), and the history's summary columns (the history panel, aggregates,
search, the compare tab) are filled by one pass over every round on a thread of its own,
after the first frame: the screen says how far it has read, and the panels fill in as it
goes. A round whose line turns out damaged is skipped, as stepping reaches it or the pass
does, and counted.
"""

from __future__ import annotations

import os
import threading
import time
from itertools import islice
from pathlib import Path
from typing import Iterable, Iterator, Optional

from textual import events, work
from textual.binding import Binding
from textual.message import Message
from textual.worker import get_current_worker

from ..breakpoints import Breakpoints, hits
from ..engine.errors import InputError
from ..engine.records import RoundRecord
from ..panels.format import short_path
from .debugger import SEARCH_NEXT, STEP, DebuggerApp
from .recorded_rounds import Rounds, RoundsInTrace, read_all
from .replay import Loaded, Recording
from .rounds import record_at_stage, text_before

PLAY_INTERVAL = 0.08  # seconds per stage while playing
PAUSE_KEYS = frozenset({"c", "space", "s", "n", "escape"})
READ_FIRST_BYTES = 2 * 2**20  # a trace up to this size is read through before the first frame
READ_BATCH = 32  # rounds the reading pass hands over at once, at most (full records: memory)
READ_EVERY = 0.25  # seconds: the reading pass hands over at least this often (the progress)
READ_DRAW_EVERY = 0.5  # seconds: while it reads, the screen is drawn again at most this often


class RoundsRead(Message):
    """Full records the reading pass read, for the histories (None: a damaged line)."""

    def __init__(self, rounds: list[tuple[int, int, Optional[RoundRecord]]], done: int,
                 failure: str = "") -> None:
        super().__init__()
        self.rounds, self.done, self.failure = rounds, done, failure


class ReplayApp(DebuggerApp):
    BINDINGS = [
        Binding("s", "stage(1)", "stage", group=STEP, tooltip="one stage forward"),
        Binding("backspace", "stage(-1)", "◀ stage", show=False, group=STEP, tooltip="one stage back"),
        SEARCH_NEXT,  # n is the next hit while searching, else the end of the round
        Binding("n,space", "finish_round", "to commit", show=False, group=STEP,
                tooltip="to the end of this round, else the next round"),
        Binding("c", "play", "play", group=STEP,
                tooltip="play forward, stopping at the armed breakpoints (c again pauses)"),
        # The live app's session keys: said to be live-only rather than doing nothing.
        Binding("p,r,plus,equals_sign,minus,X", "live_only", show=False),
    ]

    def __init__(self, recording: Loaded, *, export_dir: Path = Path("dflash-snapshots"),
                 show_timings: bool = True, armed: Breakpoints = Breakpoints()) -> None:
        super().__init__(export_dir=export_dir, show_timings=show_timings, armed=armed)
        self.recording = recording
        self.mode = "replay"
        # every round of every session, in order: (session index, round index)
        self.positions = [(s, r) for s, session in enumerate(recording.sessions)
                          for r in range(len(session.rounds))]
        self._starts = [0]  # each session's first position
        for session in recording.sessions:
            self._starts.append(self._starts[-1] + len(session.rounds))
        # per session: its history and its reference's (--compare), filled by the reading pass
        self._histories: dict = {}
        self._total = len(self.positions)
        self._read = 0  # rounds the reading pass has handed over
        self._told_skipped = 0  # unreadable lines said so far
        self._drawn_reading = 0.0  # when the reading pass's progress was last drawn
        self._turns = threading.Semaphore(2)  # batches of the reading pass not yet taken in
        if self._quick_to_read():
            self._take_in(self._every_round(), self._total)
        # the first round that reads (open_recording made sure there is one), complete
        self.index = next(i for i in range(self._total) if self._full(i) is not None)
        self.stage = len(self._full().stages) - 1
        self.playing = False
        self._play_timer = None

    def screen_ready(self) -> None:
        super().screen_ready()
        self.show_position()
        self._tell_skipped()
        if self._read < self._total:
            self._read_rounds()

    def _tell_skipped(self) -> None:
        skipped = self.recording.unreadable()
        if skipped > self._told_skipped:
            self._told_skipped = skipped
            self.notify(f"skipped {skipped} unreadable line(s) of the trace", severity="warning")

    # ---- reading every round (the history's columns) ------------------------------------------

    def _quick_to_read(self) -> bool:
        """Read through before the first frame: held in memory already, or a trace quick to
        parse."""
        traces = {s.rounds.path for s in self.recording.sessions if isinstance(s.rounds, RoundsInTrace)}
        try:
            return sum(os.path.getsize(path) for path in traces) <= READ_FIRST_BYTES
        except OSError:
            return False

    def _every_round(self) -> Iterator[tuple[int, int, Optional[RoundRecord]]]:
        for s, session in enumerate(self.recording.sessions):
            for r, record in read_all(session.rounds):
                yield s, r, record

    @work(thread=True, exclusive=True, group="read", exit_on_error=False)
    def _read_rounds(self) -> None:
        # Parsing is the cost (milliseconds a round on the sample); the histories are added
        # to on the UI thread (they are not shared across threads), a batch at a time, two
        # at most handed over and not yet taken in (each holds full records).
        worker = get_current_worker()
        batch, done, since = [], 0, time.monotonic()
        try:
            for read in self._every_round():
                if worker.is_cancelled:
                    return
                batch.append(read)
                done += 1
                if len(batch) >= READ_BATCH or time.monotonic() - since >= READ_EVERY:
                    if not self._hand_over(worker, batch, done):
                        return
                    batch, since = [], time.monotonic()
        except InputError as error:  # the trace went away, or became unreadable
            self._hand_over(worker, batch, self._total, failure=str(error))
            return
        self._hand_over(worker, batch, done)

    def _hand_over(self, worker, batch: list, done: int, failure: str = "") -> bool:
        while not self._turns.acquire(timeout=0.1):
            if worker.is_cancelled:
                return False
        self.post_message(RoundsRead(batch, done, failure))
        return True

    def on_rounds_read(self, message: RoundsRead) -> None:
        self._turns.release()
        self._take_in(message.rounds, message.done)
        if message.failure:
            self.notify(f"{message.failure}: the history holds the rounds read before",
                        severity="error", timeout=8)
        elif self._read >= self._total:
            self._tell_skipped()
        self.history, self.reference_history = self._session_history(self.positions[self.index][0])
        # the panels count the rows again each time they are drawn: a few times a second
        # leaves the UI thread's time to the keys (and the reading thread the GIL)
        now = time.monotonic()
        if self._read >= self._total or now - self._drawn_reading >= READ_DRAW_EVERY:
            self._drawn_reading = now
            self.update_status_right()
            self.request_render()

    def _take_in(self, rounds: Iterable[tuple[int, int, Optional[RoundRecord]]], done: int) -> None:
        for s, r, record in rounds:
            if record is None:
                self.recording.sessions[s].rounds.damaged.add(r)
            else:
                self._add_to_history(s, record)
        self._read = done

    def _add_to_history(self, s: int, record: RoundRecord) -> None:
        from ..history import History, reference_side

        history, reference = self._session_history(s)
        history.add(record)
        if record.compare is not None:
            if reference is None:
                reference = History(keep=1, side=reference_side)
                self._histories[s] = (history, reference)
            reference.add(record)

    def reading(self) -> Optional[tuple[int, int]]:
        return (self._read, self._total) if self._read < self._total else None

    def status_right(self) -> list[tuple[str, str]]:
        parts = super().status_right()
        if self.reading() is not None:
            parts.insert(0, (f"reading trace: {self._read:,} of {self._total:,} rounds",
                             f"read {self._read * 100 // max(self._total, 1)}%"))
        return parts

    # ---- position ------------------------------------------------------------------------

    def _session(self) -> Recording:
        return self.recording.sessions[self.positions[self.index][0]]

    def _rounds(self, index: Optional[int] = None) -> Rounds:
        return self.recording.sessions[self.positions[self.index if index is None else index][0]].rounds

    def _full(self, index: Optional[int] = None) -> Optional[RoundRecord]:
        """The complete record at a position; None where its line is damaged."""
        s, r = self.positions[self.index if index is None else index]
        return self.recording.sessions[s].rounds.get(r)

    def _text_before(self, full: RoundRecord) -> str:
        s, r = self.positions[self.index]
        session = self.recording.sessions[s]
        if r > 0 and session.rounds.numbers[r - 1] == full.round - 1:
            previous = session.rounds.get(r - 1)
            if previous is not None:
                return previous.committed_text
        elif full.round == 0 and session.prefill is not None:
            return session.prefill.first_text
        return text_before(full, None)  # the round before it is missing: from its own record

    def show_position(self) -> None:
        session = self._session()
        s, r = self.positions[self.index]
        full = self._full()
        before = self._text_before(full)
        record = record_at_stage(full, self.stage, before)
        self.info, self.prefill = session.info, session.prefill
        self.record = record
        self.text_before = before
        self.history, self.reference_history = self._session_history(s)
        self.gamma_next = None
        # the rounds the recording holds (a snapshot alone holds its round only), as g asks
        first, last = self.round_bounds()
        self.round_label = f"{record.round}/{last}"
        sessions = len(self.recording.sessions)
        where = f"session {s + 1}/{sessions} · " if sessions > 1 else ""
        if not self.playing:
            self.set_status("paused", f"replay {short_path(str(self.recording.path))} · {where}"
                            f"round {record.round} of {first}–{last} · {record.stage} "
                            f"({self.stage + 1}/{len(full.stages)} stages)")
        self.render_now()

    def _session_history(self, s: int):
        """The session's history, and its reference's (--compare; else None), as far as the
        reading pass has filled them."""
        if s not in self._histories:
            from ..history import History  # numpy: after the first frame

            # replay reads full records from its rounds, not from the history's window
            self._histories[s] = (History(keep=1), None)
        return self._histories[s]

    def upto(self) -> int:
        """History rows up to the round on screen: those before it, and its own once complete
        (as far as the reading pass has come)."""
        if self.history is None or self.record is None:
            return 0
        import numpy as np

        rounds = self.history.round.values
        row = int(np.searchsorted(rounds, self.record.round))
        held = row < len(rounds) and rounds[row] == self.record.round
        return row + (1 if held and self.record.complete else 0)

    def compared(self) -> bool:
        # a recording made before sessions named their --compare: its rounds say it (all of
        # a session's or none)
        return super().compared() or self._full().compare is not None

    def round_bounds(self) -> Optional[tuple[int, int]]:
        return self._rounds().bounds()

    def go_to_round(self, number: Optional[int]) -> bool:
        """A round of the session on screen (None: the last round of the recording)."""
        if number is None:
            return self._move(len(self.positions) - 1, 10**6, -1)
        s = self.positions[self.index][0]
        r = self._rounds().position(number)
        if r is not None and self._rounds().get(r) is not None:
            return self._move(self._starts[s] + r, 10**6)
        # inside the bounds but not recorded (a folder of snapshots of some rounds only), or
        # its line is damaged
        numbers = self._rounds().readable_numbers()
        held = ", ".join(str(n) for n in islice(numbers, 12))
        more = ", …" if next(numbers, None) is not None else ""
        self.notify(f"round {number} is not in this recording (it holds rounds {held}{more})",
                    severity="warning")
        return False

    def _move(self, index: int, stage: int, step: int = 1) -> bool:
        """To the round at `index`, or past it by `step` where its line is damaged."""
        while 0 <= index < len(self.positions) and self._full(index) is None:
            index += step
        if not 0 <= index < len(self.positions):
            return False
        self.index = index
        self.stage = max(0, min(stage, len(self._full().stages) - 1))
        self.show_position()
        return True

    def _edge(self, text: str) -> None:
        self.set_status("paused", text)
        self.bell()

    def action_round(self, step: int) -> None:
        if not self._move(self.index + step, 10**6, step):
            self._edge("start of the recording" if step < 0 else "end of the recording")

    def action_stage(self, step: int) -> bool:
        last = len(self._full().stages) - 1
        stage = self.stage + step
        if 0 <= stage <= last:
            return self._move(self.index, stage)
        moved = self._move(self.index + step, 0 if step > 0 else 10**6, step)
        if not moved:
            self._edge("start of the recording" if step < 0 else "end of the recording")
        return moved

    def action_finish_round(self) -> None:
        if self.stage < len(self._full().stages) - 1:
            self._move(self.index, 10**6)
        else:
            self.action_round(1)

    def action_live_only(self) -> None:
        self.set_status("paused", "a recording: p r + - X need the model (dflash-tui MODEL_DIR)")
        self.bell()

    def action_goto_first(self) -> None:
        self._move(0, 10**6)

    # ---- playing -------------------------------------------------------------------------

    def action_play(self) -> None:
        if self.playing:
            self.stop_playing("paused")
            return
        self.playing = True
        self.set_status("running", "playing…")
        self._play_timer = self.set_interval(PLAY_INTERVAL, self._play_step)

    def stop_playing(self, reason: str, kind: str = "paused") -> None:
        self.playing = False
        if self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        self.show_position()
        if reason != "paused":
            self.set_status(kind, reason)

    def _play_step(self) -> None:
        if not self.action_stage(1):
            self.stop_playing("end of the recording", "finished")
            return
        found = hits(self.record, self.armed)
        if found:
            self.stop_playing(f"round {self.record.round} {self.record.stage}: "
                              + "; ".join(found), "breakpoint")
            self.breakpoint_stopped(self.record)

    async def on_event(self, event: events.Event) -> None:
        if (isinstance(event, events.Key) and not event.is_forwarded and self.playing
                and self.screen is self.main and not self.main.asking
                and event.key in PAUSE_KEYS and not (self.searching and event.key in ("n", "escape"))):
            self.stop_playing("paused")
            event.prevent_default()
            event.stop()
            return
        await super().on_event(event)

    def is_running(self) -> bool:
        return self.playing

    def palette_commands(self):
        return [
            ("Next round", "→", lambda: self.action_round(1)),
            ("Previous round", "←", lambda: self.action_round(-1)),
            ("Next stage", "s", lambda: self.action_stage(1)),
            ("Previous stage", "backspace", lambda: self.action_stage(-1)),
            ("First round", "home", self.action_goto_first),
            ("Last round", "end", self.action_goto_last),
            ("Play / pause", "c", self.action_play),
            *super().palette_commands(),
        ]
