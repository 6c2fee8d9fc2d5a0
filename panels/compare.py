"""Compare (--compare SPEC): the reference configuration beside the drafter, round by round.

  summary  the SPEC, the reference's time and the tolerance (fitted to the width: the time
           goes first, then the SPEC is cut, never a number); accepted this round and the
           running mean per round up to it, drafter against reference (and the difference),
           whether this round diverged and in how many rounds so far; where the two
           configurations first part this round, and (✗) where a buffer first went NaN / Inf
           on one side only when that is further on, with the reference's non-finite logit
           slots; where there is room, both sides' accepted per round and the rounds that
           diverged, as sparklines
  slots    per proposal slot: the drafter's proposal, rank and fate beside the reference's
           (reference cells that differ from the drafter's are marked), the target's token,
           and the reference's own target where it differs (its rank is counted against
           that); a rank ends in ↷ where the walk left the argmax (rank 0: the argmax was
           right), so "argmax or walk?" reads off both sides alike; n/f where that
           side's logits at the slot held a NaN or Inf
  drift    every buffer both sides probed, in pipeline order: the relative error with a bar
           on a log scale (1e-6 to 1; red beyond the tolerance), max |drafter - ref|; the
           first divergent buffer is marked ▶ (the first non-finite one, further on, ✗), a
           buffer non-finite on one side only says which;
           under it, one dim line naming the buffers the drift could not compare (left_out)

The reference runs at commit (engine/compare.py): before then a round has only the
drafter's side. With a pinned round beside it (frame.other), the drift table adds that
round's relative error per buffer, marked where one round is beyond the tolerance and the
other is not, and the summary gives its counts. Numbers over rounds come from
dflash_tui.aggregates (the history's columns); this panel only lays them out.
"""

from __future__ import annotations

import math
from typing import Optional

from rich.text import Text
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from dflash_tui.engine.records import BufferDrift, Compare, RoundRecord, SlotRank
from dflash_tui.walk_effect import helped_hurt

from .aggregates import DrawnWhenShown, bar
from .format import DASH, NONFINITE, grid, sci, token_text
from .frame import Frame
from .history import sparkline
from .ranks import DIFFERS, RanksPanel, logits_nonfinite_at, rank_style, rank_text
from .table import FastTable

SLOT_COLUMNS = ("slot", "drafter", "rank", "acc", "ref", "rank", "acc", "target", "ref target")
DRIFT_COLUMNS = ("", "stage", "L", "buffer", "rel err", "1e-6…1", "max |Δ|", "rms rel")
FIRST = "▶"  # the first divergent buffer's mark (as in the summary)
# The first buffer non-finite on one side only, where the ▶ one is an earlier buffer (a
# bfloat16 drafter against a float16 reference parts at rounding level before it overflows)
NONFINITE_MARK = "✗"
TOKEN_WIDTH = 9  # a proposal's cell: both sides and their ranks fit 44 columns (80 x 24)
BAR_WIDTH = 8
LOG_FLOOR = 6  # the bar starts at a relative error of 10^-6 and is full at 1
TREND = 60  # rounds in the per-round sparklines at most
# A buffer non-finite on one side only: the side, in the bar's cell (8 columns) and, in the
# same words, on the summary's ✗ line that names the row
NONFINITE_SIDE = {"primary": "drafter", "reference": "ref only", "both": "both"}
SUMMARY_HEADER = ["accepted", "drafter", "ref", "Δ", "diverged"]
SUMMARY_WIDTHS = [11, 7, 5, 6, 8]
NO_REFERENCE = "no reference configuration in this session: run with --compare SPEC"
REFERENCE = "reference "  # the summary's first words, before the SPEC
SUMMARY_PAD = 2  # the summary's padding, left and right
# Stacked (drift under the slots), in lines of the panel: the summary (usually), the slots
# table's header and 4 slots, and the drift table's first lines (its header and 9 rows)
# come first; lines past those go to the sparklines (TREND_LINES: three and a blank line
# above), then to 4 more slots, then to the drift table again (stacked_lines). Zoomed (`m`),
# the 4 more slots come before the drift table's first lines, down to DRIFT_LEAST of them.
SUMMARY_LINES = 5
SLOTS_LINES, MORE_SLOTS = 5, 4
DRIFT_FIRST = 10
DRIFT_LEAST = 4
TREND_LINES = 4
LEFT = "↷"  # a rank's suffix where the selector's walk left the slot's argmax
SAME = "="  # the reference's target is the drafter's


