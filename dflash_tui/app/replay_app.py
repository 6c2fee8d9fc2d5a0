"""Replay: the same screen over a recording, with no model and no MLX.

The position is (round, stage) over every round of every session in the recording. A round
part-way through is rebuilt from its complete record (rounds.record_at_stage), so stepping a
replay stage by stage shows what the live app showed. `c` plays forward and stops at the
armed breakpoints, as a live run does; `+` / `-` set how fast (play_speed.py: a stage at a
time up to a hundred rounds a tick).

A trace is not held in memory: a round's record is read from the file when it is shown
(recorded_rounds.py), and the history's summary columns (the history panel, aggregates,
search, the compare tab) are filled by one pass over every round (reading_pass.py), after
the first frame where the trace is long: the screen says how far it has read, and the
panels fill in as it goes. A round whose line turns out damaged is skipped, as stepping
reaches it or the pass does, and counted.
"""

from __future__ import annotations

import time
from itertools import islice
from pathlib import Path
from typing import Iterator, Optional

from textual import events
from textual.binding import Binding

from ..breakpoints import Breakpoints, hits
from ..engine.records import RoundRecord
from ..panels.format import short_path
from ..panels.header import session_setup
from .debugger import SEARCH_NEXT, STEP, DebuggerApp
from .play_speed import PLAY_SPEEDS, PlayClock
from .reading_pass import ReadingPass, RoundsRead
from .recorded_rounds import Rounds
from .replay import Loaded, Recording
from .rounds import record_at_stage, text_before

PAUSE_KEYS = frozenset({"c", "space", "s", "n", "escape"})


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
        self.reading_pass = ReadingPass(recording)
        if self.reading_pass.quick():
            self.reading_pass.read_through()
        self._told_skipped = 0  # unreadable lines said so far
        # the first round that reads (open_recording made sure there is one), complete
        self.index = next(i for i in range(len(self.positions)) if self._full(i) is not None)
        self.stage = len(self._full().stages) - 1
        self.playing = False
        self._play_timer = None
        self.clock = PlayClock()

    @property
    def speed(self) -> int:
        """The play speed: an index into PLAY_SPEEDS."""
        return self.clock.index

    def screen_ready(self) -> None:
        super().screen_ready()
        self.show_position()
        # the unreadable lines are said once, counted whole: here where every round is read
        # already, else when the pass ends (the status line counts them meanwhile)
        if self.reading() is None:
            self._tell_skipped()
        else:
            self.reading_pass.start(self)

    def _tell_skipped(self) -> None:
        skipped = self.recording.unreadable()
        if skipped > self._told_skipped:
            self._told_skipped = skipped
            self.notify(f"skipped {skipped} unreadable line(s) of the trace", severity="warning")

    # ---- the reading pass (reading_pass.py) ----------------------------------------------

    def on_rounds_read(self, message: RoundsRead) -> None:
        shown = self.reading_pass.take(message)
        if message.failure:
            self.notify(f"{message.failure}: the history holds the rounds read before",
                        severity="error", timeout=8)
        if self.reading() is None:
            self._tell_skipped()
        self.history, self.reference_history = self._session_history(self.positions[self.index][0])
        if shown:
            self.update_status_right()
            self.request_render()

    def _session_history(self, s: int):
        """The session's history, and its reference's (--compare; else None), as far as the
        reading pass has filled them."""
        return self.reading_pass.histories(s)

    def reading(self) -> Optional[tuple[int, int]]:
        return self.reading_pass.shown

    def status_right(self) -> list[tuple[str, str]]:
        parts = super().status_right()
        reading = self.reading()
        if reading is not None:  # the lines found unreadable so far: said once read through
            done, total = reading
            skipped = self.recording.unreadable()
            parts.insert(0, (f"reading trace: {done:,} of {total:,} rounds"
                             + (f" · {skipped} unreadable skipped" if skipped else ""),
                             f"read {done * 100 // max(total, 1)}%"))
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
        if session.info is not self.info:  # `L` has each session's setup, as a live run's
            self.status_log.add("info", session_setup(session.info))
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
        # its line is damaged. The rounds held are said as spans: their first 12 numbers told
        # a 2,803-round trace missing round 999 that it held "0, 1, 2, …, 11, …"
        spans = list(islice(_spans(self._rounds().readable_numbers()), 6))
        held = ", ".join(spans[:5]) + (", …" if len(spans) > 5 else "")
        why = (f"is damaged in this recording ({self._rounds().where(r)})" if r is not None
               else "is not in this recording")
        self.notify(f"round {number} {why} (it holds rounds {held})", severity="warning")
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
        self._play_timer = self.set_interval(self.clock.speed.interval, self._play_step)
        self.clock.started()

    def _playing_text(self, played: str = "") -> str:
        return f"playing at {self.clock.text()}{played} · + faster  - slower"

    def action_speed(self, step: int) -> None:
        """Faster / slower, while playing (from the next tick) or before `c`."""
        if not self.clock.change(step):
            self.bell()
        if self.playing:
            self._start_timer()
            self.set_status("running", self._playing_text(), transient=True)
        else:
            self.set_status("paused", f"play speed {self.clock.text()}: c plays", transient=True)

    def stop_playing(self, reason: str = "paused", kind: str = "paused") -> None:
        """Stop the play; a reason other than "paused" goes on the status line."""
        self.playing = False
        if self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        self.show_position()
        if reason != "paused":
            self.set_status(kind, reason)

    def _play_step(self) -> None:
        interval, whole_round = self.clock.speed.interval, self.clock.speed.unit == "round"
        started = time.monotonic()
        for played in range(self.clock.due()):
            if not self._play_on(whole_round):
                return  # stopped: at the end, or at a breakpoint
            # Each round is read from the trace and parsed (milliseconds on a real model's
            # trace): a tick does at most an interval's work, so the keys (c pauses) are
            # never kept waiting, and the fastest speeds play as fast as the file reads.
            if time.monotonic() - started >= interval:
                break
        rate = self.clock.played(played + 1)
        if rate is not None:  # where the rounds cannot be read as fast as the speed asks
            self.set_status("running", self._playing_text(f" (plays {rate:.0f} rounds/s)"))
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
                self.stop_playing()  # says nothing: the stop's reasons follow
                self.say_stop(f"round {record.round} {record.stage}", found)
                self.breakpoint_stopped(self.record)
                return False
            if not whole_round or self.stage == len(full.stages) - 1:
                return True

    async def take_typed(self, event: events.Event) -> None:
        self.reading_pass.give_way()  # the key's frame is not kept waiting on its parsing
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


def _spans(numbers) -> Iterator[str]:
    """Round numbers as spans of consecutive ones: 0–998, 1000–2802."""
    first = last = None
    for n in numbers:
        if last is not None and n == last + 1:
            last = n
            continue
        if first is not None:
            yield str(first) if first == last else f"{first}–{last}"
        first = last = n
    if first is not None:
        yield str(first) if first == last else f"{first}–{last}"
