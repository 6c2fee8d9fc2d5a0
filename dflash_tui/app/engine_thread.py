"""The engine thread: the one long-lived thread that owns every MLX object.

MLX arrays belong to the thread that made them, so the target, the drafter and the session
are created, stepped and closed here and nowhere else. The app talks to this thread with
commands on a queue; the thread answers with plain-data events through `emit` (the app's
thread-safe `post_message`). Nothing MLX ever crosses over: records are frozen dataclasses.

The thread is a daemon: an MLX op cannot be interrupted, so quitting mid-stage must not wait
for it. Between stages the thread drains its queue, so Pause lands after at most one stage.
The engine modules are imported here, on first use, so the app's first frame never waits
for MLX, mlx-lm or transformers to load.
"""

from __future__ import annotations

import gc
import queue
from collections import deque
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union

from ..cli import user_message
from ..engine.errors import InputError
from ..engine.records import PrefillRecord, RoundRecord, SessionInfo
from ..breakpoints import Breakpoints, hits


# ---- what to open ----------------------------------------------------------------------------

# A trace's path, or what makes it (SessionDir.make_trace): called once the session has
# opened and prefilled, so a session refused (a prompt past the target's context) makes no
# directory.
TraceTarget = Union[Path, Callable[[], Path]]


@dataclass(frozen=True)
class Launch:
    model: Path
    draft: Optional[Path] = None
    prompt: str = ""
    # where the prompt came from (`--prompt-file F`), named if it is refused; None: the sample's
    prompt_source: Optional[str] = None
    chat: Optional[bool] = None
    dtype: str = "float32"
    keep_quantized: bool = False
    layer_offset: int = 0
    gamma: Optional[int] = None
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 512
    # where the first session records its rounds (appended to): a Path, or a callable that
    # makes one (a new session directory), called only once the session has opened
    trace: Optional[TraceTarget] = None
    keep_raw: bool = False
    # SessionOptions.proposer: forced proposals for tests and what-if runs (see engine).
    proposer: Optional[Callable[[list[int], int], list[int]]] = None
    # --distributed: the group (engine.distributed.Mesh) the target is sharded over; this
    # thread then drives every rank's session (app/lockstep.py).
    mesh: Optional[object] = None
    # --compare SPEC (text or a parsed engine.compare_spec.CompareSpec) and --compare-tol: a
    # reference configuration runs beside the drafter every round (docs/COMPARE.md).
    compare: Optional[object] = None
    compare_tol: Optional[float] = None
    # Once the pair has loaded, move what is alive then (the model, the tokenizer, Textual,
    # every module) out of the garbage collector's sight: a full collection then walks what
    # the session makes, not all of that (docs/TUI.md, "The collector"). The app sets it;
    # tests, which open many apps in one process, leave it off.
    freeze_loaded: bool = False


# ---- commands (app -> engine) ----------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    unit: str  # "stage" | "round" | "run"


@dataclass(frozen=True)
class Pause:
    pass


@dataclass(frozen=True)
class SetGamma:
    gamma: int


@dataclass(frozen=True)
class SetKeepRaw:
    on: bool


@dataclass(frozen=True)
class SetBreakpoints:
    armed: Breakpoints


@dataclass(frozen=True)
class Restart:
    prompt: Optional[str] = None  # None: the same prompt again
    source: Optional[str] = None  # where a new prompt came from, named if it is refused
    trace: Optional[TraceTarget] = None  # where the new session records its rounds (None: nowhere)


@dataclass(frozen=True)
class Export:
    """Export the record current once the commands before it have run: `s x` or `n x`
    typed ahead exports what those steps led to, which only this thread knows in time. The
    answer is RecordToExport; the app writes the files."""


@dataclass(frozen=True)
class Quit:
    pass


# ---- events (engine -> app) ------------------------------------------------------------------

@dataclass(frozen=True)
class Progress:
    text: str


@dataclass(frozen=True)
class Loaded:
    """A session is ready: prefill done. Also sent after a restart."""
    info: SessionInfo
    prefill: PrefillRecord
    gamma: int
    finished: Optional[str]
    trace: Optional[Path] = None  # where this session records its rounds (None: nowhere)


@dataclass(frozen=True)
class StageStarted:
    round: int
    stage: str
    mode: str  # "stage" | "round" | "run"


@dataclass(frozen=True)
class StageDone:
    record: RoundRecord
    hits: tuple[str, ...]  # armed breakpoints this stage made true


@dataclass(frozen=True)
class Idle:
    """The engine stopped working and waits for a command."""
    reason: str  # "stage" | "round" | "paused" | "breakpoint" | "finished" | "error"
    message: str = ""
    hits: tuple[str, ...] = ()  # "breakpoint": the conditions that fired (message joins them)