class ComparePanel(DrawnWhenShown, Horizontal):
    DEFAULT_CSS = """
    ComparePanel { height: 1fr; }
    ComparePanel > #compare-left { width: auto; height: 1fr; }
    ComparePanel #compare-summary { width: auto; height: auto; padding: 0 1; }
    ComparePanel #compare-trend { width: auto; height: auto; padding: 0 1; margin-top: 1; }
    ComparePanel #compare-slots { width: auto; height: auto; max-height: 100%; margin-top: 1; }
    ComparePanel > #compare-right { width: 1fr; height: 1fr; margin-left: 2; }
    ComparePanel #compare-drift { height: 1fr; }
    ComparePanel #compare-left-out {
        height: 1; display: none; text-wrap: nowrap; text-overflow: ellipsis;
    }
    """
    # Below 210 columns (the screen's -narrow and -wide classes) the drift table goes under
    # the slots (beside them it would get ~37 columns at 160, too few for its bars), which
    # show 4 to 8 slots (the cursor's slot scrolls into view), as many as the panel's height
    # gives them (stacked_lines: the sparklines and those slots take lines one at a time, so
    # a taller terminal never shows fewer drift rows; the -short class did it at once, at 30
    # rows, for 9 lines); their columns past the view come in with `<` `>`, with no
    # scrollbar (its line shows a slot instead). Side by side (-widest), short screens leave
    # out the sparklines. The classes are on an ancestor, so this is app CSS, not scoped to
    # the widget.
    NARROW_CSS = """
    .-narrow ComparePanel, .-wide ComparePanel { layout: vertical; }
    .-narrow ComparePanel > #compare-left, .-wide ComparePanel > #compare-left {
        width: 1fr; height: auto;
    }
    .-narrow ComparePanel #compare-summary, .-wide ComparePanel #compare-summary {
        width: 1fr; text-wrap: nowrap; text-overflow: ellipsis;
    }
    .-narrow ComparePanel #compare-slots, .-wide ComparePanel #compare-slots {
        width: 1fr; max-height: 5; margin-top: 0; overflow-x: hidden;
    }
    .-narrow ComparePanel > #compare-right, .-wide ComparePanel > #compare-right {
        width: 1fr; margin-left: 0;
    }
    .-narrow ComparePanel #compare-trend, .-wide ComparePanel #compare-trend { display: none; }
    .-short.-widest ComparePanel #compare-trend { display: none; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._shown: Optional[tuple] = None  # (info, record, other, history) on screen
        self._counts: Optional[tuple] = None  # (history rows, rows up to the round on screen)
        self._brought: Optional[tuple] = None  # (round, first divergent) last brought into view
        self._summary: Optional[tuple] = None  # render_summary's arguments on screen

    def compose(self):
        with Vertical(id="compare-left"):
            yield Static(id="compare-summary")
            yield Static(id="compare-trend")
            slots = FastTable(id="compare-slots", grow_only=False, frozen=1,
                              max_widths={1: TOKEN_WIDTH, 4: TOKEN_WIDTH, 7: TOKEN_WIDTH,
                                          8: TOKEN_WIDTH + 1})
            slots.add_columns(*SLOT_COLUMNS)
            yield slots
        with Vertical(id="compare-right"):
            drift = FastTable(id="compare-drift", grow_only=False, frozen=4)
            drift.add_columns(*DRIFT_COLUMNS)
            yield drift
            # shown only when the round left buffers out (a reference of another shape)
            yield Static(id="compare-left-out")

    def show(self, frame: Frame) -> None:
        if self.off_screen():  # (or no --compare: its tab is hidden)
            return
        shown = (frame.info, frame.record, frame.other, frame.history)
        counts = (len(frame.history or ()), frame.upto)
        same = self._shown is not None and all(a is b for a, b in zip(shown, self._shown))
        if not same or counts != self._counts:
            self._shown, self._counts = shown, counts
            self._fill(frame)
        slots = self.query_one("#compare-slots", FastTable)
        if slots.row_count and slots.cursor_row != frame.slot:
            slots.move_cursor(row=frame.slot, animate=False)

    def on_resize(self) -> None:
        self._share_lines()
        if self._summary is not None:  # its first line is fitted to the width
            self._draw_summary()

    def _share_lines(self) -> None:
        """Stacked, the lines the sparklines and the slots get from the panel's height
        (stacked_lines); side by side, what the CSS says."""
        trend = self.query_one("#compare-trend", Static)
        slots = self.query_one("#compare-slots", FastTable)
        if self.screen.has_class("-widest"):
            for rule in ("display", "max_height", "margin"):
                trend.styles.clear_rule(rule)
            slots.styles.clear_rule("max_height")
            return
        zoomed = self.screen.maximized is not None
        slot_lines, trend_lines = stacked_lines(self.size.height, slots_first=zoomed)
        slots.styles.max_height = slot_lines
        trend.display = trend_lines > 0
        # a blank line above the three sparklines once all fit; fewer: the first of them
        trend.styles.margin = (1 if trend_lines == TREND_LINES else 0, 0, 0, 0)
        trend.styles.max_height = min(trend_lines, TREND_LINES - 1)

    def on_fast_table_row_highlighted(self, event: FastTable.RowHighlighted) -> None:
        event.stop()
        if event.table.id == "compare-slots":  # the slot is the app's: ranks and selector follow
            self.post_message(RanksPanel.SlotSelected(event.cursor_row))

    # ---- filling ---------------------------------------------------------------------------

    def _fill(self, frame: Frame) -> None:
        record, other = frame.record, frame.other
        compare = record.compare if record is not None else None
        tally = trend = None
        if frame.history is not None and frame.upto:
            from dflash_tui import aggregates  # numpy: once there is something to count

            span = aggregates.every_round(frame.history, frame.upto)
            tally = aggregates.compare_tally(frame.history, span)
            trend = _trend(frame.history, span)
        spec, tol = _spec(frame)
        self._summary = (spec, tol, record, tally, other, frame.other_label, frame.show_timings)
        self._draw_summary()
        self.query_one("#compare-trend", Static).update(
            Text("") if trend is None else render_trend(*trend))
        self.query_one("#compare-slots", FastTable).set_rows(slot_rows(record))
        drift = self.query_one("#compare-drift", FastTable)
        extra = (f"{frame.other_label} rel err",) if other is not None else ()
        if drift.labels != DRIFT_COLUMNS + extra:
            drift.add_columns(*DRIFT_COLUMNS, *extra)
        drift.set_rows(drift_rows(compare, other.compare if other is not None else None,
                                  pinned=other is not None))
        left_out = self.query_one("#compare-left-out", Static)
        left_out.update(left_out_line(compare.left_out if compare is not None else ()))
        left_out.display = bool(compare is not None and compare.left_out)
        self._bring_first_into_view(drift, record)

    def _draw_summary(self) -> None:
        width = self.content_size.width - SUMMARY_PAD
        self.query_one("#compare-summary", Static).update(
            render_summary(*self._summary, width=width if width > 0 else None))

    def _bring_first_into_view(self, drift: FastTable, record: Optional[RoundRecord]) -> None:
        """The first divergent buffer is often far down the drift table (at 80 x 24 it shows
        six of some seventy rows): a round drawn for the first time (live, or moved to) puts
        the cursor on its row, which scrolls it into view mid-table, so that the buffers it
        led to show below it. Only once per round and
        divergence: redrawing the same round (a new round counted while an older one is
        shown, a pin) leaves the table where the user may have scrolled it."""
        compare = record.compare if record is not None else None
        first = compare.first_divergent if compare is not None else None
        key = None if record is None else (record.round, first)
        if key == self._brought:
            return
        self._brought = key
        if first is not None:
            where = (first.stage, first.layer, first.buffer)
            row = next((i for i, b in enumerate(compare.buffers) if _key(b) == where), None)
            if row is not None:
                drift.move_cursor(row=row, centre=True)  # with the rows after it


def _spec(frame: Frame) -> tuple[Optional[str], Optional[float]]:
    """The SPEC and tolerance of the session on screen (from its round when the recording's
    header does not name them: snapshots without a session)."""
    info, record = frame.info, frame.record
    if info is not None and info.compare is not None:
        return info.compare, info.compare_tol
    if record is not None and record.compare is not None:
        return record.compare.spec, record.compare.tolerance
    return None, None


def _trend(history, span) -> Optional[tuple]:
    """(drafter accepted, reference accepted, gamma, diverged) per compared round, the
    latest TREND of them."""
    compared = history.compare_accepted.values[span.rows] >= 0
    if not compared.any():
        return None
    pick = lambda column: column.values[span.rows][compared][-TREND:].tolist()  # noqa: E731
    return (pick(history.accepted), pick(history.compare_accepted), pick(history.gamma),
            pick(history.compare_diverged))


def stacked_lines(height: int, slots_first: bool = False) -> tuple[int, int]:
    """(the slots table's lines at most, the sparklines' lines) in a stacked panel `height`
    lines high. Past the summary, 4 slots and the drift table's first DRIFT_FIRST lines,
    each line goes to one thing: the sparklines (the first of them first), then 4 more
    slots, then the drift table. The drift table never loses a line to a taller panel.

    slots_first: the inspector is zoomed to see a round whole, and at 80 x 24 the zoom's
    three lines went to the drift table while the slots stayed at 4 of 8: the 4 more slots
    come first then, leaving the drift table at least DRIFT_LEAST lines (6 at 80 x 24,
    against 7 unzoomed). Its lines still only grow with the height."""
    more = 0
    if slots_first:
        more = min(MORE_SLOTS, max(height - SUMMARY_LINES - SLOTS_LINES - DRIFT_LEAST, 0))
    spare = max(height - SUMMARY_LINES - SLOTS_LINES - more - DRIFT_FIRST, 0)
    trend = min(spare, TREND_LINES)
    return SLOTS_LINES + more + min(spare - trend, MORE_SLOTS - more), trend


# ---- summary -----------------------------------------------------------------------------------

def render_summary(spec: Optional[str], tol: Optional[float], record: Optional[RoundRecord],
                   tally, other: Optional[RoundRecord], other_label: str,
                   show_timings: bool = True, width: Optional[int] = None) -> Text:
    if spec is None:
        return Text(NO_REFERENCE, style="dim")
    compare = record.compare if record is not None else None
    # the reference's own time this round (the drafter's stage times, and tok/s, leave it out)
    ms = compare.ms if compare is not None and show_timings else None
    text = summary_head(spec, ms, tol, width)
    rows = []
    if compare is not None:
        parted = compare.first_divergent is not None
        rows.append([f"round {record.round}", str(record.accepted), str(compare.accepted),
                     _difference(compare.accepted - record.accepted, "{:+d}"),
                     Text("yes" if parted else "no", style="bold red" if parted else "green")])
    if tally is not None:
        span = f"r{tally.first}" if tally.first == tally.last else f"r{tally.first}–{tally.last}"
        rows.append([f"mean {span}", f"{tally.drafter_mean:.2f}", f"{tally.reference_mean:.2f}",
                     _difference(tally.reference_mean - tally.drafter_mean, "{:+.2f}"),
                     Text(f"{tally.diverged}/{tally.rounds}", style="yellow" if tally.diverged else "")])
    if rows:
        text.append("\n")
        text.append_text(grid(rows, SUMMARY_WIDTHS, "lrrrr", header=SUMMARY_HEADER))
    text.append("\n")
    if record is None:
        text.append("no round yet", style="dim")
    elif compare is None:
        text.append(f"round {record.round}: the reference runs at commit", style="dim")
    else:
        text.append_text(divergence_line(compare))
        bad = nonfinite_line(compare, width)
        if bad is not None:
            text.append("\n")
            text.append_text(bad)
    if other is not None and other.compare is not None:
        c = other.compare
        text.append(f"\n{other_label}: accepted {other.accepted} · ref {c.accepted} · ")
        text.append_text(divergence_line(c, short=True))
    return text


def summary_head(spec: str, ms: Optional[float], tol: Optional[float],
                 width: Optional[int]) -> Text:
    """`reference SPEC · 242 ms · tol 0.01` in `width` cells (None: whole). Where it does
    not fit, the time is left out first, then the SPEC is cut to end in …: the tolerance,
    which the user acts on, stays (unless not one character of the SPEC would), and no
    number is ever cut."""
    items = [] if ms is None else [(f" · {ms:.0f} ms", "cyan")]
    if tol is not None:
        items.append((f" · tol {tol:g}", "dim"))
    shown = Text(spec, style="bold")
    if width is not None:
        room = lambda: width - len(REFERENCE) - sum(len(item) for item, _ in items)  # noqa: E731
        if ms is not None and shown.cell_len > room():
            items.pop(0)
        if items and room() < 2:  # "x…" at the least
            items.clear()
        if shown.cell_len > room():
            shown.truncate(max(room(), 1), overflow="ellipsis")
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(REFERENCE, style="dim")
    text.append_text(shown)
    for item, style in items:
        text.append(item, style=style)
    return text


def divergence_line(compare: Compare, short: bool = False) -> Text:
    first = compare.first_divergent
    if first is None:
        return Text("✓ within tol" if short else f"✓ every buffer within tol {compare.tolerance:g}",
                    style="green")
    layer = "" if first.layer is None else f" L{first.layer}"
    text = Text(f"▶ {first.stage}{layer} {first.buffer}", style="bold red")
    if not short:
        text.append(f": {first.why}", style="red")
    return text


def nonfinite_line(compare: Compare, width: Optional[int] = None) -> Optional[Text]:
    """`✗ n/f from draft L0 ffn_out, ref only; logits 15/15`: where a buffer first went NaN /
    Inf on one side only, when the ▶ line names an earlier buffer (rounding beyond the
    tolerance, which would hide an overflow), and in how many slots the reference's logits
    did (left out where it does not fit `width`, rather than cut); `✗ ref logits n/f in 15
    of 15 slots` when ▶ is that buffer already. None when neither (or a recording made
    before the count, with ▶ at the buffer)."""
    bad, slots = compare.nonfinite_after_first, compare.nonfinite_logit_slots
    gamma = len(compare.proposals)
    if bad is not None:
        layer = "" if bad.layer is None else f" L{bad.layer}"
        side = NONFINITE_SIDE.get(bad.nonfinite, bad.nonfinite)
        text = f"{NONFINITE_MARK} {NONFINITE} from {bad.stage}{layer} {bad.buffer}, {side}"
        logits = f"; logits {len(slots)}/{gamma}" if slots else ""
        if width is None or len(text) + len(logits) <= width:
            text += logits
    elif slots:
        text = f"{NONFINITE_MARK} ref logits {NONFINITE} in {len(slots)} of {gamma} slots"
    else:
        return None
    return Text(text, style="bold red")


def _difference(value, fmt: str) -> Text:
    if value == 0:
        return Text(fmt.format(value).replace("+", "±"), style="dim")
    return Text(fmt.format(value), style="green" if value > 0 else "red")


def render_trend(drafter: list, reference: list, gamma: list, diverged: list) -> Text:
    """Accepted per round, both sides, and the rounds that diverged (where the drift starts)."""
    text = Text("drafter  ", style="dim", no_wrap=True, overflow="crop")
    text.append_text(sparkline(drafter, gamma))
    text.append("\nref      ", style="dim")
    text.append_text(sparkline(reference, gamma))
    text.append("\ndiverged ", style="dim")
    for parted in diverged:
        text.append("▪" if parted else "·", style="bold red" if parted else "dim")
    return text


# ---- slots -------------------------------------------------------------------------------------

def slot_rows(record: Optional[RoundRecord]) -> list[list]:
    if record is None:
        return []
    compare = record.compare
    ranks = {r.slot: r for r in record.ranks}
    walks = {s.slot: s for s in record.selector.slots} if record.selector is not None else {}
    rows = []
    for slot in range(record.gamma):
        mine = ranks.get(slot)
        target = mine.target if mine is not None else None
        cells = [Text(str(slot), style="dim" if mine is not None and mine.after_rejection else "")]
        cells += _drafter_cells(record, slot, mine, walks.get(slot))
        cells += _reference_cells(record, compare, slot, mine) if compare is not None else \
            [Text("…", style="dim")] * 3
        cells.append(token_text(record.text(target)) if target is not None else Text(DASH, style="dim"))
        cells.append(_reference_target(record, compare, slot, target) if compare is not None else
                     Text("…", style="dim"))
        rows.append(cells)
    return rows


def _drafter_cells(record: RoundRecord, slot: int, mine: Optional[SlotRank], walk) -> list:
    if record.proposals is None:
        return [Text("…", style="dim")] * 3
    dim = "dim" if mine is not None and mine.after_rejection else ""
    cells = [token_text(record.text(record.proposals[slot]), dim)]
    if mine is None:
        return cells + [Text("…", style="dim"), Text("…", style="dim")]
    left = None if walk is None else walk_mark(walk.off_argmax, walk.chosen, walk.argmax,
                                               mine.target, dim)
    return cells + [rank_cell(mine.rank, dim or rank_style(mine.rank), left,
                              logits_nonfinite_at(record.nonfinite_logit_slots, slot)),
                    _fate(mine.accepted, mine.after_rejection)]


def _reference_cells(record: RoundRecord, compare: Compare, slot: int, mine: Optional[SlotRank]) -> list:
    proposal, rank = compare.proposals[slot], compare.ranks[slot]
    accepted, after = slot < compare.accepted, slot > compare.accepted
    dim = "dim" if after else ""
    same_token = record.proposals is not None and record.proposals[slot] == proposal
    token = token_text(record.text(proposal), dim if same_token else DIFFERS)
    target = _at(compare.targets, slot, mine.target if mine is not None else None)
    left = None
    if compare.left_argmax:  # DFlash2 (and a record that has its walk)
        left = walk_mark(compare.left_argmax[slot], proposal, compare.argmax[slot], target, dim)
    if compare.targets and target is None:
        # the target never saw its prefix: no token of its own to rank (the engine's number
        # there is the rank of the drafter's target, after another prefix)
        rank_cell_ = Text(DASH, style="dim", justify="right")
        if left is not None:
            rank_cell_.append_text(left)
    else:
        nonfinite = logits_nonfinite_at(compare.nonfinite_logit_slots, slot)
        rank_cell_ = rank_cell(rank, dim or rank_style(rank), left, nonfinite)
        if not nonfinite and (mine is None or mine.rank != rank):
            # the number only: the walk's mark keeps its colour
            rank_cell_.stylize(DIFFERS, 0, len(str(rank)))
    fate = _fate(accepted, after)
    if mine is None or (mine.accepted, mine.after_rejection) != (accepted, after):
        fate.stylize(DIFFERS)
    return [token, rank_cell_, fate]


def _reference_target(record: RoundRecord, compare: Compare, slot: int, target: Optional[int]) -> Text:
    """The target's token after the reference's own prefix, which its rank is counted
    against: `=` where that is the drafter's target (the prefixes agree so far), the token,
    marked, where the reference got further than the drafter (a second verify), a dash where
    the target never saw its prefix (or the record predates the field)."""
    if slot >= len(compare.targets) or compare.targets[slot] is None:
        return Text(DASH, style="dim")
    theirs = compare.targets[slot]
    if theirs == target:
        return Text(SAME, style="dim")
    return token_text(record.text(theirs), DIFFERS)


def _at(cells: tuple, slot: int, default):
    """A per-slot cell of the reference; `default` where the record has none (a trace
    written before the field)."""
    return cells[slot] if slot < len(cells) else default


def rank_cell(rank: int, style: str, left: Optional[Text], nonfinite: bool = False) -> Text:
    """The rank (0: the argmax was the target's token; n/f where the slot's logits held a
    NaN or Inf), then, for DFlash2, one cell for the walk (`walk_mark`): a blank where it
    kept the argmax, so the digits line up."""
    cell = rank_text(rank, style, nonfinite)
    if left is not None:
        cell.append_text(left)
    return cell


def walk_mark(left: bool, pick: int, argmax: int, target: Optional[int], dim: str = "") -> Text:
    """Where the selector's walk left the slot's argmax, ↷: green where that got the
    target's token the argmax missed, red where it lost the one the argmax had, magenta
    (the selector tab's colour for it) where neither was the target's (dim after a miss,
    where the slot was judged on a wrong prefix)."""
    if not left:
        return Text(" ")
    if dim or target is None:
        return Text(LEFT, style=dim or "magenta")
    helped, hurt = helped_hurt(pick, argmax, target)
    return Text(LEFT, style="bold green" if helped else "bold red" if hurt else "magenta")


def _fate(accepted: bool, after_rejection: bool) -> Text:
    if accepted:
        return Text("✓", style="green")
    if after_rejection:
        return Text("·", style="dim")
    return Text("✗", style="bold red")


# ---- drift -------------------------------------------------------------------------------------

def drift_rows(compare: Optional[Compare], other: Optional[Compare], pinned: bool) -> list[list]:
    if compare is None:
        return []
    first, bad = compare.first_divergent, compare.nonfinite_after_first
    first_key = None if first is None else (first.stage, first.layer, first.buffer)
    bad_key = None if bad is None else (bad.stage, bad.layer, bad.buffer)
    theirs = {_key(b): b for b in other.buffers} if other is not None else {}
    tol = compare.tolerance
    rows = []
    for b in compare.buffers:
        is_first, is_bad = _key(b) == first_key, _key(b) == bad_key
        beyond = _beyond(b, tol)
        name_style = "bold red" if is_first or is_bad else "yellow" if beyond else ""
        cells = [
            Text(FIRST if is_first else NONFINITE_MARK if is_bad else "", style="bold red"),
            Text(b.stage, style="dim"),
            Text(DASH if b.layer is None else str(b.layer)),
            Text(b.buffer, style=name_style),
            rel_err_cell(b, tol),
            drift_bar(b, tol),
            max_diff_cell(b),
            rms_rel_cell(b),
        ]
        if pinned:
            cells.append(_other_cell(b, theirs.get(_key(b)), tol))
        rows.append(cells)
    return rows


def _key(b: BufferDrift) -> tuple:
    return (b.stage, b.layer, b.buffer)


def _beyond(b: BufferDrift, tol: float) -> bool:
    """Beyond the tolerance, as the engine decides a divergence."""
    return b.rel_err is None or b.rel_err > tol


def rel_err_cell(b: BufferDrift, tol: float) -> Text:
    if b.nonfinite is not None:
        return Text(NONFINITE, style="bold red", justify="right")
    if b.rel_err is None:  # a difference from an all-zero reference
        return Text("∞", style="bold red", justify="right")
    text = "0" if b.rel_err == 0 else f"{b.rel_err:.2e}"
    style = "bold red" if b.rel_err > tol else "dim" if b.rel_err == 0 else ""
    return Text(text, style=style, justify="right")


def max_diff_cell(b: BufferDrift) -> Text:
    """max |Δ| over the values finite on both sides: on a row non-finite on one side, a 0
    there read as "no difference", so it shows as `—` (docs/COMPARE.md)."""
    if b.max_abs_diff == 0:
        return Text(DASH if b.nonfinite is not None else "0", justify="right")
    return Text(sci(b.max_abs_diff), justify="right")


def rms_rel_cell(b: BufferDrift) -> Text:
    """rms |Δ| over the reference's rms: a buffer with a few huge values (SmolLM2's capture,
    ~25,000 among values near 100) reads its real change here, where `rel err` divides it by
    the largest. Not judged against the tolerance (the tolerance is rel err's): plain. `—`
    where it is no number, or the recording predates it."""
    if b.rms_rel_err is None:
        return Text(DASH, style="dim", justify="right")
    return Text("0" if b.rms_rel_err == 0 else f"{b.rms_rel_err:.2e}",
                style="dim" if b.rms_rel_err == 0 else "", justify="right")


def drift_bar(b: BufferDrift, tol: float) -> Text:
    """log10 of the relative error from 10^-LOG_FLOOR (empty) to 1 (full); a non-finite
    side says which."""
    if b.nonfinite is not None:
        return Text(NONFINITE_SIDE.get(b.nonfinite, b.nonfinite), style="bold white on red")
    if b.rel_err is None:
        return Text("zero ref", style="bold white on red")
    fraction = 0.0 if b.rel_err <= 0 else (math.log10(b.rel_err) + LOG_FLOOR) / LOG_FLOOR
    return Text(bar(min(max(fraction, 0.0), 1.0), BAR_WIDTH),
                style="red" if b.rel_err > tol else "green")


def _other_cell(mine: BufferDrift, theirs: Optional[BufferDrift], tol: float) -> Text:
    if theirs is None:
        return Text(DASH, style="dim", justify="right")
    cell = rel_err_cell(theirs, tol)
    if _beyond(mine, tol) != _beyond(theirs, tol) or mine.nonfinite != theirs.nonfinite:
        cell.stylize(DIFFERS)
    return cell


def left_out_line(left_out) -> Text:
    """The buffers the drift could not compare (records.LeftOut: another shape on each side,
    or on one side only), in one dim line cut to the width: how many, then which. A
    reference with another MLP width leaves out the same buffers in every layer, so they are
    named once per stage and shapes, with their layers ("draft L0–3 ffn_gate, ffn_up
    (1x16x1536 vs 1x16x768)"), not once per layer."""
    if not left_out:
        return Text("")
    layers: dict[tuple, list] = {}  # (stage, why, buffer) -> its layers, in pipeline order
    for b in left_out:
        layers.setdefault((b.stage, b.why, b.buffer), []).append(b.layer)
    names: dict[tuple, list] = {}  # (stage, why, the same layers) -> buffers
    for (stage, why, buffer), where in layers.items():
        names.setdefault((stage, why, tuple(where)), []).append(buffer)
    parts = [f"{stage}{_layers(where)} {', '.join(buffers)} ({why})"
             for (stage, why, where), buffers in names.items()]
    return Text(f"{len(left_out)} buffer{'s' * (len(left_out) != 1)} not compared: "
                + "; ".join(parts), style="dim", no_wrap=True, overflow="ellipsis")


def _layers(layers: tuple) -> str:
    """ L3, L0–3 (a run), L0,2; nothing for buffers outside the layers."""
    known = [layer for layer in layers if layer is not None]
    if not known:
        return ""
    if len(known) > 1 and known == list(range(known[0], known[-1] + 1)):
        return f" L{known[0]}–{known[-1]}"
    return " L" + ",".join(map(str, known))
