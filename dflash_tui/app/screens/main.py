"""The debugger screen: header, token stream / state / history on the left, the inspector
tabs (ranks, selector, probes, aggregates; compare with --compare) on the right, a status
line (or a question being asked there) and the key bar.

Laid out for 80 x 24 and up: the left column keeps a readable width and the inspector takes
the rest; on short terminals the state and history panels get compact. Panels are built
once and only ever updated in place (no remounts: no flicker).
"""

from __future__ import annotations

from typing import Callable, Optional

from textual.containers import Horizontal, Vertical
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import TabbedContent, TabPane

from ...panels.aggregates import AggregatesPanel
from ...panels.ask import AskLine
from ...panels.compare import ComparePanel
from ...panels.footer import KeyBar
from ...panels.header import HeaderPanel
from ...panels.history import HistoryPanel
from ...panels.probes import ProbesPanel
from ...panels.ranks import RanksPanel
from ...panels.selector import SelectorPanel
from ...panels.state import SHORT, StatePanel
from ...panels.table import FastTable
from ...panels.status import StatusLine
from ...panels.stream import TokenStream

class Inspector(TabbedContent):
    """The inspector tabs. A pane tells its TabbedContent it was focused with a message, and
    Textual makes it the active tab when that message arrives; but each widget's focus
    events run in its own queue, so after a burst of tab keys (3 4 2 1 3 in one read) a pane
    focused earlier could report last and take the tab back. A report from a pane that no
    longer holds the focus is old news: dropped (Textual runs a handler of each class in the
    MRO, so dropping it takes prevent_default)."""

    def _on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        focused = self.screen.focused
        if focused is None or event.tab_pane not in focused.ancestors_with_self:
            event.prevent_default()
            event.stop()


# (tab id, title, its short form, the widget that takes the focus on it). The short titles
# are used when the full ones do not fit the inspector's width (five tabs at 80 columns).
TABS = (
    ("tab-ranks", "1 Ranks", "1 Ranks", "#ranks-table"),
    ("tab-selector", "2 Selector", "2 Sel", "#selector-path"),
    ("tab-probes", "3 Probes", "3 Probes", "#probes-table"),
    ("tab-aggregates", "4 Aggregates", "4 Agg", "#aggregates"),
    ("tab-compare", "5 Compare", "5 Compare", "#compare-drift"),
)
COMPARE_TAB = 4  # shown only while the session on screen runs with --compare
TAB_PADDING = 2  # a tab's label has a space on each side


