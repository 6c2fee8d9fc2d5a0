"""Ranks: per slot the proposal, the target's own token, and how the drafter rated it.

rank      drafter logits strictly above the target token's (0: the drafter's argmax)
p(tgt)    the drafter's probability of the target token
in K      DFlash2: the target token is among the selector's K candidates
Below the table: the drafter's and the target's top-5 for the selected slot. Slots after
the first rejection were drafted on a wrong prefix; they are shown dimmed.
"""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Static

from dflash_tui.engine.records import RoundRecord, SlotRank

from .format import DASH, grid, prob, score, token_text
from .frame import Frame
from .table import FastTable

COLUMNS = ("slot", "proposal", "target", "rank", "p(tgt)", "in K", "fate")


def rank_style(rank: int) -> str:
    return "bold green" if rank == 0 else "yellow" if rank < 5 else "bold red"


class RanksPanel(Vertical):
    DEFAULT_CSS = """
    RanksPanel { height: 1fr; }
    RanksPanel > FastTable { height: auto; max-height: 65%; }
    RanksPanel > Horizontal { height: 7; margin-top: 1; }
    RanksPanel > Horizontal > Static { width: 1fr; height: 7; padding: 0 1 0 0; }
    """

    class SlotSelected(Message):
        def __init__(self, slot: int) -> None:
            super().__init__()
            self.slot = slot

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._shown = False
        self._record: Optional[RoundRecord] = None
        self._slot = 0

    def compose(self):
        table = FastTable(id="ranks-table", grow_only=False)
        table.add_columns(*COLUMNS)
        yield table
        with Horizontal():
            yield Static(id="ranks-drafter-top")
            yield Static(id="ranks-target-top")

    @property
    def table(self) -> FastTable:
        return self.query_one("#ranks-table", FastTable)

    def show(self, frame: Frame) -> None:
        record = frame.record
        if self._shown and record is self._record and frame.slot == self._slot:
            return
        if not self._shown or record is not self._record:
            self._fill(record)
        self._shown, self._record, self._slot = True, record, frame.slot
        if record is not None and record.gamma:
            slot = min(frame.slot, record.gamma - 1)
            if self.table.cursor_row != slot:
                self.table.move_cursor(row=slot, animate=False)
        self._show_tops(record, frame.slot)

    def on_fast_table_row_highlighted(self, event: FastTable.RowHighlighted) -> None:
        event.stop()
        self.post_message(self.SlotSelected(event.cursor_row))

    def _fill(self, record: Optional[RoundRecord]) -> None:
        if record is None:
            self.table.set_rows([])
        elif record.proposals is None:
            # one placeholder row per slot: the table keeps its height through the round
            waiting = Text("…", style="dim")
            self.table.set_rows([[Text(str(s), style="dim")] + [waiting] * 6 for s in range(record.gamma)])
        else:
            ranks = {r.slot: r for r in record.ranks}
            self.table.set_rows(_row(record, slot, proposal, ranks.get(slot))
                                for slot, proposal in enumerate(record.proposals))

    def _show_tops(self, record: Optional[RoundRecord], slot: int) -> None:
        drafter = self.query_one("#ranks-drafter-top", Static)
        target = self.query_one("#ranks-target-top", Static)
        rank = None
        if record is not None:
            rank = next((r for r in record.ranks if r.slot == slot), None)
        # the top-5 box has a fixed height: updating it needs no layout pass
        if rank is None:
            waiting = "top-5 after verify" if record is not None else ""
            drafter.update(Text(waiting, style="dim"), layout=False)
            target.update("", layout=False)
            return
        drafter.update(_top_table(f"drafter, slot {slot}", record, rank.drafter_top,
                                  mark=rank.target, mark_label="◎"), layout=False)
        target.update(_top_table(f"target, row {slot}", record, rank.target_top,
                                 mark=rank.proposal, mark_label="●"), layout=False)


def _row(record: RoundRecord, slot: int, proposal: int, rank: Optional[SlotRank]) -> list:
    dim = "dim" if rank is not None and rank.after_rejection else ""
    cells = [Text(str(slot), style=dim), token_text(record.text(proposal), dim)]
    if rank is None:
        return cells + [Text("…", style="dim")] * 4 + [Text("pending", style="yellow")]
    if rank.accepted:
        fate = Text("✓ accepted", style="green")
    elif rank.after_rejection:
        fate = Text("· after reject", style="dim")
    else:
        fate = Text("✗ rejected", style="bold red")
    in_k = DASH if rank.in_candidates is None else ("yes" if rank.in_candidates else "no")
    return cells + [
        token_text(record.text(rank.target), dim),
        Text(str(rank.rank), style=dim or rank_style(rank.rank), justify="right"),
        Text(prob(rank.p_target), style=dim, justify="right"),
        Text(in_k, style=dim or ("" if rank.in_candidates in (None, True) else "red")),
        fate,
    ]


def _top_table(title: str, record: RoundRecord, top, mark: int, mark_label: str) -> Text:
    rows = []
    for t in top:
        marked = t.token == mark
        rows.append([token_text(record.text(t.token), "bold" if marked else "", width=10),
                     score(t.logit), prob(t.prob), mark_label if marked else ""])
    table = grid(rows, [10, 7, 5, 1], "lrrl", header=["token", "logit", "p", ""])
    return Text(title + "\n", style="bold") + table
