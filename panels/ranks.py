"""Ranks: per slot the proposal, the target's own token, and how the drafter rated it.

rank      drafter logits strictly above the target token's (0: the drafter's argmax;
          n/f where the slot's logits held a NaN or Inf: no rank)
p(tgt)    the drafter's probability of the target token
in K      DFlash2: the target token is among the selector's K candidates
Below the table: the drafter's and the target's top-5 for the selected slot (the drafter's
reads n/f where its logits held a NaN or Inf). Slots after the first rejection were drafted
on a wrong prefix; they are shown dimmed. Above it, only
when the drafter's logits held a NaN or Inf (the engine checks every round, probes on or
off), a line naming the slots: their proposals and ranks are then noise.

With another round beside it (a pinned one, frame.other), the table adds that round's
proposal, rank and fate per slot; cells that differ from the round on screen are marked.
"""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Static

from dflash_tui.breakpoints import slot_spans
from dflash_tui.engine.records import RoundRecord, SlotRank

from .format import DASH, NONFINITE, NONFINITE_LOGITS, column, grid, prob, token_text
from .frame import Frame
from .table import FastTable

COLUMNS = ("slot", "proposal", "target", "rank", "p(tgt)", "in K", "fate")
DIFFERS = "bold black on magenta"  # a cell of the other round that differs from this one's
TOP_WIDE = 26  # characters the top-5 table needs with its p column


def rank_style(rank: int) -> str:
    return "bold green" if rank == 0 else "yellow" if rank < 5 else "bold red"


class RanksPanel(Vertical):
    DEFAULT_CSS = """
    RanksPanel { height: 1fr; }
    RanksPanel > #ranks-note {
        height: 1; padding: 0 1; display: none; text-wrap: nowrap; text-overflow: ellipsis;
    }
    RanksPanel > FastTable { height: auto; max-height: 65%; }
    RanksPanel > Horizontal { height: 7; margin-top: 1; }
    RanksPanel > Horizontal > Static {
        width: 1fr; height: 7; padding: 0 1 0 0; text-wrap: nowrap; text-overflow: ellipsis;
    }
    """

    class SlotSelected(Message):
        def __init__(self, slot: int) -> None:
            super().__init__()
            self.slot = slot

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._shown: Optional[tuple] = None  # (record, other) on screen
        self._slot = 0
        self._tops: Optional[tuple] = None  # (record, slot, width) the top-5 lists show

    def compose(self):
        yield Static(id="ranks-note")
        table = FastTable(id="ranks-table", grow_only=False, frozen=1)
        table.add_columns(*COLUMNS)
        yield table
        with Horizontal():
            yield Static(id="ranks-drafter-top")
            yield Static(id="ranks-target-top")

    @property
    def table(self) -> FastTable:
        return self.query_one("#ranks-table", FastTable)

    def show(self, frame: Frame) -> None:
        record, other = frame.record, frame.other
        shown = (record, other)
        if self._shown is not None and all(a is b for a, b in zip(shown, self._shown)) \
                and frame.slot == self._slot:
            return
        if self._shown is None or not all(a is b for a, b in zip(shown, self._shown)):
            self._fill(record, other, frame.other_label)
            self._show_note(record)
        self._shown, self._slot = shown, frame.slot
        slot = min(frame.slot, record.gamma - 1) if record is not None and record.gamma else None
        if slot is not None and self.table.cursor_row != slot:
            self.table.move_cursor(row=slot, animate=False)
        self._show_tops(record, frame.slot)

    def on_fast_table_row_highlighted(self, event: FastTable.RowHighlighted) -> None:
        event.stop()
        self.post_message(self.SlotSelected(event.cursor_row))

    def on_resize(self) -> None:
        # the top-5 lists fit their width (a hidden tab has none: drawn again once shown;
        # shown again at the width they were drawn for, they are left as they are: redrawn
        # they cost a second frame after a tab switch)
        if self._shown is not None:
            self._show_tops(self._shown[0], self._slot)

    def _fill(self, record: Optional[RoundRecord], other: Optional[RoundRecord], label: str) -> None:
        table = self.table
        extra = (f"{label} proposal", f"{label} rank", f"{label} fate") if other is not None else ()
        if table.labels != COLUMNS + extra:
            table.add_columns(*COLUMNS, *extra)
        if record is None:
            table.set_rows([])
        elif record.proposals is None:
            # one placeholder row per slot: the table keeps its height through the round
            waiting = Text("…", style="dim")
            table.set_rows([[Text(str(s), style="dim")] + [waiting] * (len(COLUMNS) - 1 + len(extra))
                            for s in range(record.gamma)])
        else:
            ranks = {r.slot: r for r in record.ranks}
            theirs = {r.slot: r for r in other.ranks} if other is not None else {}
            rows = []
            for slot, proposal in enumerate(record.proposals):
                row = _row(record, slot, proposal, ranks.get(slot))
                if other is not None:
                    row += _other_cells(record, other, slot, ranks.get(slot), theirs.get(slot))
                rows.append(row)
            table.set_rows(rows)

    def _show_note(self, record: Optional[RoundRecord]) -> None:
        note = self.query_one("#ranks-note", Static)
        text = nonfinite_note(record)
        if text:
            note.update(Text(text, style="bold red"))
        note.display = bool(text)

    def _show_tops(self, record: Optional[RoundRecord], slot: int) -> None:
        drafter = self.query_one("#ranks-drafter-top", Static)
        target = self.query_one("#ranks-target-top", Static)
        drawn = (record, slot, drafter.content_size.width)
        if self._tops is not None and drawn[0] is self._tops[0] and drawn[1:] == self._tops[1:]:
            return  # records are never changed in place: the same one draws the same
        self._tops = drawn
        rank = None
        if record is not None:
            rank = next((r for r in record.ranks if r.slot == slot), None)
        # the top-5 box has a fixed height: updating it needs no layout pass
        if rank is None:
            waiting = "top-5 after verify" if record is not None else ""
            drafter.update(Text(waiting, style="dim"), layout=False)
            target.update("", layout=False)
            return
        room = drafter.content_size.width or TOP_WIDE  # no width yet: laid out on resize
        title = f"drafter, slot {slot}"
        if logits_nonfinite_at(record.nonfinite_logit_slots, slot):
            # what NaN logits rank first is noise (its rank and in K read n/f too)
            drafter.update(Text(title + "\n", style="bold", no_wrap=True, overflow="ellipsis")
                           + Text(NONFINITE_LOGITS, style="bold red"), layout=False)
        else:
            drafter.update(_top_table(title, record, rank.drafter_top,
                                      mark=rank.target, mark_label="◎", room=room), layout=False)
        target.update(_top_table(f"target, row {slot}", record, rank.target_top,
                                 mark=rank.proposal, mark_label="●", room=room), layout=False)