class MainScreen(Screen):
    DEFAULT_CSS = """
    MainScreen #body { height: 1fr; }
    MainScreen #left { width: 40%; min-width: 36; max-width: 72; }
    MainScreen #stream { height: 1fr; min-height: 3; }
    MainScreen #inspector { width: 1fr; }
    MainScreen #inspector TabPane { padding: 0; }
    /* a new prompt's prefill: the panels still show the session it replaces */
    MainScreen.-restarting #body { opacity: 45%; }
    /* zoomed: the inspector leaves the lines kept below it (ALLOW_IN_MAXIMIZED_VIEW) room */
    MainScreen.-maximized-view #inspector { height: 1fr; }
    /* notifications sit above the status line and the key bar (Textual's leave one line):
       at 80 columns a toast is 40 wide and hid a breakpoint's stop reason under it */
    MainScreen ToastRack { margin-bottom: 2; }
    """
    AUTO_FOCUS = "#ranks-table"
    # zoomed (m), the inspector keeps the status line, the question line and the keys: a
    # breakpoint's stop, a message, a question asked must not go unseen
    ALLOW_IN_MAXIMIZED_VIEW = "#status, #ask, #keys"
    # Textual repaints the whole screen when the focus moves (a second, full frame after a
    # tab switch's layout: a third of its time, and every cell sent to the terminal again).
    # What a focus change alters is redrawn without it: the widgets whose focus styles
    # change refresh themselves, and the key bar follows the bindings signal.
    focused: Reactive[Optional[Widget]] = Reactive(None, repaint=False)
    # Narrow screens stack what sits side by side on wide ones (the selector's candidates
    # and lattice need up to ~90 columns of inspector); short ones get compact panels.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (150, "-wide"), (210, "-widest")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (SHORT, "-tall")]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.compare_shown = True  # composed with the compare tab
        self._ask: Optional[AskLine] = None  # the question line, once composed

    def compose(self):
        yield HeaderPanel(id="header")
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield TokenStream(id="stream")
                yield StatePanel(id="state")
                yield HistoryPanel(id="history")
            with Inspector(id="inspector", initial=TABS[0][0]):
                for (tab, title, _, _), panel in zip(TABS, (
                        RanksPanel(id="ranks"), SelectorPanel(id="selector"),
                        ProbesPanel(id="probes"), AggregatesPanel(id="aggregates"),
                        ComparePanel(id="compare"))):
                    with TabPane(title, id=tab):
                        yield panel
        yield StatusLine(id="status")
        self._ask = AskLine(id="ask")
        yield self._ask
        # help and the way out of a search or a question stay whatever else is left out
        yield KeyBar(first=("step",), keep=("help", "end_search", "cancel"), id="keys")

    def on_mount(self) -> None:
        self.show_compare(self.app.compared())
        # after the first refresh every panel has composed its own children
        self.call_after_refresh(self.app.screen_ready)

    def on_screen_suspend(self) -> None:
        # a dialog, help or the palette over this screen: the key bar, still in sight under
        # the palette, no longer lists keys that go to the screen on top
        self.query_one("#keys", KeyBar).cover(True)

    def on_screen_resume(self) -> None:
        self.query_one("#keys", KeyBar).cover(False)

    def panels(self) -> list:
        """Every panel that renders a Frame, in screen order."""
        return [self.query_one(selector) for selector in
                ("#header", "#stream", "#state", "#history", "#ranks", "#selector", "#probes",
                 "#aggregates", "#compare")]

    def tab_panel(self, index: int):
        """The panel on inspector tab `index`."""
        return self.query_one(f"#{TABS[index][0].removeprefix('tab-')}")

    def show_compare(self, on: bool) -> None:
        """The compare tab is there while the session on screen runs with --compare."""
        if on == self.compare_shown:
            return
        self.compare_shown = on
        inspector = self.query_one("#inspector", TabbedContent)
        tab = TABS[COMPARE_TAB][0]
        if on:
            inspector.show_tab(tab)
        else:
            was_active = inspector.active == tab
            inspector.hide_tab(tab)  # Textual activates another tab if it was the active one
            if was_active:
                self.call_after_refresh(self.focus_tab)
        self.call_after_refresh(self.fit_tab_titles)

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit_tab_titles)
        self.app.check_size()
        # Compact panels follow the terminal's height: drawn again here, where the new size
        # is known (the app's own resize handler runs before Textual records the size).
        self.app.render_now()

    def fit_tab_titles(self) -> None:
        """Full titles where they fit the inspector's width, the short ones where not."""
        inspector = self.query_one("#inspector", TabbedContent)
        shown = [t for i, t in enumerate(TABS) if i != COMPARE_TAB or self.compare_shown]
        # the last tab's right padding may fall off the edge (four tabs at 80 columns do)
        width = sum(len(title) + TAB_PADDING for _, title, _, _ in shown) - 1
        fits = width <= inspector.size.width
        for tab, title, short, _ in TABS:
            label = title if fits else short
            if inspector.get_tab(tab).label_text != label:
                inspector.get_tab(tab).label = label

    def show_tab(self, index: int) -> None:
        tab, _, _, focus = TABS[index]
        inspector = self.query_one("#inspector", TabbedContent)
        if inspector.active == tab:
            return
        # Focus the new tab's table now, in the same step as the switch: the table being
        # hidden then has no focus to lose, so a switch moves the focus once, and a question
        # asked right after (F, a) keeps the focus it takes (a focus deferred to the next
        # frame took it back from the question). The tab first, then the focus: the panes
        # then ask for their layout before the tables restyled by the focus ask for a
        # repaint, so the first frame after the key is the new tab's (focus first, it was
        # a repaint of the old tab, and the new one came a frame, ~17 ms, later).
        inspector.active = tab
        self.set_focus(self.query_one(focus), scroll_visible=False)

    def scroll_inspector_columns(self, step: int) -> None:
        """Scroll the shown inspector tab's tables sideways by `step` columns (← and → move
        the round, so a table's own horizontal keys never reach it)."""
        inspector = self.query_one("#inspector", TabbedContent)
        for table in inspector.get_pane(inspector.active).query(FastTable):
            table.scroll_columns(step)

    def focus_tab(self) -> None:
        """Focus the active tab's table (after a tab switch, or a question answered)."""
        active = self.query_one("#inspector", TabbedContent).active
        focus = next(f for tab, _, _, f in TABS if tab == active)
        self.query_one(focus).focus()

    # ---- a question on the status line -----------------------------------------------------

    @property
    def asking(self) -> bool:
        # Asked for every binding each time the key bar recounts its keys (every focus
        # change): a DOM query here was a fifth of a tab switch's time. Before the screen
        # has composed there is no question line, so nobody is asked.
        return self._ask is not None and self._ask.asking

    def ask(self, label: str, answer: Callable[[str], None], value: str = "",
            placeholder: str = "") -> None:
        self.query_one(StatusLine).display = False
        self.query_one(AskLine).ask(label, answer, value, placeholder)

    def on_ask_line_closed(self, message: AskLine.Closed) -> None:
        self.query_one(StatusLine).display = True
        self.focus_tab()
