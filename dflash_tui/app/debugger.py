"""What the live app and replay share: the screen, rendering frames, the view keys (tabs,
slots, rounds, compare, aggregates range, probes sort and filter), help built from the key
bindings and the command palette. Its find keys (search_actions.py), export
(export_actions.py) and breakpoints (breakpoint_actions.py) are mixed in from their own
modules.

Rendering is coalesced: records may arrive faster than a terminal can draw (a tiny model
runs hundreds of stages a second), so at most one frame is drawn per RENDER_INTERVAL and it
always shows the latest record. A key that changes the view renders at once.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional

from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.content import Content
from textual.reactive import var
from textual.screen import Screen
from textual.worker import Worker

from ..breakpoints import Breakpoints, toggles
from ..engine.records import PrefillRecord, RoundRecord, SessionInfo
from ..panels.aggregates import range_text
from ..panels.compare import NO_REFERENCE, ComparePanel
from ..panels.frame import Frame
from ..panels.help import HelpScreen
from ..panels.history import HistoryPanel
from ..panels.probes import ProbesPanel
from ..panels.ranks import RanksPanel
from ..panels.selector import SelectorPanel
from ..panels.status import LOG_KEY, LOG_SIZE, Short, StatusLine, StatusLog
from ..panels.table import FastTable
from .breakpoint_actions import BreakpointActions
from .export_actions import ExportActions, ExportDone
from .screens.main import COMPARE_TAB, MainScreen
from .search_actions import SearchActions, Searching
from .session_dir import SessionDir
from .typed_keys import TypedKeys, typed

if TYPE_CHECKING:  # numpy (history) loads after the first frame
    from ..history import History

RENDER_INTERVAL = 0.05  # seconds: at most 20 frames a second while records stream in
RUN_RENDER_INTERVAL = 0.1  # during a run: leaves the UI thread idle enough to answer keys
MIN_SIZE = (80, 24)  # columns, rows: what every panel is laid out to fit (docs/TUI.md)

# Groups are the help screen's sections (in the order they first appear); a compact group
# shares one hint in the key bar ("← → round").
STEP = Binding.Group("step")
SESSION = Binding.Group("session")
ROUND_KEYS = Binding.Group("round", compact=True)
ROUNDS = Binding.Group("round")
VIEW = Binding.Group("view")
GENERAL = Binding.Group("general")
# Priority bindings act before the focused table sees the key: the keys that move through
# rounds (tables bind ←/→/home/end too), and those that move the focus (a tab, a question,
# a dialog). (Keys typed in one read keep their order whatever the binding: typed_keys.py.)
# They stand aside while a question or a dialog has the keyboard.
PRIORITY = {"round", "goto_first", "goto_last", "goto_round", "search", "tab", "help",
            "breakpoints", "probe_filter", "probe_sort", "probe_sort_reverse", "layer",
            "first_nonfinite", "aggregate_range", "prompt", "columns", "pin", "export"}
SEARCH_NEXT = Binding("n", "search_step(1)", "next hit", group=STEP,
                      tooltip="while searching: the next hit (round and slot)")


def one_row_per_key(rows: list[tuple[list[str], str]]) -> list[tuple[str, str]]:
    """A help section's rows, each key in one: a binding whose keys another row's include
    (or take in) joins that row, what it does while searching after the key's own meaning.
    `n` is the round, and while searching the next hit (SEARCH_NEXT): two rows of `n` read as
    two keys. Where the row has more keys (replay's `n space`), the joined text names its own."""
    joined: list[tuple[list[str], list[tuple[list[str], str]]]] = []
    for keys, text in rows:
        row = next((r for r in joined if set(keys) <= set(r[0]) or set(r[0]) <= set(keys)), None)
        if row is None:
            joined.append((keys, [(keys, text)]))
        else:
            joined[joined.index(row)] = (max(row[0], keys, key=len), row[1] + [(keys, text)])
    out = []
    for keys, parts in joined:
        parts.sort(key=lambda part: part[1].startswith("while searching"))
        out.append((" ".join(keys), "; ".join(text if own == keys else f"{' '.join(own)} {text}"
                                              for own, text in parts)))
    return out


class _EarlyStatus:
    """Keeps the status line's text until the screen is up (keys can arrive before)."""

    kind, message, short, parts = "idle", "", None, ()

    def set_status(self, kind: str, message: str, short: Optional[Short] = None) -> None:
        self.kind, self.message, self.short = kind, message, short

    def set_right(self, parts) -> None:
        self.parts = tuple(parts)

    @property
    def right(self) -> str:
        return "  ".join(full for full, _ in self.parts)


class DebuggerApp(SearchActions, ExportActions, BreakpointActions, App[int]):
    TITLE = "dflash-tui"
    # A search on: n / N walk its hits, escape ends it. The key bar follows (bindings=True:
    # nothing else moves it when a search ends, since the focus stays where it was).
    searching: var[Optional[Searching]] = var(None, bindings=True)
    ENABLE_COMMAND_PALETTE = True
    CSS = SelectorPanel.NARROW_CSS + HistoryPanel.SHORT_CSS + ComparePanel.NARROW_CSS
    # The subclasses list their own keys (stepping) first; these follow. Bindings with
    # show=True make the key bar, in this order, as far as the width allows; the help
    # screen lists them all, with their tooltips, grouped.
    BINDINGS = [
        Binding("left,h", "round(-1)", "previous round", key_display="←", group=ROUND_KEYS,
                priority=True, tooltip="the previous round (live: the session keeps running)"),
        Binding("right,l", "round(1)", "next round", key_display="→", group=ROUND_KEYS, priority=True,
                tooltip="the next round; past the last one, back to the live round"),
        Binding("home", "goto_first", "first round", show=False, priority=True, group=ROUNDS,
                tooltip="the first round"),
        Binding("end", "goto_last", "last round", show=False, priority=True, group=ROUNDS,
                tooltip="live: back to the live round; replay: the last round"),
        Binding("g", "goto_round", "go to round", show=False, priority=True, group=ROUNDS,
                tooltip="go to round N (asks for N)"),
        Binding("slash", "search", "find", priority=True, group=ROUNDS,
                tooltip="find token text or #id in the committed text, proposals and target "
                "tokens of every round; then n / N next / previous hit, escape ends the search "
                "(n steps rounds again)"),
        Binding("N", "search_step(-1)", "previous hit", show=False, group=ROUNDS,
                tooltip="while searching: the previous hit"),
        # shown while searching only (check_action): the key bar's way out of a search
        Binding("escape", "end_search", "end search", group=ROUNDS,
                tooltip="while searching: end it"),
        Binding("P", "pin", "pin", group=ROUNDS, priority=True,
                tooltip="pin the round on screen: ranks, selector and probes then show it beside "
                "any other round, differences marked; P on it unpins"),
        Binding("question_mark,f1", "help", "help", priority=True, group=GENERAL,
                tooltip="this help (f1 also while a question is open, where ? is typed)"),
        Binding("q", "quit", "quit", group=GENERAL, tooltip="quit (at once, even mid-stage)"),
        Binding("b", "breakpoints", "breaks", priority=True, group=GENERAL,
                tooltip="breakpoints menu"),
        Binding("x", "export", "export", group=GENERAL, priority=True,
                tooltip="export the round on screen (JSON, + NPZ when on) into this session's "
                "directory"),
        Binding(LOG_KEY, "messages", "messages", show=False, group=GENERAL,
                tooltip=f"message log: the last {LOG_SIZE} status messages and notifications, whole "
                "(a message too long for the status line ends in … [L])"),
        Binding("1", "tab(0)", "ranks", show=False, priority=True, group=VIEW,
                tooltip="inspector tab: ranks"),
        Binding("2", "tab(1)", "selector", show=False, priority=True, group=VIEW,
                tooltip="inspector tab: selector"),
        Binding("3", "tab(2)", "probes", show=False, priority=True, group=VIEW,
                tooltip="inspector tab: probes"),
        Binding("4", "tab(3)", "aggregates", show=False, priority=True, group=VIEW,
                tooltip="inspector tab: aggregates over every round (or a range)"),
        Binding("5", "tab(4)", "compare", show=False, priority=True, group=VIEW,
                tooltip="inspector tab: the reference configuration beside the drafter "
                "(with --compare SPEC): slots side by side, the drift of every buffer"),
        Binding("comma", "slot(-1)", "slot -", show=False, group=VIEW,
                tooltip="previous proposal slot (ranks, selector, top-5, lattice, aggregates)"),
        Binding("full_stop", "slot(1)", "slot +", show=False, group=VIEW,
                tooltip="next proposal slot"),
        Binding("a", "aggregate_range", "range", show=False, priority=True, group=VIEW,
                tooltip="aggregates: the rounds they cover (e.g. 100-200; empty: all)"),
        Binding("left_square_bracket", "layer(-1)", "layer -", show=False, priority=True,
                group=VIEW,
                tooltip="probes: previous layer filter (all, no layer, 0, 1, ...)"),
        Binding("right_square_bracket", "layer(1)", "layer +", show=False, priority=True,
                group=VIEW,
                tooltip="probes: next layer filter"),
        Binding("F", "probe_filter", "filter", show=False, priority=True, group=VIEW,
                tooltip="probes: keep only rows matching words: nonfinite, fp16<N, or text in the name"),
        Binding("o", "probe_sort", "sort", show=False, priority=True, group=VIEW,
                tooltip="probes: sort by the next column (pipeline order first); click a header too"),
        Binding("O", "probe_sort_reverse", "reverse", show=False, priority=True, group=VIEW,
                tooltip="probes: reverse the sort"),
        Binding("f", "first_nonfinite", "first NaN", show=False, priority=True, group=VIEW,
                tooltip="probes: jump to the first non-finite buffer in pipeline order"),
        Binding("m", "maximize", "zoom", show=False, group=VIEW,
                tooltip="zoom the inspector (m or escape again to restore)"),
        Binding("less_than_sign", "columns(-1)", "columns ◂", show=False, priority=True, group=VIEW,
                tooltip="inspector: its tables' columns one to the left (the first, naming the row, stay)"),
        Binding("greater_than_sign", "columns(1)", "columns ▸", show=False, priority=True, group=VIEW,
                tooltip="inspector: its tables' columns one to the right (at 80 columns the last "
                "ones are off screen)"),
    ]

    # Messages that come of time or of other threads, not of keys: a key typed after another
    # need not wait for them (typed_keys.py). Subclasses add their threads' messages.
    BACKGROUND_MESSAGES: tuple[type, ...] = (Worker.StateChanged, ExportDone)

    def __init__(self, *, export_dir: Path = Path("dflash-snapshots"), show_timings: bool = True,
                 armed: Breakpoints = Breakpoints()) -> None:
        super().__init__()
        self.typed_keys = TypedKeys(self, self.take_typed, ready=lambda: bool(self._panels),
                                    background=self.BACKGROUND_MESSAGES)
        # No animations (tab underline slides, smooth scrolls): every frame they add is CPU
        # taken from answering keys, and a debugger's screen should change at once.
        self.animation_level = "none"
        self.export_dir = Path(export_dir)
        self.session_dir = SessionDir(self.export_dir)
        self.show_timings = show_timings
        self.armed = armed
        self.npz = False
        # what is on screen
        self.info: Optional[SessionInfo] = None
        self.prefill: Optional[PrefillRecord] = None
        self.record: Optional[RoundRecord] = None
        self.history: Optional["History"] = None  # the session's rounds, once it has one
        self.reference_history: Optional["History"] = None  # --compare: the reference's side
        self.text_before = ""
        self.slot = 0
        self.mode = "live"
        self.round_label = ""
        self.gamma_next: Optional[int] = None
        self.pinned: Optional[RoundRecord] = None
        self.aggregate_rounds: Optional[tuple[Optional[int], Optional[int]]] = None
        self._panels: list = []
        self._status = _EarlyStatus()
        self.status_log = StatusLog()  # every message, whole (L shows them)
        self._small = False  # the terminal is below MIN_SIZE (said once per time it gets so)
        self._last_render = 0.0
        self._drawn: Optional[Frame] = None  # the frame the panels show
        self._render_pending = False

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
        self._status.set_status(early.kind, early.message, early.short)
        self.update_status_right()
        self.render_now()
        self.check_size()
        self.call_later(self.typed_keys.go_on)  # the keys typed before the screen was up

    # ---- keys ----------------------------------------------------------------------------

    async def on_event(self, event: events.Event) -> None:
        if typed(event):  # a key or a paste: routed in its turn (typed_keys.py)
            await self.typed_keys.arrived(event)
            return
        await super().on_event(event)

    async def take_typed(self, event: events.Event) -> None:
        """Route a key or paste from the terminal, now that the keys before it have done
        their work: priority bindings, else the focused widget (Textual's routing)."""
        await super().on_event(event)

    def check_size(self) -> None:
        """Say once, on becoming too small, why panels are cut (below MIN_SIZE nothing is
        laid out to fit). The main screen calls this on its resize (the app's own comes
        before Textual's debounce)."""
        width, height = self.size
        small = width < MIN_SIZE[0] or height < MIN_SIZE[1]
        if small and not self._small:
            self.notify(f"the terminal is {width}×{height}: dflash-tui is laid out for "
                        f"{MIN_SIZE[0]}×{MIN_SIZE[1]} or more", severity="warning", timeout=8)
        self._small = small

    # ---- frames --------------------------------------------------------------------------

    def upto(self) -> int:
        """History rows up to the round on screen (the header and history show those)."""
        return len(self.history) if self.history is not None else 0

    def live_where(self) -> str:
        """Live, looking at an earlier round: where the session is. Else empty."""
        return ""

    def frame(self) -> Frame:
        slot = self.slot
        if self.record is not None and self.record.gamma:
            slot = min(slot, self.record.gamma - 1)
        pinned = self.pinned
        live = self.live_where()
        return Frame(info=self.info, prefill=self.prefill, record=self.record,
                     history=self.history, upto=self.upto(), text_before=self.text_before,
                     reference_history=self.reference_history,
                     slot=slot, mode=self.mode, round_label=self.round_label,
                     # An earlier round ran at its own γ: the γ set now is for the next round,
                     # not a change pending for that one.
                     live=live, gamma_next=None if live else self.gamma_next,
                     other=pinned, other_label=f"r{pinned.round}" if pinned is not None else "",
                     aggregate_rounds=self.aggregate_rounds, reading=self.reading(),
                     show_timings=self.show_timings)

    def reading(self) -> Optional[tuple[int, int]]:
        """Replay: (rounds read, rounds in all) while its history is still being filled."""
        return None

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
        frame = self._drawn = self.frame()
        with self.batch_update():
            self.main.show_compare(self.compared())
            for panel in self._panels:
                panel.show(frame)

    # ---- status --------------------------------------------------------------------------

    def set_status(self, kind: str, message: str, transient: bool = False,
                   short: Optional[Short] = None) -> None:
        """transient: a position the next message replaces in the log (it shows it all the
        same). short: the line's form where the message does not fit (panels/status.py)."""
        self.status_log.add(kind, message, transient=transient)
        self.status.set_status(kind, message, short)

    def notify(self, message: str, *, title: str = "", severity="information",
               timeout: Optional[float] = None, markup: bool = False, log: bool = True) -> None:
        """A notification goes away: the message log keeps it (log=False: one that repeats
        the status line just set, which the log already has). Plain text by default: the
        messages carry what the user typed and what loaders said (`find '[/x]'`, mlx's
        `[load_safetensors] ...`), which Textual's markup would drop or, at a stray closing
        tag, crash the app on."""
        if log:  # the log shows text as it is: a message in markup goes in as its words
            words = Content.from_markup(message).plain if markup else message
            self.status_log.add("info" if severity == "information" else severity,
                                f"{title}: {words}" if title else words)
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)
        # Textual can leave an expired toast's cells on the terminal where nothing under it
        # changed (seen over the aggregates tab and the status line): once it is gone, one
        # full repaint clears them.
        shown = self.NOTIFICATION_TIMEOUT if timeout is None else timeout
        self.set_timer(shown + 0.1, self._repaint_after_toast)

    def _repaint_after_toast(self) -> None:
        if self.screen is not None:
            self.screen.refresh()

    def action_help_quit(self) -> None:
        """ctrl+c: Textual's hint of how to quit, which it writes in markup (notify here is
        plain text)."""
        for key, active in self.active_bindings.items():
            if active.binding.action in ("quit", "app.quit"):
                self.notify(f"Press [b]{key}[/b] to quit the app", title="Do you want to quit?",
                            markup=True)
                return

    def action_messages(self) -> None:
        from ..panels.messages import MessagesScreen  # first use: off the first frame

        if self.screen is self.main:
            self.push_screen(MessagesScreen(self.status_log))

    def status_right(self) -> list[tuple[str, str]]:
        """(full, short) parts for the right of the status line, most important first."""
        parts = []
        if self.searching is not None:
            s = self.searching
            parts.append((f"find {s.query!r} {s.index + 1}/{len(s.hits)} · n N · esc",
                          f"{s.index + 1}/{len(s.hits)} n N esc"))
        parts.append((f"breaks: {self.armed.describe()}", f"⚑ {self.armed.describe()}"))
        where = self.files_where()
        parts.append((f"files → {where}" + (" +npz" if self.npz else ""),
                      f"→ …/{Path(where).name}/" + ("+npz" if self.npz else "")))
        return parts

    def files_where(self) -> str:
        """Where this session's files go, as shown."""
        if self.session_dir.created:
            return f"{self.session_dir.path}/"
        return f"{self.export_dir}/"

    def update_status_right(self) -> None:
        self.status.set_right(self.status_right())

    # ---- inspector ----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action in ("search_step", "end_search"):
            return self.searching is not None
        if action in PRIORITY:
            # a dialog or the question line has the keyboard: arrows and home/end are theirs
            return self.screen is self.main and not self.main.asking
        return True

    def compared(self) -> bool:
        """The session on screen runs a reference configuration beside the drafter (--compare)."""
        return self.info is not None and self.info.compare is not None

    def action_tab(self, index: int) -> None:
        if index == COMPARE_TAB and not self.compared():
            self.notify(NO_REFERENCE + " (docs/COMPARE.md)", severity="warning")
            return
        self.main.show_tab(index)
        # The aggregates and compare tabs draw only while shown: the tab shown draws now, the
        # frame the other panels show. Records that came since are drawn at the next frame,
        # as they would have been, so a switch during a run repaints the inspector alone.
        if self.can_draw():
            self.main.tab_panel(index).show(self._drawn if self._drawn is not None else self.frame())

    def action_slot(self, step: int) -> None:
        gamma = self.record.gamma if self.record is not None else 0
        if gamma:
            self.slot = max(0, min(gamma - 1, min(self.slot, gamma - 1) + step))
            self.render_now()

    def on_ranks_panel_slot_selected(self, message: RanksPanel.SlotSelected) -> None:
        if message.slot != self.slot and message.slot >= 0:
            self.slot = message.slot
            self.render_now()

    def action_columns(self, step: int) -> None:
        self.main.scroll_inspector_columns(step)

    def action_layer(self, step: int) -> None:
        self.main.show_tab(2)
        probes = self.main.query_one(ProbesPanel)
        probes.cycle_layer(step)
        self.set_status("info", probes.describe("layer"))

    def action_first_nonfinite(self) -> None:
        self.main.show_tab(2)
        row = self.main.query_one(ProbesPanel).jump_to_first_nonfinite()
        if row is None:
            self.notify("no non-finite buffer in the round on screen")

    def action_probe_filter(self) -> None:
        self.main.show_tab(2)
        probes = self.main.query_one(ProbesPanel)
        self.main.ask("filter probes:", self._set_probe_filter, value=str(probes.filter),
                      placeholder="nonfinite  fp16<4  attn  (words; empty: every row)")

    def _set_probe_filter(self, text: str) -> None:
        probes = self.main.query_one(ProbesPanel)
        probes.set_filter(text)
        self.set_status("info", probes.describe("filter"))

    def action_probe_sort(self) -> None:
        self.main.show_tab(2)
        probes = self.main.query_one(ProbesPanel)
        probes.next_sort()
        self.set_status("info", probes.describe("sort"))

    def action_probe_sort_reverse(self) -> None:
        self.main.show_tab(2)
        probes = self.main.query_one(ProbesPanel)
        probes.sort_by(probes.sort_column, reverse=not probes.sort_reverse)
        self.set_status("info", probes.describe("sort"))

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
            self.install_screen(HelpScreen(self.help_sections()), name="help")
        self.push_screen("help")

    def help_sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """The keys of this app and of its tables, from their bindings: one row per action
        with all its keys, the tooltip (or description) as the text, sections by group."""
        rows: dict[tuple, list] = {}
        # a table's key that the app binds with priority never reaches the table (← → move
        # the round): leave it out rather than list a scroll that never happens
        taken = {key for key, binding in self._bindings if binding.priority}
        for bindings, where in ((self._bindings, "app"), (FastTable._merge_bindings(), "tables")):
            for key, binding in bindings:
                if binding.system or not (binding.tooltip or binding.description):
                    continue
                if where == "tables" and key in taken:
                    continue
                text = binding.tooltip or binding.description
                row = rows.setdefault((where, binding.action, text), [[], binding])
                display = self.get_key_display(replace(binding, key_display=None))
                if display not in row[0]:
                    row[0].append(display)
        sections: dict[str, list[tuple[list[str], str]]] = {}
        for (where, _, text), (keys, binding) in rows.items():
            section = binding.group.description if binding.group else where
            sections.setdefault(section, []).append((keys, text))
        return [(section, one_row_per_key(keyed)) for section, keyed in sections.items()]

    # ---- rounds --------------------------------------------------------------------------

    def current_round(self) -> Optional[int]:
        return self.record.round if self.record is not None else None

    def go_to_round(self, number: Optional[int]) -> bool:
        """Show round `number` (None: the live round, or the last one); False if it cannot."""
        raise NotImplementedError

    def round_bounds(self) -> Optional[tuple[int, int]]:
        """The first and last round that can be shown."""
        raise NotImplementedError

    def action_round(self, step: int) -> None:
        current, bounds = self.current_round(), self.round_bounds()
        if current is None or bounds is None:
            return
        target = current + step
        if not bounds[0] <= target <= bounds[1]:
            self.bell()
            return
        self.go_to_round(target)

    def action_goto_first(self) -> None:
        bounds = self.round_bounds()
        if bounds is not None:
            self.go_to_round(bounds[0])

    def action_goto_last(self) -> None:
        self.go_to_round(None)

    def action_goto_round(self) -> None:
        bounds = self.round_bounds()
        if bounds is None:
            self.notify("no round to go to yet", severity="warning")
            return
        self.main.ask("go to round:", self._goto_answer, placeholder=f"{bounds[0]}–{bounds[1]}")

    def _goto_answer(self, text: str) -> None:
        bounds = self.round_bounds()
        try:
            number = int(text.strip())
        except ValueError:
            self.notify(f"go to round: {text!r} is not a round number", severity="warning")
            return
        if bounds is None or not bounds[0] <= number <= bounds[1]:
            self.notify(f"go to round: {number} is outside {bounds[0]}–{bounds[1]}", severity="warning")
            return
        self.go_to_round(number)

    # ---- compare and aggregates --------------------------------------------------------------

    def action_pin(self) -> None:
        record = self.record
        if record is None:
            self.notify("nothing to pin yet: step a round first", severity="warning")
            return
        # the header says what is pinned ("vs r3"); the tables add its columns
        before = self.pinned
        self.pinned = None if before is not None and before.round == record.round else record
        if self.pinned is None:
            self.set_status("info", f"unpinned round {record.round}")
        else:
            self.set_status("info", f"pinned round {record.round}"
                            + (f" (was round {before.round})" if before is not None else "")
                            + f": shown beside other rounds (vs r{record.round}) · P on it unpins")
        self.render_now()

    def action_aggregate_range(self) -> None:
        self.main.show_tab(3)
        value = "" if self.aggregate_rounds is None else range_text(self.aggregate_rounds, "-")
        self.main.ask("aggregate rounds:", self._set_aggregate_range, value=value,
                      placeholder="A-B, A- (from A on), -B (up to B); empty: every round")

    def _set_aggregate_range(self, text: str) -> None:
        match = re.fullmatch(r"\s*(\d*)\s*(?:[-–:]\s*(\d*))?\s*", text)
        if match is None:
            self.notify(f"aggregate rounds: {text!r}: expected A-B, A- or -B", severity="warning")
            return
        first, last = match.group(1), match.group(2) if match.group(2) is not None else match.group(1)
        if not first and not last:
            self.aggregate_rounds = None
        elif first and last and int(first) > int(last):
            self.notify(f"aggregate rounds: {text.strip()}: the first round is after the last "
                        f"(meant {last}-{first}?)", severity="warning")
            return
        else:
            # an open end stays open (None), and so reads back as the user wrote it
            self.aggregate_rounds = (int(first) if first else None, int(last) if last else None)
        self.render_now()

    # ---- command palette ------------------------------------------------------------------

    def palette_commands(self) -> list[tuple[str, str, object]]:
        commands = [
            ("Export round", "write the round on screen as JSON (+NPZ) to " + self.files_where(),
             self.action_export),
            ("Go to round", "asks for a round number", self.action_goto_round),
            ("Find token", "text or #id in every round; n / N next / previous hit", self.action_search),
            ("Pin round", "compare other rounds with the one on screen (P)", self.action_pin),
            ("Aggregate range", "the rounds the aggregates tab covers", self.action_aggregate_range),
            ("Filter probes", "nonfinite, fp16<N, or text in the buffer name", self.action_probe_filter),
            ("Sort probes", "by the next column (o; O reverses)", self.action_probe_sort),
            ("Breakpoints menu", "arm or disarm the conditions that stop a run", self.action_breakpoints),
            ("Jump to first non-finite buffer", "probes tab, first NaN/Inf in pipeline order",
             self.action_first_nonfinite),
            ("Show ranks", "inspector tab 1", lambda: self.action_tab(0)),
            ("Show selector", "inspector tab 2", lambda: self.action_tab(1)),
            ("Show probes", "inspector tab 3", lambda: self.action_tab(2)),
            ("Show aggregates", "inspector tab 4", lambda: self.action_tab(3)),
            ("Show compare", "inspector tab 5: the reference configuration (--compare)",
             lambda: self.action_tab(COMPARE_TAB)),
            ("Zoom inspector", "maximize / restore the inspector", self.action_maximize),
            ("Help", "keys and colours", self.action_help),
            ("Message log", f"the last status messages, whole ({LOG_KEY})", self.action_messages),
        ]
        for name, label in toggles(self.compared()):
            armed = getattr(self.armed, name)
            commands.append((f"{'Disarm' if armed else 'Arm'} breakpoint: {label}",
                             f"now {'armed' if armed else 'off'}; toggles it",
                             lambda name=name: self.toggle_breakpoint(name)))
        return commands

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for title, help_text, callback in self.palette_commands():
            yield SystemCommand(title, help_text, callback)
