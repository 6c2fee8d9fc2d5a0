"""The find keys of DebuggerApp: / asks what to find (token text or #id), n / N walk the
hits round by round and slot by slot, escape ends the search and brings back the status it
replaced. The hits come from dflash_tui/search.py over the session's history."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # numpy (search) loads after the first frame
    from ..search import Hit


@dataclass
class Searching:
    query: str
    hits: list["Hit"]
    index: int = 0
    shown: str = ""  # the status message the last hit set
    before: Optional[tuple] = None  # the status it replaced (kind, message, short): back when the search ends
    rows: int = 0  # the history's rounds when `hits` were found (a live session goes on)


class SearchActions:
    """A part of DebuggerApp (a mixin). The app holds the search in `searching` (a reactive:
    the key bar follows it), and the rounds, the slot and the status line a hit moves."""

    def action_search(self) -> None:
        previous = self.searching.query if self.searching is not None else ""
        self.main.ask("find:", self._search_answer, value=previous,
                      placeholder="token text, or #id · n / N next / previous · escape ends")

    def _search_answer(self, query: str) -> None:
        from ..search import first, search

        hits = search(self.history, query) if self.history is not None else []
        if not hits:
            self.action_end_search()
            if query.strip():
                self.notify(f"find {query!r}: not in any round so far", severity="warning")
            return
        # a new search starts at the round's first slot; n / N go on from the hit shown
        old = self.searching if self._showing_find() else Searching("", [])
        self.searching = Searching(query, hits, shown=old.shown, before=old.before,
                                   rows=len(self.history))
        self._show_hit(first(hits, self.current_round() or 0))

    def action_search_step(self, direction: int) -> None:
        from ..search import step

        s = self.searching
        if s is None:
            return
        self._search_rounds_since()
        hit = s.hits[s.index]
        slot = min(self.slot, self.record.gamma - 1) if self.record is not None else self.slot
        on_screen = self.current_round() == hit.round and slot == hit.shown_slot
        here = (self.current_round() or 0, self.slot)
        self._show_hit(step(s.hits, here, forward=direction > 0, at=s.index if on_screen else None))

    def _search_rounds_since(self) -> None:
        """A search made while the session runs finds in the rounds completed since, too: n
        and N search again when the history has grown (a match in the committed text may
        also start in an older round, so the hits are found anew, not appended), keeping the
        hit on screen as the one they step from."""
        s = self.searching
        if self.history is None or len(self.history) == s.rows:
            return
        from ..search import search

        hits = search(self.history, s.query)
        if not hits:
            return
        now = (s.hits[s.index].round, s.hits[s.index].slot)
        s.index = next((i for i, h in enumerate(hits) if (h.round, h.slot) == now),
                       min(s.index, len(hits) - 1))
        s.hits, s.rows = hits, len(self.history)

    def _show_hit(self, index: int) -> None:
        s = self.searching
        hit = s.hits[index]
        s.index = index
        if self.current_round() != hit.round and not self.go_to_round(hit.round):
            return
        gamma = self.record.gamma if self.record is not None else hit.shown_slot + 1
        self.slot = min(hit.shown_slot, gamma - 1)
        self.update_status_right()
        if not self._showing_find():
            s.before = (self.status.kind, self.status.message, self.status.short)
        s.shown = f"find {s.query!r}: round {hit.round} {hit.place} ({', '.join(hit.where)})"
        self.set_status("info", s.shown, transient=True)  # n walks them: one line in the log
        self.render_now()

    def _showing_find(self) -> bool:
        """The status line still says where the search's last hit is."""
        s = self.searching
        status = self.status
        return s is not None and bool(s.shown) and (status.kind, status.message) == ("info", s.shown)

    def action_end_search(self) -> None:
        # the status the search replaced comes back, unless something has replaced it since
        if self._showing_find():  # shown again, not logged again: the log has it
            self.status.set_status(*(self.searching.before or ("idle", "")))
        self.searching = None
        self.update_status_right()
