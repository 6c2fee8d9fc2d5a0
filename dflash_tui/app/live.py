"""The live app: a session stepped by the engine thread, one stage, one round or a run at a
time.

The app never touches MLX. Keys become commands on the engine thread's queue and return at
once; the engine answers with records (through the Inbox below) that update the screen.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from textual import events
from textual.binding import Binding

from ..engine.records import RoundRecord
from ..sample import PROMPTS_DIR
from ..breakpoints import Breakpoints
from .debugger import DebuggerApp
from .inbox import EngineWake, Inbox
from .engine_thread import (
    EngineThread, Failed, GammaChanged, Idle, Launch, Loaded, Notice, Pause, Progress, Quit,
    Restart, SetBreakpoints, SetGamma, SetKeepRaw, StageDone, StageStarted, Step, strip_raw,
)
from .rounds import text_before

# During a run these keys pause it (and do nothing else); view keys (tabs, slots, help,
# export, breakpoints, gamma) leave it running. During a single round only escape and c
# pause it: another s / n is queued behind it, as typed.
PAUSE_KEYS = {"run": frozenset({"c", "space", "s", "n", "escape"}),
              "round": frozenset({"c", "escape"})}
SLOW_STAGE = 0.5  # seconds before the status line starts counting a stage's time
ENGINE_START_DELAY = 0.1  # seconds between the first frame and the engine's first import


class LiveApp(DebuggerApp):
    BINDINGS = [
        Binding("s", "step('stage')", "stage"),
        Binding("n", "step('round')", "round"),
        Binding("space", "step('round')", "round", show=False),
        Binding("c", "run", "run/pause"),
        Binding("plus,equals_sign", "gamma(1)", "γ+"),
        Binding("minus", "gamma(-1)", "γ-"),
        Binding("p", "prompt", "prompt"),
        Binding("r", "restart", "restart"),
        Binding("X", "toggle_npz", "npz", show=False),
    ]
    HELP_KEYS = [
        ("step", [
            ("s", "one stage: context → draft → select → verify → commit"),
            ("n  space", "the rest of the round (stops early at a breakpoint)"),
            ("c", "run until c / space / s / n / escape, a breakpoint, EOS or --max-tokens"),
            ("+ -", "proposals per round (γ), from the next round on"),
        ]),
        ("session", [
            ("p", "new prompt (typed, or one of sample_prompts/), fresh session"),
            ("r", "restart the session on the same prompt"),
            ("X", "NPZ export on/off (keeps raw buffers from the next stage; slower)"),
        ]),
    ]

    def __init__(self, launch: Launch, *, export_dir: Path = Path("dflash-snapshots"),
                 show_timings: bool = True, armed: Breakpoints = Breakpoints(),
                 prompts_dir: Path = PROMPTS_DIR) -> None:
        super().__init__(export_dir=export_dir, show_timings=show_timings, armed=armed)
        self.launch = launch
        self.prompts_dir = prompts_dir
        self.inbox = Inbox(self.post_message)
        self.engine = EngineThread(launch, self.inbox.put, armed, pace=self.inbox.wait_drained)
        self.npz = launch.keep_raw
        self.loading = True
        self.running: Optional[str] = None  # "round" | "run": the engine steps on its own
        self.finished: Optional[str] = None
        self.failure: Optional[Failed] = None  # a fatal one: no session to step
        self.rounds: list[RoundRecord] = []  # completed rounds, raw buffers dropped
        self.busy: Optional[tuple[int, str, float]] = None  # (round, stage, since)
        self.events_seen = 0
        self._progress = "starting the engine"
        self._progress_since = time.monotonic()

    # ---- lifecycle -----------------------------------------------------------------------

    def screen_ready(self) -> None:
        super().screen_ready()
        self._show_progress()
        # Start the engine (and its MLX imports, which hold the interpreter for a second or
        # two) only once the first frame is drawn and the writer thread has had a moment to
        # put it on the terminal.
        self.call_after_refresh(self.set_timer, ENGINE_START_DELAY, self.engine.start)
        self.set_interval(0.25, self._tick)

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

    async def on_event(self, event: events.Event) -> None:
        if (isinstance(event, events.Key) and not event.is_forwarded and self.running and not self.loading
                and self.screen is self.main and event.key in PAUSE_KEYS[self.running]):
            self.pause()
            event.prevent_default()
            event.stop()
            return
        await super().on_event(event)

    def _usable(self) -> bool:
        if self.failure is not None:
            self.notify(f"no session: {self.failure.message}", severity="error")
            return False
        return True

    def action_step(self, unit: str) -> None:
        if not self._usable():
            return
        if self.finished is not None and not self.loading:
            self.notify(f"the session has finished ({self.finished}): r restarts, p takes a new prompt")
            return
        self.engine.send(Step(unit))
        if unit != "stage" and self.running is None:
            self.running = unit
        if self.loading:
            self.set_status("busy", f"{self._progress}… then {unit} (queued)")

    def action_run(self) -> None:
        if self.running:
            self.pause()
        else:
            self.action_step("run")

    def pause(self) -> None:
        self.engine.send(Pause())
        self.set_status("busy", "pausing after this stage…")

    def action_gamma(self, step: int) -> None:
        if self.gamma_next is None:
            self.notify("the session is still loading", severity="warning")
            return
        gamma = self.gamma_next + step
        if gamma < 1:
            self.notify("γ is at least 1 proposal per round", severity="warning")
            return
        self.gamma_next = gamma  # optimistic; the engine answers with the gamma it took
        self.engine.send(SetGamma(gamma))
        self.render_now()

    def action_prompt(self) -> None:
        if not self._usable() or self.screen is not self.main:
            return
        from .screens.prompt import PromptScreen  # first use: keeps it off the first frame

        current = self.info.prompt if self.info is not None else self.launch.prompt
        self.push_screen(PromptScreen(current, self.prompts_dir), self._new_prompt)

    def _new_prompt(self, prompt: Optional[str]) -> None:
        if prompt is not None:
            self._restart(prompt)

    def action_restart(self) -> None:
        if self._usable():
            self._restart(None)

    def _restart(self, prompt: Optional[str]) -> None:
        if self.running:
            self.engine.send(Pause())
        self.engine.send(Restart(prompt))
        self.loading = True
        self._progress, self._progress_since = "prefill", time.monotonic()
        self._show_progress()

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

    def status_right(self) -> list[str]:
        parts = super().status_right()
        if self.launch.trace is not None:
            parts.insert(0, f"trace → {self.launch.trace}")
        return parts

    def palette_commands(self):
        return [
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

    # ---- engine events -------------------------------------------------------------------

    def on_engine_wake(self, message: EngineWake) -> None:
        if not self.can_draw():
            return  # closing: nothing left to show events on
        for event in self.inbox.take():
            self.events_seen += 1
            getattr(self, f"engine_{type(event).__name__.lower()}")(event)

    def is_running(self) -> bool:
        return self.running is not None

    def render_now(self) -> None:
        # During a run the status line follows the frames, not every stage: one repaint.
        if self.running and self.record is not None and self.status.kind in ("running", "busy", "paused", "idle"):
            self.set_status("running", f"running · round {self.record.round} {self.record.stage}")
        super().render_now()

    def frame(self):
        if len(self.history) != len(self.rounds):  # built once per frame, not per round
            self.history = tuple(self.rounds)
        return super().frame()

    def engine_progress(self, event: Progress) -> None:
        self._progress, self._progress_since = event.text, time.monotonic()
        self._show_progress()

    def engine_loaded(self, event: Loaded) -> None:
        self.loading = False
        self.info, self.prefill = event.info, event.prefill
        self.gamma_next = event.gamma
        self.finished = event.finished
        self.rounds, self.history, self.record = [], (), None
        self.text_before = event.prefill.first_text
        self.round_label = ""
        self.failure = None
        if not self.running:
            notes = "; ".join(event.info.notes)
            self.set_status("idle", f"ready after prefill of {event.info.prompt_tokens} tokens: "
                            "s stage · n round · c run" + (f"  (note: {notes})" if notes else ""))
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
            previous = self.rounds[-1].committed_text if self.rounds else None
            if self.record is None or self.record.round != record.round:
                self.text_before = text_before(record, previous)
            self.rounds.append(strip_raw(record))
            self.finished = record.finish_reason
        else:
            self.text_before = record.committed_text
        self.record = record
        self.round_label = str(record.round)
        if event.hits and not self.running:
            self.set_status("breakpoint", f"round {record.round} {record.stage}: " + "; ".join(event.hits))
        self.request_render()

    def engine_idle(self, event: Idle) -> None:
        self.running = None
        self.busy = None
        record = self.record
        where = f"round {record.round} {record.stage}" if record is not None else "prefill"
        if event.reason == "breakpoint":
            self.set_status("breakpoint", f"stopped at {where}: {event.message}")
        elif event.reason == "finished":
            tokens = sum(len(r.committed_tokens) for r in self.rounds) + 1
            self.finished = event.message
            self.set_status("finished", f"finished ({event.message}) after {tokens} tokens · "
                            "r restarts · p new prompt")
        elif event.reason == "round" and record is not None:
            self.set_status("paused", f"round {record.round} done: accepted {record.accepted}/"
                            f"{record.gamma}, +{len(record.committed_tokens)} tokens")
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
        if event.fatal:
            self.failure = event
            self.loading = False
            self.set_status("error", f"cannot open the session: {event.message} (q quits)")
        else:
            self.loading = False  # a refused restart leaves the session it had
            self.set_status("error", f"engine error: {event.message} (r restarts the session)")
        self.notify(event.message, title="engine error", severity="error", timeout=12)

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


