"""The debugger screen: header, token stream / state / history on the left, the inspector
tabs (ranks, selector, probes) on the right, a status line and the footer.

Laid out for 100x30 and up: the left column keeps a readable width and the inspector takes
the rest. Panels are built once and only ever updated in place (no remounts: no flicker).
"""

from __future__ import annotations

from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import TabbedContent, TabPane

from ...panels.footer import KeyBar
from ...panels.header import HeaderPanel
from ...panels.history import HistoryPanel
from ...panels.probes import ProbesPanel
from ...panels.ranks import RanksPanel
from ...panels.selector import SelectorPanel
from ...panels.state import StatePanel
from ...panels.status import StatusLine
from ...panels.stream import TokenStream

TABS = ("tab-ranks", "tab-selector", "tab-probes")


class MainScreen(Screen):
    DEFAULT_CSS = """
    MainScreen #body { height: 1fr; }
    MainScreen #left { width: 40%; min-width: 36; max-width: 72; }
    MainScreen #stream { height: 1fr; min-height: 4; }
    MainScreen #inspector { width: 1fr; }
    MainScreen #inspector TabPane { padding: 0; }
    """
    AUTO_FOCUS = "#ranks-table"
    # Narrow screens stack what sits side by side on wide ones (the selector's candidates
    # and lattice need up to ~90 columns of inspector).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (150, "-wide")]

    def compose(self):
        yield HeaderPanel(id="header")
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield TokenStream(id="stream")
                yield StatePanel(id="state")
                yield HistoryPanel(id="history")
            with TabbedContent(id="inspector", initial=TABS[0]):
                with TabPane("1 Ranks", id=TABS[0]):
                    yield RanksPanel(id="ranks")
                with TabPane("2 Selector", id=TABS[1]):
                    yield SelectorPanel(id="selector")
                with TabPane("3 Probes", id=TABS[2]):
                    yield ProbesPanel(id="probes")
        yield StatusLine(id="status")
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        # after the first refresh every panel has composed its own children
        self.call_after_refresh(self.app.screen_ready)

    def panels(self) -> list:
        """Every panel that renders a Frame, in screen order."""
        return [self.query_one(selector) for selector in
                ("#header", "#stream", "#state", "#history", "#ranks", "#selector", "#probes")]

    def show_tab(self, index: int) -> None:
        self.query_one("#inspector", TabbedContent).active = TABS[index]
        table = {0: "#ranks-table", 1: "#selector-path", 2: "#probes-table"}[index]
        self.query_one(table).focus()

    def active_tab(self) -> int:
        return TABS.index(self.query_one("#inspector", TabbedContent).active)
