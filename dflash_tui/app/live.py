"""The live app: a session stepped by the engine thread, one stage, one round or a run at a
time.

The app never touches MLX. Keys become commands on the engine thread's queue and return at
once; the engine answers with records (through the Inbox below) that update the screen.

Every completed round goes into the history (history.py: bounded memory however long the
session runs); ←/→ show earlier rounds while the session goes on, End comes back to the live
round. Each session (and each restart) records to its own trace in its own directory under
the export directory unless --no-trace; older rounds are read back from it.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Optional

from textual import events
from textual.binding import Binding

from ..breakpoints import Breakpoints
from ..cli import KEEP_ROUNDS
from ..compare_notes import slow_on_cpu
from ..engine.records import RoundRecord
from ..panels.footer import KeyBar
from ..panels.frame import Frame
from ..panels.header import session_setup
from ..sample import PROMPTS_DIR
from ..trace_rounds import TraceRounds
from .debugger import SEARCH_NEXT, SESSION, STEP, DebuggerApp
from .engine_thread import (
    EngineThread, Export, Failed, GammaChanged, Idle, Launch, Loaded, Notice, Pause, Progress,
    Quit, RecordToExport, Restart, SetBreakpoints, SetGamma, SetKeepRaw, StageDone,
    StageStarted, Step,
)
from .inbox import EngineWake, Inbox
from .rounds import text_before
from .session_dir import SessionDir

# During a run these keys pause it (and do nothing else); view keys (tabs, slots, help,
# export, breakpoints, gamma) leave it running. During a single round only escape and c
# pause it: another s / n is queued behind it, as typed.
PAUSE_KEYS = {"run": frozenset({"c", "space", "s", "n", "escape"}),
              "round": frozenset({"c", "escape"})}
# what a refusal of a prompt typed or picked in the prompt dialog names it by
DIALOG_PROMPT = "the prompt dialog (p)"
# With no session (it failed to open), the keys that still do something: the key bar shows
# these alone, and the rest (stepping, γ, restart, the views of rounds) are not taken.
NO_SESSION_ACTIONS = frozenset({"quit", "help", "messages", "command_palette", "help_quit"})
SLOW_STAGE = 0.5  # seconds before the status line starts counting a stage's time
ENGINE_START_DELAY = 0.1  # seconds between the first frame and the engine's first import


class LiveApp(DebuggerApp):
    BACKGROUND_MESSAGES = DebuggerApp.BACKGROUND_MESSAGES + (EngineWake,)  # the engine's events
    BINDINGS = [
        Binding("s", "step('stage')", "stage", group=STEP,
                tooltip="one stage: context → draft → select → verify → commit"),
        SEARCH_NEXT,  # n is the next hit while searching, else the next round
        Binding("n", "step('round')", "round", group=STEP,
                tooltip="the rest of the round (stops early at a breakpoint)"),
        Binding("space", "step('round')", "round", show=False, group=STEP,
                tooltip="the rest of the round (also while searching)"),
        Binding("c", "run", "run", group=STEP,
                tooltip="run until c / space / s / n / escape, a breakpoint, EOS or --max-tokens"),
        Binding("plus,equals_sign", "gamma(1)", "γ+", group=STEP,
                tooltip="one more proposal per round (γ), from the next round on"),
        Binding("minus", "gamma(-1)", "γ-", group=STEP, tooltip="one proposal fewer per round"),
        Binding("p", "prompt", "prompt", priority=True, group=SESSION,
                tooltip="new prompt (typed, or one of sample_prompts/), fresh session"),
        Binding("r", "restart", "restart", group=SESSION, tooltip="restart the session on the same prompt"),
        Binding("X", "toggle_npz", "npz", show=False, group=SESSION,
                tooltip="NPZ export on/off (keeps raw buffers from the next stage; slower)"),
    ]

    def __init__(self, launch: Launch, *, export_dir: Path = Path("dflash-snapshots"),
                 show_timings: bool = True, armed: Breakpoints = Breakpoints(),
                 prompts_dir: Path = PROMPTS_DIR, record_trace: bool = True,
                 keep_rounds: int = KEEP_ROUNDS) -> None:
        """record_trace: each session writes its trace into its directory (an explicit
        launch.trace FILE is used instead when given). keep_rounds: full records in memory."""
        super().__init__(export_dir=export_dir, show_timings=show_timings, armed=armed)
        self.launch = launch
        self.prompts_dir = prompts_dir
        self.record_trace = record_trace
        self.keep_rounds = keep_rounds
        self.inbox = Inbox(self.post_message)
        self.engine = EngineThread(launch, self.inbox.put, armed, pace=self.inbox.wait_drained)
        self.npz = launch.keep_raw
        self.loading = True
        self.running: Optional[str] = None  # "round" | "run": the engine steps on its own
        self.pause_sent = False  # a Pause the engine has not answered yet (Idle)
        self._finished: Optional[str] = None
        self.finish_message = ""  # the engine's words for it (Session.finish_message)
        self.failure: Optional[Failed] = None  # a fatal one: no session to step
        self._slow_said = False  # compare_notes.slow_on_cpu, said once
        # The session's notes, each said once as a notification: on the status line a note is
        # cut at 80 columns and gone at the first key, and one may name the cause of what the
        # probes then show (a NaN weight, a config field a reference differs in).
        self._notes_said: set[str] = set()
        self.live: Optional[RoundRecord] = None  # the engine's latest record
        self.live_text_before = ""
        self.viewing: Optional[int] = None  # an earlier round on screen (None: the live one)
        self.trace: Optional[Path] = None  # where the session on screen records its rounds
        self._next_trace: Optional[tuple[Path, int]] = None  # (path, start) of the session asked for
        self._next_session_dir: Optional[SessionDir] = None  # a restart's, until its session opens
        self.busy: Optional[tuple[int, str, float]] = None  # (round, stage, since)
        self._progress = "starting the engine"
        self._progress_since = time.monotonic()

    # ---- lifecycle -----------------------------------------------------------------------

    def screen_ready(self) -> None:
        super().screen_ready()
        self._show_progress()
        self.engine.launch = replace(self.launch, trace=self._session_trace(self.session_dir))
        # Start the engine (and its MLX imports, which hold the interpreter for a second or
        # two) only once the first frame is drawn and the writer thread has had a moment to
        # put it on the terminal.
        self.call_after_refresh(self.set_timer, ENGINE_START_DELAY, self.engine.start)
        self.set_interval(0.25, self._tick)

    def _session_trace(self, session_dir: SessionDir):
        """Where the next session records its rounds (None: nowhere): an explicit --trace
        FILE, remembered with the offset its lines will start at (it may hold earlier ones),
        or the trace in session_dir, which the engine makes once the session has opened (a
        refused restart makes no directory; the engine says when it cannot)."""
        path = self.launch.trace
        if path is None:
            self._next_trace = None
            return session_dir.make_trace if self.record_trace else None
        self._next_trace = (path, path.stat().st_size if path.exists() else 0)
        return path

    async def action_quit(self) -> None:
        # Never wait for the engine: a stage in flight cannot be interrupted; the thread is a
        # daemon and run_app leaves without it.
        self.engine.send(Quit())
        code = 2 if self.failure is not None and not self.failure.detail else \
            1 if self.failure is not None else 0
        self.exit(result=code, return_code=code)

    def on_unmount(self) -> None:
        # However the app ends (q, ctrl+c, a test harness), the engine stops after its stage.
        self.engine.send(Quit())

    # ---- keys ----------------------------------------------------------------------------

    async def take_typed(self, event: events.Event) -> None:
        if (isinstance(event, events.Key) and self.running and not self.loading
                and not self.pause_sent
                and self.screen is self.main and event.key in PAUSE_KEYS[self.running]
                and not self.main.asking and not (self.searching and event.key in ("n", "escape"))):
            self.pause()
            return
        await super().take_typed(event)

    @property
    def finished(self) -> Optional[str]:
        """Why the session on screen finished (its finish_reason: eos, length, context),
        None while it goes on."""
        return self._finished

    @finished.setter
    def finished(self, reason: Optional[str]) -> None:
        if reason != self._finished:
            # finished, the keys that go on are restart and prompt: they lead the key bar
            # (under a dialog too: its screen is still mounted)
            for keys in self.main.query("#keys").results(KeyBar):
                keys.lead(("session",) if reason else ("step",))
        self._finished = reason
        if reason is None:
            self.finish_message = ""

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if self.failure is not None and action not in NO_SESSION_ACTIONS:
            return False
        return super().check_action(action, parameters)

    def frame(self) -> Frame:
        frame = super().frame()
        return replace(frame, failed=True) if self.failure is not None else frame

    def _usable(self) -> bool:
        if self.failure is not None:
            self.notify(f"no session: {self.failure.message}", severity="error")
            return False
        return True

    def _finished_says_so(self) -> bool:
        if self.finished is not None and not self.loading:
            self.notify(f"the session has finished: {self.finish_message or self.finished}; "
                        "r restarts, p takes a new prompt")
            return True
        return False

    def action_step(self, unit: str) -> None:
        if not self._usable() or self._finished_says_so():
            return
        self.engine.send(Step(unit))
        if unit != "stage" and self.running is None:
            self.running = unit
        if self.loading:
            self.set_status("busy", f"{self._progress}… then {unit} (queued)")

    def action_run(self) -> None:
        if self.running and not self.pause_sent:
            self.pause()
        else:
            self.action_step("run")

    def pause(self) -> None:
        self.engine.send(Pause())
        # Until the engine says it paused, `running` still holds: a key typed after the
        # pause acts as on a paused session (`c c c` runs again), not as a second pause.
        self.pause_sent = True
        self.set_status("busy", "pausing after this stage…")

    def action_gamma(self, step: int) -> None:
        if self.gamma_next is None:
            self.notify("the session is still loading", severity="warning")
            return
        if self._finished_says_so():  # a γ for rounds that will never come
            return
        gamma = self.gamma_next + step
        if gamma < 1:
            self.notify("γ is at least 1 proposal per round", severity="warning")
            return
        self.gamma_next = gamma  # optimistic; the engine answers with the gamma it took
        self.engine.send(SetGamma(gamma))
        self.render_now()

    def _can_restart(self) -> bool:
        """One restart at a time: a second one asked while a session loads would take the
        directory of the first (its trace in one, its exports in the other)."""
        if self.loading and self.failure is None:
            self.notify("a session is loading: restart once it is on screen", severity="warning")
            return False
        return self._usable()

    def action_prompt(self) -> None:
        if self.screen is not self.main or not self._can_restart():
            return
        from .screens.prompt import PromptScreen  # first use: keeps it off the first frame

        current = self.info.prompt if self.info is not None else self.launch.prompt
        self.push_screen(PromptScreen(current, self.prompts_dir), self._new_prompt)

    def _new_prompt(self, prompt: Optional[str]) -> None:
        if prompt is not None:
            self._restart(prompt, DIALOG_PROMPT)

    def action_restart(self) -> None:
        if self._can_restart():
            self._restart(None)

    def _restart(self, prompt: Optional[str], source: Optional[str] = None) -> None:
        if self.running:
            self.engine.send(Pause())
        self._next_session_dir = SessionDir(self.export_dir)  # a new session: new files
        self.engine.send(Restart(prompt, source=source,
                                 trace=self._session_trace(self._next_session_dir)))
        self.main.add_class("-restarting")  # dimmed until the new session is on screen
        self.loading = True
        self._progress, self._progress_since = "prefill", time.monotonic()
        self._show_progress()

    def action_export(self) -> None:
        # On the live round, x acts on the record the keys before it led to: `s x` typed
        # ahead would otherwise export the stage before the one s asked for, still
        # computing. Only the engine knows that record in time, so the request queues behind
        # the steps (a pause on its way included) and the engine answers with it. During a
        # run (`c`), on an earlier round, or with no session (its thread may have ended and
        # would never answer), x exports what is on screen.
        if (self.failure is None and self.viewing is None
                and (self.running != "run" or self.pause_sent)):
            self.engine.send(Export())
        else:
            super().action_export()

    def engine_recordtoexport(self, event: RecordToExport) -> None:
        self.export_record(event.record)

    def action_toggle_npz(self) -> None:
        self.npz = not self.npz
        self.engine.send(SetKeepRaw(self.npz))
        self.update_status_right()
        self.notify("NPZ export on: raw buffers are kept from the next stage (slower)"
                    if self.npz else "NPZ export off")

    def set_breakpoints(self, armed: Optional[Breakpoints]) -> None:
        super().set_breakpoints(armed)
        if armed is not None:
            self.engine.send(SetBreakpoints(armed))

    def status_right(self) -> list[tuple[str, str]]:
        parts = super().status_right()
        if self.launch.trace is not None:  # an explicit file, apart from the session's directory
            parts.append((f"trace → {self.launch.trace}", f"trace → {self.launch.trace.name}"))
        elif self.trace is None and self.loading is False:
            parts.append(("no trace (older rounds: summaries only)", "no trace"))
        return parts

    def palette_commands(self):
        commands = [
            ("Step one stage", "s", lambda: self.action_step("stage")),
            ("Step one round", "n / space", lambda: self.action_step("round")),
            ("Run / pause", "c", self.action_run),
            ("Increase γ", "one more proposal per round, from the next round", lambda: self.action_gamma(1)),
            ("Decrease γ", "one proposal fewer per round, from the next round", lambda: self.action_gamma(-1)),
            ("New prompt", "type a prompt or pick a sample; restarts the session", self.action_prompt),
            ("Restart session", "prefill the same prompt again", self.action_restart),
            ("Toggle NPZ export", "keep raw buffers for x (slower)", self.action_toggle_npz),
            *super().palette_commands(),
        ]
        if self.failure is not None:
            # no session: the palette offers what the key bar does (help, the message log;
            # Textual's own commands, quit among them, stay), not commands that say so
            usable = {getattr(self, f"action_{name}", None) for name in NO_SESSION_ACTIONS}
            commands = [command for command in commands if command[2] in usable]
        return commands

    # ---- engine events -------------------------------------------------------------------

    def on_engine_wake(self, message: EngineWake) -> None:
        if not self.can_draw():
            return  # closing: nothing left to show events on
        for event in self.inbox.take():
            getattr(self, f"engine_{type(event).__name__.lower()}")(event)

    def is_running(self) -> bool:
        return self.running is not None

    def compared(self) -> bool:
        return self.launch.compare is not None  # known before the session has loaded

    def render_now(self) -> None:
        # During a run the status line follows the frames, not every stage: one repaint.
        if self.running and self.live is not None and self.status.kind in ("running", "busy", "paused", "idle"):
            self.set_status("running", f"running · round {self.live.round} {self.live.stage}")
        super().render_now()

    # ---- rounds on screen ---------------------------------------------------------------

    def upto(self) -> int:
        if self.history is None or self.viewing is None:
            return super().upto()
        row = self.history.index(self.viewing)
        return len(self.history) if row is None else row + 1

    def live_where(self) -> str:
        if self.viewing is None or self.live is None:
            return ""
        return f"round {self.live.round} {self.live.stage}"

    def round_bounds(self) -> Optional[tuple[int, int]]:
        if self.history is None:
            return None
        first = self.history.first_round
        last = self.live.round if self.live is not None else self.history.last_round
        if first is None and last is None:
            return None
        return (last if first is None else first, last)

    def go_to_round(self, number: Optional[int]) -> bool:
        live = self.live
        if number is None or live is None or number >= live.round:
            self.viewing = None
            self.record, self.text_before = live, self.live_text_before
            self.round_label = "" if live is None else str(live.round)
            self.render_now()
            return True
        record = self.history.record(number)
        if record is None:
            why = "--no-trace" if self.trace is None else f"not in {self.trace}"
            self.notify(f"round {number}: only its summary is kept ({why}); the last "
                        f"{self.history.keep} rounds are kept whole", severity="warning")
            return False
        previous = self.history.record(number - 1) if self.history.is_kept(number - 1) else None
        self.viewing = number
        self.record = record
        self.text_before = text_before(record, previous.committed_text if previous else None)
        self.round_label = str(number)
        self.render_now()
        return True

    def engine_progress(self, event: Progress) -> None:
        self._progress, self._progress_since = event.text, time.monotonic()
        self._show_progress()

    def engine_loaded(self, event: Loaded) -> None:
        from ..history import History, reference_side  # numpy: after the first frame

        self.loading = False
        self.main.remove_class("-restarting")
        self.info, self.prefill = event.info, event.prefill
        self.gamma_next = event.gamma
        self.finished = event.finished
        self.trace = event.trace  # None: nowhere, or it could not be written
        start = self._next_trace[1] if self._next_trace and self._next_trace[0] == event.trace else 0
        if self._next_session_dir is not None:  # a restart's session opened: its files go there
            self.session_dir, self._next_session_dir = self._next_session_dir, None
        self.history = History(self.keep_rounds, TraceRounds(self.trace, start) if self.trace else None)
        # the reference's slots, for the aggregates tab (its records are the history's: keep 1)
        self.reference_history = History(1, side=reference_side) if event.info.compare else None
        self.live = self.record = self.pinned = self.searching = None
        self.viewing = self.aggregate_rounds = None
        self.text_before = self.live_text_before = event.prefill.first_text
        self.round_label = ""
        self.failure = None
        self.update_status_right()
        self.status_log.add("info", session_setup(event.info))  # `L`: whole, at 80 columns too
        if not self.running:
            notes = "; ".join(event.info.notes)
            self.set_status("idle", f"ready after prefill of {event.info.prompt_tokens} tokens: "
                            "s stage · n round · c run" + (f"  (note: {notes})" if notes else ""))
        for note in event.info.notes:
            if note not in self._notes_said:  # once, not again at each restart
                self._notes_said.add(note)
                self.notify(f"note: {note}", severity="warning", timeout=10)
        slow = slow_on_cpu(event.info)
        if slow and not self._slow_said:  # once, not again at each restart
            self._slow_said = True
            self.notify(f"note: {slow}", severity="warning", timeout=8)
        self.render_now()

    def engine_stagestarted(self, event: StageStarted) -> None:
        self.busy = (event.round, event.stage, time.monotonic())
        self.running = None if event.mode == "stage" else event.mode
        if not self.running:
            self.set_status("busy", f"computing round {event.round} {event.stage}…")
            self.request_render()

    def engine_stagedone(self, event: StageDone) -> None:
        record = event.record
        self.busy = None
        if record.complete:
            if self.live is None or self.live.round != record.round:  # its stages went unseen
                last = self.history.record(self.history.last_round) if len(self.history) else None
                self.live_text_before = text_before(record, last.committed_text if last else None)
            self.history.add(record)
            if self.reference_history is not None and record.compare is not None:
                self.reference_history.add(record)
            self.finished = record.finish_reason
        else:
            self.live_text_before = record.committed_text
        self.live = record
        if self.viewing is None:
            self.record, self.text_before = record, self.live_text_before
            self.round_label = str(record.round)
        if event.hits and not self.running:
            self.say_stop(f"round {record.round} {record.stage}", event.hits)
            self.breakpoint_stopped(record)
        self.request_render()

    def engine_idle(self, event: Idle) -> None:
        self.running = None
        self.pause_sent = False
        self.busy = None
        record = self.live
        where = f"round {record.round} {record.stage}" if record is not None else "prefill"
        if event.reason == "breakpoint":
            self.say_stop(where, event.hits or (event.message,))  # ⚑: stopped
            if record is not None:
                self.breakpoint_stopped(record)
        elif event.reason == "finished":
            tokens = int(self.history.committed.values.sum()) + 1
            self.finish_message = event.message  # the reason came with the record, or Loaded
            count = "" if self.finished == "length" else f" · {tokens} tokens"  # said already
            self.set_status("finished", f"finished: {event.message}{count} · r restarts · "
                            "p new prompt")
        elif event.reason == "round" and record is not None:
            self.set_status("paused", f"round {record.round} done: accepted {record.accepted}/"
                            f"{record.gamma}, +{len(record.committed_tokens)} "
                            f"token{'s' * (len(record.committed_tokens) != 1)}")
        elif event.reason in ("paused", "stage"):
            if self.status.kind != "breakpoint" or event.reason == "paused":
                self.set_status("paused", f"paused after {where}")
        self.render_now()

    def engine_gammachanged(self, event: GammaChanged) -> None:
        self.gamma_next = event.gamma
        self.render_now()

    def engine_notice(self, event: Notice) -> None:
        self.notify(event.text, severity=event.severity, timeout=8 if event.severity == "error" else 4)
        if event.severity == "error":
            self.set_status("error", event.text)

    def engine_failed(self, event: Failed) -> None:
        self.busy = None
        self.running = None
        self.pause_sent = False
        self.main.remove_class("-restarting")  # refused or failed: what is shown is what there is
        if event.fatal:
            self.failure = event
            self.loading = False
            self.set_status("error", f"cannot open the session: {event.message} (q quits)")
            self.refresh_bindings()  # the key bar keeps only what still works
            self.render_now()  # the header and panels stop saying loading
        elif event.refused:  # a restart's prompt, refused like any input: the session goes on
            self.loading = False
            self._next_session_dir = None
            self.set_status("finished" if self.finished else "paused",
                            f"{event.message} (the session is as it was)")
            self.notify(event.message, severity="warning", timeout=12, log=False)
            self.render_now()
            return
        else:
            self.loading = False
            self._next_session_dir = None
            self.set_status("error", f"engine error: {event.message} (r restarts the session)")
        self.notify(event.message, title="engine error", severity="error", timeout=12, log=False)

    # ---- status while loading or computing -------------------------------------------------

    def _show_progress(self) -> None:
        elapsed = time.monotonic() - self._progress_since
        shown = f" ({elapsed:.1f} s)" if elapsed >= 1 and self.show_timings else ""
        self.set_status("busy", f"{self._progress}…{shown}")

    def _tick(self) -> None:
        if self.loading and self.failure is None:
            self._show_progress()
        elif self.busy is not None and self.show_timings and not self.running:
            round_index, stage, since = self.busy
            elapsed = time.monotonic() - since
            if elapsed >= SLOW_STAGE:
                self.set_status("busy", f"computing round {round_index} {stage}… {elapsed:.1f} s")


