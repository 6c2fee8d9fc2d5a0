"""Selector (DFlash2): the walk through each slot's top-K candidates.

The path table lists, per slot, the pick, the plain argmax and the target's token; slots
where the walk left the argmax path are flagged. For the selected slot: its K candidates
with unary (the drafter's logit), edge (from the walk's predecessor) and total scores, and
the lattice heat map of every predecessor x candidate total. Where the slot's drafter
logits held a NaN or Inf (record.nonfinite_logit_slots), what they ranked first is noise:
its argmax and candidates read n/f, as tab 1's top-5 does, and its lattice is left empty.

With another round beside it (frame.other), the path table adds that round's pick and path
per slot, marked where they differ.
"""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from dflash_tui.breakpoints import slot_spans
from dflash_tui.engine.records import RoundRecord, SelectorSlot

from .format import DASH, NONFINITE, NONFINITE_LOGITS, column, grid, prob, token_text
from .frame import Frame
from .lattice import LatticeHeatmap
from .ranks import DIFFERS, RanksPanel, logits_nonfinite_at
from .table import FastTable

PATH_COLUMNS = ("slot", "pick", "argmax", "target", "total", "path")


def fit_line(text: Text, width: Optional[int]) -> Text:
    """One line in `width` columns (None: no limit): a longer one ends in ` …` after its
    last whole word, so a slot number is whole or not there ("0, 2, 4, 6, …")."""
    text = text.copy()
    text.no_wrap = True
    if width is None or text.cell_len <= width:
        return text
    cut = text.plain.rfind(" ", 0, width - 1)
    head = text[: cut if cut > 0 else max(width - 1, 0)]
    head.rstrip()
    head.append(" …" if cut > 0 else "…", style="dim")
    return head


def pad_lines(text: Text, lines: int) -> Text:
    """`text` followed by blank lines up to `lines` lines in all."""
    return text + Text("\n" * max(lines - 1 - text.plain.count("\n"), 0))


