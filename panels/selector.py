"""Selector (DFlash2): the walk through each slot's top-K candidates.

The path table lists, per slot, the pick, the plain argmax and the target's token; slots
where the walk left the argmax path are flagged. For the selected slot: its K candidates
with unary (the drafter's logit), edge (from the walk's predecessor) and total scores, and
the lattice heat map of every predecessor x candidate total.
"""

from __future__ import annotations

from typing import Optional

from rich.table import Table
from rich.text import Text
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from dflash_tui.engine.records import RoundRecord, SelectorSlot

from .format import score, token_text
from .frame import Frame
from .lattice import LatticeHeatmap
from .ranks import RanksPanel

PATH_COLUMNS = ("slot", "pick", "argmax", "target", "total", "path")


class SelectorPanel(Vertical):
    DEFAULT_CSS = """
    SelectorPanel { height: 1fr; overflow-y: auto; }
    SelectorPanel > #selector-note { height: auto; padding: 0 1; color: $text-muted; }
    SelectorPanel > DataTable { height: auto; max-height: 45%; }
    SelectorPanel > Horizontal { height: auto; margin-top: 1; }
    SelectorPanel #selector-candidates { width: auto; padding-right: 2; }
    """

    # On a narrow screen (the screen's -narrow breakpoint class) the lattice goes below the
    # candidates: this needs the class on an ancestor, so it is not scoped to the widget.
    NARROW_CSS = """
    .-narrow SelectorPanel > Horizontal { layout: vertical; }
    .-narrow SelectorPanel #selector-lattice { margin-top: 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._record: Optional[RoundRecord] = None
        self._slot = 0
        self._shown = False

    def compose(self):
        yield Static(id="selector-note")
        table = DataTable(id="selector-path", cursor_type="row", zebra_stripes=True)
        table.add_columns(*PATH_COLUMNS)
        yield table
        with Horizontal():
            yield Static(id="selector-candidates")
            yield LatticeHeatmap(id="selector-lattice")

    @property
    def table(self) -> DataTable:
        return self.query_one("#selector-path", DataTable)

    def show(self, frame: Frame) -> None:
        record = frame.record
        if self._shown and record is self._record and frame.slot == self._slot:
            return
        if not self._shown or record is not self._record:
            self._fill(frame)
        self._shown, self._record, self._slot = True, record, frame.slot
        selector = record.selector if record is not None else None
        if selector is not None and selector.slots:
            slot = min(frame.slot, len(selector.slots) - 1)
            if self.table.cursor_row != slot:
                self.table.move_cursor(row=slot, animate=False)
            self._show_slot(record, selector.slots[slot])
        else:
            self.query_one("#selector-candidates", Static).update("")
            self.query_one(LatticeHeatmap).clear()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self.post_message(RanksPanel.SlotSelected(event.cursor_row))

    def _fill(self, frame: Frame) -> None:
        record, info = frame.record, frame.info
        note = self.query_one("#selector-note", Static)
        table = self.table
        table.clear()
        if info is not None and info.top_k is None:
            note.update(f"{info.drafter_kind} drafter: no candidate selector; each slot's "
                        "proposal is the drafter's argmax (or a sample at T > 0).")
            return
        if record is None or record.selector is None:
            note.update("the selector runs at the select stage")
            return
        selector = record.selector
        off = selector.off_argmax_slots
        note.update(Text.assemble(
            (f"top-K {selector.top_k}  ", "dim"),
            (f"walk left the argmax at slot {', '.join(map(str, off))}", "bold magenta") if off
            else ("walk followed the argmax at every slot", "green"),
        ))
        targets = record.target_tokens or ()
        rows = []
        for s in selector.slots:
            target = targets[s.slot] if s.slot < len(targets) else None
            rows.append([
                Text(str(s.slot)),
                token_text(record.text(s.chosen), "bold magenta" if s.off_argmax else "bold"),
                token_text(record.text(s.argmax)),
                token_text(record.text(target)) if target is not None else Text("…", style="dim"),
                Text(score(s.score[s.chosen_index]), justify="right"),
                Text("⚑ off argmax", style="bold magenta") if s.off_argmax
                else Text("argmax", style="dim"),
            ])
        table.add_rows(rows)

    def _show_slot(self, record: RoundRecord, slot: SelectorSlot) -> None:
        target = None
        if record.target_tokens is not None and slot.slot < len(record.target_tokens):
            target = record.target_tokens[slot.slot]
        source = token_text(record.text(slot.predecessor), width=10)
        table = Table(title=Text.assemble(f"slot {slot.slot} after ", source),
                      title_justify="left", title_style="bold", box=None, padding=(0, 1, 0, 0),
                      show_edge=False)
        for name, justify in (("#", "right"), ("token", "left"), ("unary", "right"),
                              ("edge", "right"), ("total", "right"), ("", "left")):
            table.add_column(name, justify=justify)
        for i, token in enumerate(slot.candidates):
            marks = ("●" if i == slot.chosen_index else "") + ("★" if i == slot.argmax_index else "") \
                + ("◎" if token == target else "")
            style = "bold magenta" if i == slot.chosen_index and slot.off_argmax else \
                "bold" if i == slot.chosen_index else ""
            table.add_row(str(i), token_text(record.text(token), style, width=10),
                          score(slot.unary[i]), score(slot.edge[i]), score(slot.score[i]), marks)
        self.query_one("#selector-candidates", Static).update(table)
        previous = record.selector.slots[slot.slot - 1] if slot.slot > 0 else None
        if previous is None:
            predecessors, pred_index = [record.text(slot.predecessor)], 0
        else:
            predecessors = [record.text(t) for t in previous.candidates]
            pred_index = previous.chosen_index
        target_col = slot.candidates.index(target) if target in slot.candidates else None
        self.query_one(LatticeHeatmap).show_slot(
            slot.lattice, predecessors, pred_index, slot.chosen_index, slot.argmax_index, target_col)
