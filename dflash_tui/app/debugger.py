"""What the live app and replay share: the screen, rendering frames, the view keys, help,
breakpoints, export and the command palette.

Rendering is coalesced: records may arrive faster than a terminal can draw (a tiny model
runs hundreds of stages a second), so at most one frame is drawn per RENDER_INTERVAL and it
always shows the latest record. A key that changes the view renders at once.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Iterable, Optional

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen

from ..engine.records import PrefillRecord, RoundRecord, SessionInfo
from ..panels.frame import Frame
from ..panels.help import HelpScreen
from ..panels.probes import ProbesPanel
from ..panels.ranks import RanksPanel
from ..panels.selector import SelectorPanel
from ..panels.status import StatusLine
from ..breakpoints import TOGGLES, Breakpoints
from .screens.main import MainScreen

RENDER_INTERVAL = 0.05  # seconds: at most 20 frames a second while records stream in
RUN_RENDER_INTERVAL = 0.1  # during a run: leaves the UI thread idle enough to answer keys


def needs_screen(action):
    """A view action that touches the panels does nothing until the main screen is up
    (keys can arrive before it is)."""
    @functools.wraps(action)
    def guarded(self, *args):
        if self._panels:
            return action(self, *args)
    return guarded


class ExportDone(Message):
    def __init__(self, paths: list[Path], record: RoundRecord, note: str = "",
                 error: Optional[str] = None) -> None:
        super().__init__()
        self.paths, self.record, self.note, self.error = paths, record, note, error


class _EarlyStatus:
    """Keeps the status line's text until the screen is up (keys can arrive before)."""

    kind, message, right = "idle", "", ""

    def set_status(self, kind: str, message: str) -> None:
        self.kind, self.message = kind, message

    def set_right(self, text: str) -> None:
        self.right = text