def rank_text(rank: int, style: str, nonfinite: bool) -> Text:
    """A slot's rank, or n/f where its logits held a NaN or Inf (the record's
    nonfinite_logit_slots): rank_of puts the target's token last there, vocabulary - 1,
    which read like a real rank."""
    if nonfinite:
        return Text(NONFINITE, style="bold red", justify="right")
    return Text(str(rank), style=style, justify="right")


def logits_nonfinite_at(slots: Optional[tuple[int, ...]], slot: int) -> bool:
    """`slot` is among a record's non-finite logit slots (None: recorded before the check)."""
    return slots is not None and slot in slots


def nonfinite_note(record: Optional[RoundRecord]) -> str:
    """`✗ drafter logits NaN/Inf: slots 0–14`, or "" when they were finite (or not yet
    drafted, or recorded before the engine checked). Where a probe found a buffer non-finite
    before the logits (a target's NaN reaches the drafter through the context capture), the
    note names it: `✗ drafter logits NaN/Inf: slots 0–14, after context capture`."""
    bad = record.nonfinite_logit_slots if record is not None else None
    if not bad:
        return ""
    note = f"✗ drafter logits NaN/Inf: {slot_spans(bad)}"
    first = record.first_nonfinite
    if first is not None and first.where != "draft logits":
        note += f", after {first.where}"
    return note


def _fate(rank: Optional[SlotRank]) -> Text:
    if rank is None:
        return Text("pending", style="yellow")
    if rank.accepted:
        return Text("✓ accepted", style="green")
    if rank.after_rejection:
        return Text("· after reject", style="dim")
    return Text("✗ rejected", style="bold red")


def _row(record: RoundRecord, slot: int, proposal: int, rank: Optional[SlotRank]) -> list:
    dim = "dim" if rank is not None and rank.after_rejection else ""
    cells = [Text(str(slot), style=dim), token_text(record.text(proposal), dim)]
    if rank is None:
        return cells + [Text("…", style="dim")] * 4 + [_fate(None)]
    bad = logits_nonfinite_at(record.nonfinite_logit_slots, slot)
    if bad:  # candidates drawn from NaN logits are noise: tab 4 leaves them out of in K too
        in_k = Text(NONFINITE, style="bold red")
    else:
        in_k = Text(DASH if rank.in_candidates is None else ("yes" if rank.in_candidates else "no"),
                    style=dim or ("" if rank.in_candidates in (None, True) else "red"))
    return cells + [
        token_text(record.text(rank.target), dim),
        rank_text(rank.rank, dim or rank_style(rank.rank), bad),
        Text(prob(rank.p_target), style=dim, justify="right"),
        in_k,
        _fate(rank),
    ]


def _other_cells(record: RoundRecord, other: RoundRecord, slot: int, mine: Optional[SlotRank],
                 theirs: Optional[SlotRank]) -> list:
    """The other round's proposal, rank and fate at this slot; what differs is marked."""
    if other.proposals is None or slot >= len(other.proposals):
        return [Text(DASH, style="dim")] * 3
    proposal = other.proposals[slot]
    same_token = record.proposals is not None and proposal == record.proposals[slot]
    cells = [token_text(other.text(proposal), "" if same_token else DIFFERS)]
    if theirs is None:
        return cells + [Text("…", style="dim"), _fate(None)]
    same_rank = mine is not None and mine.rank == theirs.rank
    fate = _fate(theirs)
    if mine is None or (mine.accepted, mine.after_rejection) != (theirs.accepted, theirs.after_rejection):
        fate.stylize(DIFFERS)
    return cells + [rank_text(theirs.rank, "" if same_rank else DIFFERS,
                              logits_nonfinite_at(other.nonfinite_logit_slots, slot)), fate]


def _top_table(title: str, record: RoundRecord, top, mark: int, mark_label: str, room: int) -> Text:
    """Token, logit, p and the mark; narrow boxes (80 columns) leave p out."""
    logits = column([t.logit for t in top])
    with_p = room >= TOP_WIDE
    rows = []
    for t, logit in zip(top, logits):
        marked = t.token == mark
        cells = [token_text(record.text(t.token), "bold" if marked else "", width=10), logit]
        rows.append(cells + ([prob(t.prob)] if with_p else []) + [mark_label if marked else ""])
    widths, header = ([10, 7, 5, 1], ["token", "logit", "p", ""]) if with_p else \
        ([min(10, max(room - 11, 4)), 7, 1], ["token", "logit", ""])
    table = grid(rows, widths, "lrrl" if with_p else "lrl", header=header)
    return Text(title + "\n", style="bold", no_wrap=True, overflow="ellipsis") + table