class SelectorPanel(Vertical):
    DEFAULT_CSS = """
    SelectorPanel { height: 1fr; overflow-y: auto; }
    SelectorPanel > #selector-note { height: 1; padding: 0 1; color: $text-muted; }
    SelectorPanel > FastTable { height: auto; max-height: 45%; }
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
        self._shown: Optional[tuple] = None  # (record, other) in the path table
        self._slot = 0
        self._noted = None
        self._shape = None  # (candidates, lattice rows) on screen: their height

    def compose(self):
        yield Static(id="selector-note")
        table = FastTable(id="selector-path", grow_only=False, frozen=1)
        table.add_columns(*PATH_COLUMNS)
        yield table
        with Horizontal():
            yield Static(id="selector-candidates")
            yield LatticeHeatmap(id="selector-lattice")

    @property
    def table(self) -> FastTable:
        return self.query_one("#selector-path", FastTable)

    def show(self, frame: Frame) -> None:
        record = frame.record
        shown = (record, frame.other)
        same = self._shown is not None and all(a is b for a, b in zip(shown, self._shown))
        if same and frame.slot == self._slot:
            return
        if not same:
            self._fill(frame)
        self._shown, self._slot = shown, frame.slot
        selector = record.selector if record is not None else None
        if selector is not None and selector.slots:
            slot = min(frame.slot, len(selector.slots) - 1)
            if self.table.cursor_row != slot:
                self.table.move_cursor(row=slot, animate=False)
            self._show_slot(record, selector.slots[slot])
        elif self._shape is not None:
            # before select: placeholders of the same height (no layout pass each round)
            candidates, lattice = self._shape
            waiting = Text("candidates and lattice after the select stage", style="dim")
            self.query_one("#selector-candidates", Static).update(
                pad_lines(waiting, candidates), layout=False)
            self.query_one(LatticeHeatmap).update(pad_lines(Text(""), lattice), layout=False)

    def on_fast_table_row_highlighted(self, event: FastTable.RowHighlighted) -> None:
        event.stop()
        self.post_message(RanksPanel.SlotSelected(event.cursor_row))

    def _fill(self, frame: Frame) -> None:
        record, info, other = frame.record, frame.info, frame.other
        table = self.table
        extra = (f"{frame.other_label} pick", f"{frame.other_label} path") if other is not None else ()
        if table.labels != PATH_COLUMNS + extra:
            table.add_columns(*PATH_COLUMNS, *extra)
        if info is not None and info.top_k is None:
            self._note(f"{info.drafter_kind} drafter: no candidate selector; each slot's "
                       "proposal is the drafter's argmax (or a sample at T > 0).")
            table.set_rows([])
            return
        if record is None or record.selector is None:
            self._note("the selector runs at the select stage")
            # one placeholder row per slot: the table keeps its height through the round
            gamma = record.gamma if record is not None else 0
            waiting = Text("…", style="dim")
            table.set_rows([[Text(str(s), style="dim")] + [waiting] * (len(PATH_COLUMNS) - 1 + len(extra))
                            for s in range(gamma)])
            return
        selector = record.selector
        # a walk "off" the argmax of NaN logits is off noise: those slots read n/f instead
        noisy = {s.slot for s in selector.slots
                 if logits_nonfinite_at(record.nonfinite_logit_slots, s.slot)}
        off = [slot for slot in selector.off_argmax_slots if slot not in noisy]
        # the slots first and as spans, as the path column says it: at 80 columns the tab
        # shows about 39 characters of this line, and "walk left the argmax at slot" after
        # the top-K lost the numbers
        self._note(Text.assemble(
            (f"off argmax at {slot_spans(off)}", "bold magenta") if off
            else ("walk followed the argmax", "green"),
            (f"  top-K {selector.top_k}", "dim"),
        ))
        targets = record.target_tokens or ()
        totals = column([s.score[s.chosen_index] for s in selector.slots])
        theirs = {s.slot: s for s in other.selector.slots} if other is not None and other.selector else {}
        rows = []
        for s, total in zip(selector.slots, totals):
            target = targets[s.slot] if s.slot < len(targets) else None
            # the pick is the proposal the target judged; the argmax of NaN logits is noise
            noise = Text(NONFINITE, style="bold red") if s.slot in noisy else None
            row = [
                Text(str(s.slot)),
                token_text(record.text(s.chosen), "bold magenta" if s.off_argmax else "bold"),
                noise or token_text(record.text(s.argmax)),
                token_text(record.text(target)) if target is not None else Text("…", style="dim"),
                Text(total, justify="right"),
                noise or _path(s),
            ]
            if other is not None:
                row += _other_cells(other, s, theirs.get(s.slot))
            rows.append(row)
        table.set_rows(rows)

    def _note(self, content) -> None:
        if content != self._noted:  # one line, fixed height: no layout pass
            self._noted = content
            self._draw_note()

    def _draw_note(self) -> None:
        note = self.query_one("#selector-note", Static)
        text = self._noted if isinstance(self._noted, Text) else Text(self._noted or "")
        # cut here: Textual drops a Text's own overflow, so a long line just stopped at the
        # edge, a slot number cut with it (0 until laid out: no limit)
        width = note.content_region.width
        note.update(fit_line(text, width if width > 0 else None), layout=False)

    def on_resize(self) -> None:
        if self._noted is not None:  # fitted to the width
            self._draw_note()

    def _show_slot(self, record: RoundRecord, slot: SelectorSlot) -> None:
        target = None
        if record.target_tokens is not None and slot.slot < len(record.target_tokens):
            target = record.target_tokens[slot.slot]
        source = token_text(record.text(slot.predecessor), width=10)
        title = Text.assemble((f"slot {slot.slot} after ", "bold"), source, "\n")
        shape = (len(slot.candidates) + 2, len(slot.lattice) + 2)  # lines of each
        layout = shape != self._shape  # same shape, same height: no layout pass
        self._shape = shape
        if logits_nonfinite_at(record.nonfinite_logit_slots, slot.slot):
            # what NaN / Inf logits rank first is noise: no candidates, no lattice of them
            self.query_one("#selector-candidates", Static).update(
                pad_lines(title + Text(NONFINITE_LOGITS, style="bold red"), shape[0]),
                layout=layout)
            self.query_one(LatticeHeatmap).update(pad_lines(Text(""), shape[1]), layout=layout)
            return
        rows = []
        sampled = slot.q is not None  # T > 0: the walk sampled from q over the K candidates
        unary, edge, total = (column(values) for values in (slot.unary, slot.edge, slot.score))
        for i, token in enumerate(slot.candidates):
            marks = ("●" if i == slot.chosen_index else "") + ("★" if i == slot.argmax_index else "") \
                + ("◎" if token == target else "")
            style = "bold magenta" if i == slot.chosen_index and slot.off_argmax else \
                "bold" if i == slot.chosen_index else ""
            row = [str(i), token_text(record.text(token), style, width=10), unary[i], edge[i], total[i]]
            rows.append(row + ([prob(slot.q[i])] if sampled else []) + [marks])
        header = ["#", "token", "unary", "edge", "total"] + (["q"] if sampled else []) + [""]
        widths = [len(str(len(slot.candidates) - 1)), 10, 7, 8, 7] + ([5] if sampled else []) + [3]
        table = title + grid(rows, widths, "llrrr" + ("r" if sampled else "") + "l", header=header)
        self.query_one("#selector-candidates", Static).update(table, layout=layout)
        previous = record.selector.slots[slot.slot - 1] if slot.slot > 0 else None
        if previous is None:
            predecessors, pred_index = [record.text(slot.predecessor)], 0
        else:
            predecessors = [record.text(t) for t in previous.candidates]
            pred_index = previous.chosen_index
        target_col = slot.candidates.index(target) if target in slot.candidates else None
        self.query_one(LatticeHeatmap).show_slot(
            slot.lattice, predecessors, pred_index, slot.chosen_index, slot.argmax_index, target_col,
            layout=layout)


def _path(s: SelectorSlot) -> Text:
    return Text("⚑ off argmax", style="bold magenta") if s.off_argmax else Text("argmax", style="dim")


def _other_cells(other: RoundRecord, mine: SelectorSlot, theirs: Optional[SelectorSlot]) -> list:
    """The other round's pick and path at this slot; what differs is marked."""
    if theirs is None:
        return [Text(DASH, style="dim")] * 2
    path = _path(theirs)
    if theirs.off_argmax != mine.off_argmax:
        path.stylize(DIFFERS)
    return [token_text(other.text(theirs.chosen), "" if theirs.chosen == mine.chosen else DIFFERS), path]