class DebuggerApp(App[int]):
    TITLE = "dflash-tui"
    ENABLE_COMMAND_PALETTE = True
    CSS = SelectorPanel.NARROW_CSS
    BINDINGS = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help"),
        Binding("b", "breakpoints", "breaks"),
        Binding("x", "export", "export"),
        Binding("f", "first_nonfinite", "first NaN", show=False),
        Binding("1", "tab(0)", "ranks", show=False),
        Binding("2", "tab(1)", "selector", show=False),
        Binding("3", "tab(2)", "probes", show=False),
        Binding("left_square_bracket", "layer(-1)", "layer -", show=False),
        Binding("right_square_bracket", "layer(1)", "layer +", show=False),
        Binding("comma", "slot(-1)", "slot -", show=False),
        Binding("full_stop", "slot(1)", "slot +", show=False),
        Binding("m", "maximize", "zoom", show=False),
    ]
    # (section, [(keys, what)]) for the help screen: HELP_KEYS (the subclass's) come first.
    HELP_KEYS: list = []
    HELP_VIEW = [
        ("view", [
            ("1 2 3", "inspector tab: ranks, selector, probes"),
            (", .", "previous / next proposal slot (ranks, selector, top-5, lattice)"),
            ("↑ ↓", "move in the focused table (the slot, or the probe row)"),
            ("[ ]", "probes: previous / next layer filter (all, no layer, 0, 1, ...)"),
            ("f", "probes: jump to the first non-finite buffer"),
            ("m", "zoom the inspector (m or escape again to restore)"),
            ("b", "breakpoints menu"),
            ("x", "export the round on screen (JSON, + NPZ when on)"),
            ("? ctrl+p", "this help; the command palette"),
            ("q", "quit"),
        ]),
    ]

    def __init__(self, *, export_dir: Path = Path("dflash-snapshots"), show_timings: bool = True,
                 armed: Breakpoints = Breakpoints()) -> None:
        super().__init__()
        # No animations (tab underline slides, smooth scrolls): every frame they add is CPU
        # taken from answering keys, and a debugger's screen should change at once.
        self.animation_level = "none"
        self.export_dir = Path(export_dir)
        self.show_timings = show_timings
        self.armed = armed
        self.npz = False
        # what is on screen
        self.info: Optional[SessionInfo] = None
        self.prefill: Optional[PrefillRecord] = None
        self.record: Optional[RoundRecord] = None
        self.history: tuple[RoundRecord, ...] = ()
        self.text_before = ""
        self.slot = 0
        self.mode = "live"
        self.round_label = ""
        self.gamma_next: Optional[int] = None
        self._panels: list = []
        self._status = _EarlyStatus()
        self._last_render = 0.0
        self._render_pending = False
        self.frames_drawn = 0

    # ---- screen --------------------------------------------------------------------------

    def get_default_screen(self) -> Screen:
        self._main = MainScreen(id="main")
        return self._main

    @property
    def main(self) -> MainScreen:
        return self._main

    @property
    def status(self) -> StatusLine:
        return self._status  # a StatusLine, or a stand-in holding the text until mount

    def screen_ready(self) -> None:
        """Called by MainScreen once its panels are mounted."""
        self._panels = self.main.panels()
        early = self._status
        self._status = self.main.query_one("#status", StatusLine)
        self._status.set_status(early.kind, early.message)
        self.update_status_right()
        self.render_now()

    # ---- frames --------------------------------------------------------------------------

    def frame(self) -> Frame:
        slot = self.slot
        if self.record is not None and self.record.gamma:
            slot = min(slot, self.record.gamma - 1)
        return Frame(info=self.info, prefill=self.prefill, record=self.record,
                     rounds=self.history, text_before=self.text_before, slot=slot,
                     mode=self.mode, round_label=self.round_label, gamma_next=self.gamma_next,
                     show_timings=self.show_timings)

    def request_render(self) -> None:
        """Draw soon: now if the last frame is old enough, else once the interval is up."""
        if self._render_pending:
            return
        interval = RUN_RENDER_INTERVAL if self.is_running() else RENDER_INTERVAL
        wait = interval - (time.monotonic() - self._last_render)
        if wait <= 0:
            self.render_now()
        else:
            self._render_pending = True
            self.set_timer(wait, self._render_timer)

    def is_running(self) -> bool:
        """Records are streaming in on their own (a live run, replay playing)."""
        return False

    def _render_timer(self) -> None:
        self._render_pending = False
        self.render_now()

    def can_draw(self) -> bool:
        """The panels are up and not being torn down."""
        return not self._closing and bool(self._panels) and self.main.is_attached

    def render_now(self) -> None:
        if not self.can_draw():
            return
        self._last_render = time.monotonic()
        frame = self.frame()
        with self.batch_update():
            for panel in self._panels:
                panel.show(frame)
        self.frames_drawn += 1

    # ---- status --------------------------------------------------------------------------

    def set_status(self, kind: str, message: str) -> None:
        self.status.set_status(kind, message)

    def status_right(self) -> list[str]:
        parts = [f"x → {self.export_dir}/" + (" +npz" if self.npz else "")]
        parts.append(f"breaks: {self.armed.describe()}")
        return parts

    def update_status_right(self) -> None:
        self.status.set_right("  ".join(self.status_right()))

    # ---- view actions --------------------------------------------------------------------

    @needs_screen
    def action_tab(self, index: int) -> None:
        self.main.show_tab(index)

    @needs_screen
    def action_slot(self, step: int) -> None:
        gamma = self.record.gamma if self.record is not None else 0
        if gamma:
            self.slot = max(0, min(gamma - 1, min(self.slot, gamma - 1) + step))
            self.render_now()

    def on_ranks_panel_slot_selected(self, message: RanksPanel.SlotSelected) -> None:
        if message.slot != self.slot and message.slot >= 0:
            self.slot = message.slot
            self.render_now()

    @needs_screen
    def action_layer(self, step: int) -> None:
        self.main.show_tab(2)
        self.main.query_one(ProbesPanel).cycle_layer(step)

    @needs_screen
    def action_first_nonfinite(self) -> None:
        self.main.show_tab(2)
        row = self.main.query_one(ProbesPanel).jump_to_first_nonfinite()
        if row is None:
            self.notify("no non-finite buffer in the round on screen")

    @needs_screen
    def action_maximize(self) -> None:
        screen = self.screen
        if screen is not self.main:
            return
        if screen.maximized is not None:
            screen.minimize()
        else:
            screen.maximize(screen.query_one("#inspector"))

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        # Built once and kept installed: later opens skip composing and styling it.
        if not self.is_screen_installed("help"):
            self.install_screen(HelpScreen(self.HELP_KEYS + self.HELP_VIEW), name="help")
        self.push_screen("help")

    def action_breakpoints(self) -> None:
        from ..panels.breakpoints import BreakpointsScreen  # first use: off the first frame

        if self.screen is self.main:
            self.push_screen(BreakpointsScreen(self.armed), self.set_breakpoints)

    def set_breakpoints(self, armed: Optional[Breakpoints]) -> None:
        if armed is not None:
            self.armed = armed
            self.update_status_right()

    def toggle_breakpoint(self, name: str) -> None:
        self.set_breakpoints(self.armed.toggled(name))
        self.notify(f"breakpoints: {self.armed.describe()}")

    # ---- export ---------------------------------------------------------------------------

    def action_export(self) -> None:
        if self.record is None:
            self.notify("nothing to export yet: step a stage first", severity="warning")
            return
        note = ""
        if self.npz and not self.record.raw:
            note = "no raw buffers in this round (NPZ is recorded from the stage after turning it on)"
        self._export(self.record, self.info, self.npz)
        self.set_status("busy", f"exporting round {self.record.round} ({self.record.stage})…")
        self._export_note = note

    @work(thread=True, group="export", exit_on_error=False)
    def _export(self, record: RoundRecord, info: Optional[SessionInfo], npz: bool) -> None:
        # Disk I/O only (no MLX): a worker keeps a slow or full disk off the UI thread.
        from ..snapshot import export_round

        try:
            paths = export_round(self.export_dir, record, info, npz=npz)
        except OSError as error:
            reason = error.strerror or str(error)
            where = error.filename or self.export_dir
            self.post_message(ExportDone([], record, error=f"export failed: {where}: {reason}"))
            return
        self.post_message(ExportDone(paths, record))

    def on_export_done(self, message: ExportDone) -> None:
        record = message.record
        if message.error:
            self.set_status("error", message.error)
            self.notify(message.error, severity="error", timeout=8)
            return
        names = " + ".join(p.name for p in message.paths)
        text = f"exported round {record.round} ({record.stage}) → {message.paths[0].parent}/{names}"
        self.set_status("info", text)
        note = getattr(self, "_export_note", "")
        if note:
            self.notify(note, severity="warning")

    # ---- command palette ------------------------------------------------------------------

    def palette_commands(self) -> list[tuple[str, str, object]]:
        commands = [
            ("Export round", "write the round on screen as JSON (+NPZ) to " + str(self.export_dir),
             self.action_export),
            ("Breakpoints menu", "arm or disarm the conditions that stop a run", self.action_breakpoints),
            ("Jump to first non-finite buffer", "probes tab, first NaN/Inf in pipeline order",
             self.action_first_nonfinite),
            ("Show ranks", "inspector tab 1", lambda: self.action_tab(0)),
            ("Show selector", "inspector tab 2", lambda: self.action_tab(1)),
            ("Show probes", "inspector tab 3", lambda: self.action_tab(2)),
            ("Zoom inspector", "maximize / restore the inspector", self.action_maximize),
            ("Help", "keys and colours", self.action_help),
        ]
        for name, label in TOGGLES:
            state = "off" if getattr(self.armed, name) else "on"
            commands.append((f"Breakpoint: {label} → {state}", "toggle this breakpoint",
                             lambda name=name: self.toggle_breakpoint(name)))
        return commands

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for title, help_text, callback in self.palette_commands():
            yield SystemCommand(title, help_text, callback)
