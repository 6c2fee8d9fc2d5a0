"""Replay: the same screen over a recording, with no model and no MLX.

The position is (round, stage) over every round of every session in the recording. A round
part-way through is rebuilt from its complete record (rounds.record_at_stage), so stepping a
replay stage by stage shows what the live app showed. `c` plays forward and stops at the
armed breakpoints, as a live run does; `+` / `-` set how fast (PLAY_SPEEDS: a stage at a
time up to a hundred rounds a tick).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from textual import events
from textual.binding import Binding

from ..breakpoints import Breakpoints, hits
from ..engine.records import RoundRecord
from ..panels.format import short_path
from .debugger import SEARCH_NEXT, STEP, DebuggerApp
from .replay import Loaded, Recording
from .rounds import record_at_stage, text_before

PAUSE_KEYS = frozenset({"c", "space", "s", "n", "escape"})


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
        self._histories: dict = {}  # per session, built when first shown
        self._upto = 0  # history rows up to the round on screen
        self.index = 0
        self.stage = len(self._full().stages) - 1  # start on round 0, complete
        self.playing = False
        self._play_timer = None
        self.speed = DEFAULT_SPEED  # index into PLAY_SPEEDS
        self._last_tick = 0.0  # when the play timer last ticked (or started)

    def screen_ready(self) -> None:
        super().screen_ready()
        self.show_position()
        if self.recording.skipped:
            self.notify(f"skipped {self.recording.skipped} unreadable line(s) of the trace",
                        severity="warning")

    # ---- position ------------------------------------------------------------------------

    def _session(self) -> Recording:
        return self.recording.sessions[self.positions[self.index][0]]

    def _full(self, index: Optional[int] = None) -> RoundRecord:
        s, r = self.positions[self.index if index is None else index]
        return self.recording.sessions[s].rounds[r]

    def _text_before(self) -> str:
        s, r = self.positions[self.index]
        session = self.recording.sessions[s]
        if r > 0:
            return session.rounds[r - 1].committed_text
        if session.prefill is not None:
            return session.prefill.first_text
        return text_before(session.rounds[r], None)

    def show_position(self) -> None:
        session = self._session()
        s, r = self.positions[self.index]
        full = self._full()
        before = self._text_before()
        record = record_at_stage(full, self.stage, before)
        self.info, self.prefill = session.info, session.prefill
        self.record = record
        self.text_before = before
        self.history, self.reference_history = self._session_history(s)
        self._upto = r + (1 if record.complete else 0)
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
        """The session's history, and its reference's (--compare; else None)."""
        from ..history import History, reference_side  # numpy: after the first frame

        if s not in self._histories:
            rounds = self.recording.sessions[s].rounds
            history = History(keep=len(rounds))  # replay holds them all already
            compared = [r for r in rounds if r.compare is not None]
            reference = History(keep=1, side=reference_side) if compared else None
            for record in rounds:
                history.add(record)
            for record in compared:
                reference.add(record)
            self._histories[s] = (history, reference)
        return self._histories[s]

    def upto(self) -> int:
        return self._upto

    def compared(self) -> bool:
        # a recording made before sessions named their --compare: its rounds say it
        return super().compared() or self._session().rounds[0].compare is not None

    def round_bounds(self) -> Optional[tuple[int, int]]:
        rounds = self._session().rounds
        return (rounds[0].round, rounds[-1].round)

    def go_to_round(self, number: Optional[int]) -> bool:
        """A round of the session on screen (None: the last round of the recording)."""
        if number is None:
            return self._move(len(self.positions) - 1, 10**6)
        s = self.positions[self.index][0]
        for index, (session, r) in enumerate(self.positions):
            if session == s and self.recording.sessions[s].rounds[r].round == number:
                return self._move(index, 10**6)
        # inside the bounds but not recorded: a folder of snapshots of some rounds only
        held = ", ".join(str(r.round) for r in self._session().rounds[:12])
        more = ", …" if len(self._session().rounds) > 12 else ""
        self.notify(f"round {number} is not in this recording (it holds rounds {held}{more})",
                    severity="warning")
        return False

    def _move(self, index: int, stage: int) -> bool:
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
        if not self._move(self.index + step, 10**6):
            self._edge("start of the recording" if step < 0 else "end of the recording")

    def action_stage(self, step: int) -> bool:
        last = len(self._full().stages) - 1
        stage = self.stage + step
        if 0 <= stage <= last:
            return self._move(self.index, stage)
        moved = self._move(self.index + step, 0 if step > 0 else 10**6)
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
        self._last_tick = time.monotonic()

    def _playing_text(self) -> str:
        return f"playing at {self._speed_text()} · + faster  - slower"

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
        for _ in range(due):
            if not self._play_on(whole_round=speed.unit == "round"):
                return  # stopped: at the end, or at a breakpoint
        self.show_position()  # one frame a tick, however far it went

    def _play_on(self, whole_round: bool) -> bool:
        """One stage forward (whole_round: on to the end of this round, or of the next one
        when this one is complete), each stage passed checked against the armed breakpoints,
        the screen left as it is; False where the play stopped (drawn there)."""
        while True:
            if self.stage < len(self._full().stages) - 1:
                self.stage += 1
            elif self.index + 1 < len(self.positions):
                self.index, self.stage = self.index + 1, 0
            else:
                self.stop_playing("end of the recording", "finished")
                return False
            full = self._full()
            record = record_at_stage(full, self.stage, self._text_before())
            found = hits(record, self.armed)
            if found:
                self.stop_playing(f"round {record.round} {record.stage}: " + "; ".join(found),
                                  "breakpoint")
                self.breakpoint_stopped(self.record)
                return False
            if not whole_round or self.stage == len(full.stages) - 1:
                return True

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
            ("Play faster", "+", lambda: self.action_speed(1)),
            ("Play slower", "-", lambda: self.action_speed(-1)),
            *super().palette_commands(),
        ]