@dataclass(frozen=True)
class GammaChanged:
    gamma: int


@dataclass(frozen=True)
class RecordToExport:
    """The answer to Export: the session's latest record where it was handled."""
    record: Optional[RoundRecord]  # None: no stage run yet


@dataclass(frozen=True)
class Notice:
    text: str
    severity: str = "information"  # "information" | "warning" | "error"


@dataclass(frozen=True)
class Failed:
    message: str  # one line
    detail: str = ""  # a traceback for unexpected errors; empty for InputError
    fatal: bool = False  # no session: only quitting is left
    refused: bool = False  # input refused (a restart's prompt): the session goes on as it was


# ---- the thread --------------------------------------------------------------------------------

class EngineThread(threading.Thread):
    def __init__(self, launch: Launch, emit: Callable[[object], None],
                 armed: Breakpoints = Breakpoints(), pace: Callable[[], None] = lambda: None):
        """pace: called before each stage of a round or run; the app blocks in it while it
        is behind on the events already sent (backpressure)."""
        super().__init__(name="dflash-engine", daemon=True)
        self.launch = launch
        self._emit = emit
        self._pace = pace
        self.armed = armed
        self.commands: "queue.Queue[object]" = queue.Queue()
        self.session = None
        self._pair = None
        self._source = launch.prompt_source  # where the session's prompt came from
        self._trace = None
        self._running: Optional[str] = None  # "round" | "run" while stepping on its own
        self._deferred: deque = deque()  # steps asked for while a round or run was going
        self.busy_stage: Optional[str] = None  # the stage being computed (tests, bench)

    def send(self, command: object) -> None:
        self.commands.put(command)

    def emit(self, event: object) -> None:
        try:
            self._emit(event)
        except RuntimeError:  # the app's loop is closed: it has quit
            pass

    # ---- main loop -----------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._open(self.launch.prompt, self.launch.trace, self.launch.prompt_source)
        except InputError as error:
            self.emit(Failed(user_message(error), fatal=True))
            return
        except Exception as error:  # noqa: BLE001 - shown in the app, never a raw traceback
            self.emit(Failed(_one_line(error), traceback.format_exc(), fatal=True))
            return
        while True:
            if self._running is None and self._deferred:
                command = self._deferred.popleft()
            else:
                try:
                    command = self.commands.get(block=self._running is None)
                except queue.Empty:
                    command = None
            if isinstance(command, Quit):
                self._close()
                return
            if command is not None:
                self._handle(command)
                continue  # drain every queued command before the next stage
            self._pace()
            if self.commands.empty():  # a Pause or Quit may have come in while waiting
                self._advance()

    def _handle(self, command: object) -> None:
        session = self.session
        if isinstance(command, Step):
            if self._running is not None:
                self._deferred.append(command)  # steps run in the order they were asked for
            elif command.unit == "stage":
                self._advance(single=True)
            else:
                self._running = command.unit
        elif isinstance(command, Export):
            if self._running == "round":
                self._deferred.append(command)  # after the round, and the steps asked before it
            else:  # idle, or mid-run (`c` runs until a key: x then exports what is current)
                self.emit(RecordToExport(session.current))
        elif isinstance(command, Pause):
            self._clear_deferred()
            if self._running is not None:
                self._running = None
                self.emit(Idle("paused", self._where()))
        elif isinstance(command, SetGamma):
            try:
                session.set_gamma(command.gamma)
            except InputError as error:
                self.emit(Notice(user_message(error), "warning"))
            self.emit(GammaChanged(session.gamma))  # the app shows what the session took
        elif isinstance(command, SetKeepRaw):
            session.set_keep_raw(command.on)
        elif isinstance(command, SetBreakpoints):
            self.armed = command.armed
        elif isinstance(command, Restart):
            self._running = None
            self._clear_deferred()
            if command.prompt is not None:
                prompt, source = command.prompt, command.source
            else:
                prompt, source = session.info.prompt, self._source
            try:
                self._open(prompt, command.trace, source)
            except InputError as error:  # the old session is untouched: it goes on
                self.emit(Failed(f"restart refused: {user_message(error)}", refused=True))
            except Exception as error:  # noqa: BLE001
                self.emit(Failed(_one_line(error), traceback.format_exc()))

    def _clear_deferred(self) -> None:
        """Pause and Restart drop the steps still waiting, but not an export among them: it
        is answered with the record where the pause or restart took effect (before the new
        session opens), since the user asked for a file and dropping it would say nothing."""
        for command in self._deferred:
            if isinstance(command, Export):
                self.emit(RecordToExport(self.session.current))
        self._deferred.clear()

    def _advance(self, single: bool = False) -> None:
        """Run one stage; stop a round or run where it ends, trips a breakpoint or finishes."""
        session = self.session
        if session.finished is not None:
            self._running = None
            self.emit(Idle("finished", session.finish_message))
            return
        stage = session.next_stage.value
        round_index = session.rounds_done
        self.busy_stage = stage
        self.emit(StageStarted(round_index, stage, "stage" if single else self._running))
        try:
            record = session.step_stage()
        except Exception as error:  # noqa: BLE001 - the session may be broken: say so, keep the app
            self.busy_stage = None
            self._running = None
            self.emit(Failed(f"round {round_index} {stage}: {_one_line(error)}",
                             traceback.format_exc()))
            self.emit(Idle("error", _one_line(error)))
            return
        self.busy_stage = None
        found = hits(record, self.armed)
        if record.complete:
            self._write_trace(record)
        self.emit(StageDone(record, found))
        if session.finished is not None:
            self._running = None
            self.emit(Idle("finished", session.finish_message))
        elif found and not single:
            self._running = None
            self.emit(Idle("breakpoint", "; ".join(found), found))
        elif single:
            self.emit(Idle("stage", self._where()))
        elif self._running == "round" and record.complete:
            self._running = None
            self.emit(Idle("round", self._where()))

    def _where(self) -> str:
        record = self.session.current if self.session is not None else None
        if record is None or record.stage is None:
            return "after prefill"
        return f"at round {record.round} {record.stage}"

    # ---- sessions and the trace ----------------------------------------------------------

    def _open(self, prompt: str, trace: Optional[TraceTarget], source: Optional[str]) -> None:
        if self._pair is None:
            self.emit(Progress("importing MLX and mlx-lm"))
        from ..engine.api import load_pair
        from ..engine.session import SessionOptions

        launch = self.launch
        progress = lambda text: self.emit(Progress(text))  # noqa: E731
        if self._pair is None:
            self._pair = load_pair(launch.model, launch.draft, dtype=launch.dtype,
                                   keep_quantized=launch.keep_quantized, progress=progress,
                                   mesh=launch.mesh, compare=launch.compare,
                                   compare_tol=launch.compare_tol)
            if launch.mesh is not None:
                from .lockstep import Leader

                self._pair = Leader(self._pair, launch.mesh)
            if launch.freeze_loaded:
                gc.collect()  # garbage made while loading is freed, not frozen for good
                gc.freeze()
        keep_raw = self.session.keep_raw if self.session is not None else launch.keep_raw
        options = SessionOptions(
            gamma=self.session.gamma if self.session is not None else launch.gamma,
            temperature=launch.temperature, seed=launch.seed, max_tokens=launch.max_tokens,
            keep_raw=keep_raw, layer_offset=launch.layer_offset, proposer=launch.proposer,
        )
        new = self._pair.open(prompt, options=options, chat=launch.chat, prefill=False,
                              source=source)
        if self.session is not None:
            self.session.close()
        self.session, self._source = new, source
        self.emit(Progress(f"prefill: {len(new.prompt_ids)} prompt tokens"))
        prefill = new.prefill()
        path = self._open_trace(trace, new.info, prefill)
        self.emit(Loaded(new.info, prefill, new.gamma, new.finished, path))
        if new.finished is not None:
            self.emit(Idle("finished", new.finish_message))

    def _open_trace(self, path: Optional[TraceTarget], info: SessionInfo,
                    prefill: PrefillRecord) -> Optional[Path]:
        """Start the session's trace; where it goes (None: nowhere)."""
        self._close_trace()
        if path is None:
            return None
        from ..snapshot import TraceWriter

        try:
            if callable(path):
                path = path()
            self._trace = TraceWriter(path, info, prefill)
        except OSError as error:
            self._trace = None
            where = path if not callable(path) else error.filename or "the session directory"
            self.emit(Notice(f"trace off: cannot write {where}: {error.strerror or error}", "error"))
            return None
        return path

    def _write_trace(self, record: RoundRecord) -> None:
        if self._trace is None:
            return
        try:
            self._trace.write(record)
        except (OSError, ValueError) as error:
            self._close_trace()
            self.emit(Notice(f"trace stopped at round {record.round}: "
                             f"{getattr(error, 'strerror', None) or error}", "error"))

    def _close_trace(self) -> None:
        if self._trace is not None:
            try:
                self._trace.close()
            except OSError:
                pass
            self._trace = None

    def _close(self) -> None:
        self._close_trace()
        if self.session is not None:
            self.session.close()
        if self.launch.mesh is not None and self._pair is not None:
            self._pair.close()  # the other ranks leave too


def _one_line(error: BaseException) -> str:
    if isinstance(error, InputError):
        return user_message(error)
    text = " ".join(str(error).split()) or error.__class__.__name__
    return f"{error.__class__.__name__}: {text}"

