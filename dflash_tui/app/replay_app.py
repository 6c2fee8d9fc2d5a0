"""Replay: the same screen over a recording, with no model and no MLX.

The position is (round, stage) over every round of every session in the recording. A round
part-way through is rebuilt from its complete record (rounds.record_at_stage), so stepping a
replay stage by stage shows what the live app showed. `c` plays forward and stops at the
armed breakpoints, as a live run does; `+` / `-` set how fast (PLAY_SPEEDS: a stage at a
time up to a hundred rounds a tick).

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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class PlaySpeed:
    """How far one tick of the play timer goes: `count` stages or whole rounds."""

    unit: str  # "stage" or "round"
    count: int
    interval: float  # seconds between ticks

    def __str__(self) -> str:
        return f"{self.count / self.interval:g} {self.unit}s/s"


# `+` / `-` walk these. Stage by stage is for watching a round unfold; a recording of
# thousands of rounds wants whole rounds, many a tick (one frame drawn per tick, every stage
# passed still checked against the breakpoints).
PLAY_SPEEDS = (
    PlaySpeed("stage", 1, 0.25),
    PlaySpeed("stage", 1, 0.1),
    PlaySpeed("round", 1, 0.1),
    PlaySpeed("round", 10, 0.1),
    PlaySpeed("round", 100, 0.1),
)
DEFAULT_SPEED = 1
MAX_CATCH_UP = 10  # ticks' worth of rounds one late tick may play (a stall is not made up)


class ReplayApp(DebuggerApp):
    BACKGROUND_MESSAGES = DebuggerApp.BACKGROUND_MESSAGES + (RoundsRead,)  # the reading pass
    BINDINGS = [
        Binding("s", "stage(1)", "stage", group=STEP, tooltip="one stage forward"),
        Binding("backspace", "stage(-1)", "◀ stage", show=False, group=STEP, tooltip="one stage back"),
        SEARCH_NEXT,  # n is the next hit while searching, else the end of the round
        Binding("n,space", "finish_round", "to commit", show=False, group=STEP,
                tooltip="to the end of this round, else the next round"),
        Binding("c", "play", "play", group=STEP,
                tooltip="play forward, stopping at the armed breakpoints (c again pauses)"),
        Binding("plus,equals_sign", "speed(1)", "faster", group=STEP,
                tooltip="play faster: " + " → ".join(map(str, PLAY_SPEEDS))
                + " (whole rounds a frame, every stage still checked against the breakpoints); "
                "while playing or before c"),
        Binding("minus", "speed(-1)", "slower", group=STEP, tooltip="play slower"),
        # The live app's session keys: said to be live-only rather than doing nothing.
        Binding("p,r,X", "live_only", show=False),
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
        self.speed = DEFAULT_SPEED  # index into PLAY_SPEEDS
        self._last_tick = 0.0  # when the play timer last ticked (or started)

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
        except Exception as error:  # a bug: said in one line, not `reading …` for good
            self._hand_over(worker, batch, self._total, failure=(
                f"{self.recording.path}: reading the trace stopped ({type(error).__name__}: "
                f"{error})"))
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
        self.set_status("paused", "a recording: p r X need the model (dflash-tui MODEL_DIR)")
        self.bell()

    def action_goto_first(self) -> None:
        self._move(0, 10**6)

    # ---- playing -------------------------------------------------------------------------

    def action_play(self) -> None:
        if self.playing:
            self.stop_playing("paused")
            return
        self.playing = True
        self._start_timer()
        self.set_status("running", self._playing_text())

    def _start_timer(self) -> None:
        if self._play_timer is not None:
            self._play_timer.stop()
        self._play_timer = self.set_interval(PLAY_SPEEDS[self.speed].interval, self._play_step)
        self._last_tick = self._measured_since = time.monotonic()
        self._measured_rounds = 0

    def _playing_text(self, played: str = "") -> str:
        return f"playing at {self._speed_text()}{played} · + faster  - slower"

    def _say_played(self, rounds: int) -> None:
        """Where the rounds cannot be read as fast as the speed asks (a real model's trace:
        milliseconds to parse a round), the status line says how fast they do play, once a
        second."""
        self._measured_rounds += rounds
        seconds = time.monotonic() - self._measured_since
        if seconds < 1.0:
            return
        speed = PLAY_SPEEDS[self.speed]
        rate = self._measured_rounds / seconds
        if speed.unit == "round" and rate < 0.8 * speed.count / speed.interval:
            self.set_status("running", self._playing_text(f" (plays {rate:.0f} rounds/s)"))
        self._measured_since, self._measured_rounds = time.monotonic(), 0

    def _speed_text(self) -> str:
        edge = {0: " (slowest)", len(PLAY_SPEEDS) - 1: " (fastest)"}.get(self.speed, "")
        return f"{PLAY_SPEEDS[self.speed]}{edge}"

    def action_speed(self, step: int) -> None:
        """Faster / slower, while playing (from the next tick) or before `c`."""
        if not 0 <= self.speed + step < len(PLAY_SPEEDS):
            self.bell()
        else:
            self.speed += step
        if self.playing:
            self._start_timer()
            self.set_status("running", self._playing_text(), transient=True)
        else:
            self.set_status("paused", f"play speed {self._speed_text()}: c plays", transient=True)

    def stop_playing(self, reason: str, kind: str = "paused") -> None:
        self.playing = False
        if self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        self.show_position()
        if reason != "paused":
            self.set_status(kind, reason)

    def _play_step(self) -> None:
        speed = PLAY_SPEEDS[self.speed]
        now = time.monotonic()
        due = speed.count
        if speed.unit == "round":
            # A frame can take longer than the interval (a slow machine, a big screen): the
            # rounds of the time it took are played in this tick, so the speed shown is the
            # speed played (stage by stage, each stage is shown, late or not).
            late = (now - self._last_tick) / speed.interval
            due = min(max(due, round(speed.count * late)), MAX_CATCH_UP * speed.count)
        self._last_tick = now
        for played in range(due):
            if not self._play_on(whole_round=speed.unit == "round"):
                return  # stopped: at the end, or at a breakpoint
            # Each round is read from the trace and parsed (milliseconds on a real model's
            # trace): a tick does at most an interval's work, so the keys (c pauses) are
            # never kept waiting, and the fastest speeds play as fast as the file reads.
            if time.monotonic() - now >= speed.interval:
                break
        self._say_played(played + 1)
        self.show_position()  # one frame a tick, however far it went

    def _play_on(self, whole_round: bool) -> bool:
        """One stage forward (whole_round: on to the end of this round, or of the next one
        when this one is complete), each stage passed checked against the armed breakpoints,
        the screen left as it is; False where the play stopped (drawn there)."""
        while True:
            if self.stage < len(self._full().stages) - 1:
                self.stage += 1
            else:
                following = next((i for i in range(self.index + 1, len(self.positions))
                                  if self._full(i) is not None), None)  # damaged lines passed
                if following is None:
                    self.stop_playing("end of the recording", "finished")
                    return False
                self.index, self.stage = following, 0
            full = self._full()
            record = record_at_stage(full, self.stage, self._text_before(full))
            found = hits(record, self.armed)
            if found:
                self.stop_playing(f"round {record.round} {record.stage}: " + "; ".join(found),
                                  "breakpoint")
                self.breakpoint_stopped(self.record)
                return False
            if not whole_round or self.stage == len(full.stages) - 1:
                return True

    async def take_typed(self, event: events.Event) -> None:
        if (isinstance(event, events.Key) and self.playing
                and self.screen is self.main and not self.main.asking
                and event.key in PAUSE_KEYS and not (self.searching and event.key in ("n", "escape"))):
            self.stop_playing("paused")
            return
        await super().take_typed(event)

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
            ("Play faster", "+", lambda: self.action_speed(1)),
            ("Play slower", "-", lambda: self.action_speed(-1)),
            *super().palette_commands(),
        ]
