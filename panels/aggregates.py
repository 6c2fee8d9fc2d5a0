"""Aggregates: the whole decode so far (or a range of rounds, `a`) in numbers and small plots.

  per slot     P(acc >= s+1), acceptance once reached, argmax rate, mean rank and the
               median rank where the argmax missed,
               in-K recall (DFlash2), where the selector left the argmax: helped / hurt /
               neutral (definitions: dflash_tui/aggregates.py and docs/TUI.md); below
               it, where the argmax missed, how near the target's token was (2nd, top 5,
               among the K candidates, beyond K); with
               --compare the same table for the reference, from its side of the same rounds
               (frame.reference_history), as bench --compare --slots prints it
  per round    accepted and the lowest fp16 headroom of any buffer, as sparklines
  by position  mean accepted per round against the anchor's position
  per buffer   lowest fp16 headroom (and in which round), highest absmax, rounds with a
               NaN / Inf and the first of them; non-finite buffers first, in the
               order they went bad (round, then data flow), then the closest to
               overflowing

Numbers come from dflash_tui.aggregates (pure functions of the history); this panel only
lays them out. It draws only while its tab is on screen.
"""

from __future__ import annotations

import math
from typing import Optional

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static, TabPane

from dflash_tui import slot_text

from .format import DASH, column, reading_text, rounds_count
from .frame import Frame
from .history import BARS, sparkline
from .probes import LOW_HEADROOM_BITS, headroom_cell
from .ranks import RanksPanel
from .table import FastTable

# bench --slots' columns too, after its workload (dflash_tui/bench/slots.py)
SLOT_HEADER = slot_text.SLOT_HEADER
BUFFERS_TITLE = "buffers: non-finite first, then the least fp16 headroom"
BUFFER_HEADER = ("stage", "L", "buffer", "min fp16", "round", "max absmax", "non-finite", "first")
POSITION_BINS = 8
PLOT_WIDTH = 60  # rounds shown in the sparklines at most (the latest ones of the span)


class DrawnWhenShown:
    """A panel that counts a lot to draw, and so draws only while its tab is on screen (the
    app draws it again when its tab is shown)."""

    _pane: Optional[TabPane] = None

    def off_screen(self) -> bool:
        if self._pane is None:
            self._pane = next((a for a in self.ancestors if isinstance(a, TabPane)), None)
        return self._pane is not None and not self._pane.display


class AggregatesPanel(DrawnWhenShown, VerticalScroll):
    DEFAULT_CSS = """
    AggregatesPanel { height: 1fr; overflow-x: auto; }
    AggregatesPanel > Static { width: auto; padding: 0 1; }
    AggregatesPanel > .section { margin-top: 1; }
    AggregatesPanel > FastTable { height: auto; max-height: 100%; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._key: Optional[tuple] = None
        self._sizes: dict[str, tuple[int, int]] = {}  # section -> (lines, width) on screen
        self._title: Optional[tuple] = None  # render_title's arguments on screen
        self._ref_spec: Optional[str] = None  # the reference table's title's spec on screen
        self._near_k: dict[str, Optional[int]] = {}  # near-miss table -> the K in its title
        self._legend_nonfinite = False  # the legend explains n/f (the drafter's table has some)

    def compose(self):
        yield Static(id="agg-title")
        yield Static(Text("per slot", style="bold"), id="agg-slots-title", classes="section")
        # a table, not a text grid: at 80 columns `<` `>` bring its later columns in view,
        # the slot staying put (as in every other tab's tables)
        slots = FastTable(id="agg-slots", grow_only=False, frozen=1)
        slots.add_columns(*(Text(name, justify="right") for name in SLOT_HEADER))
        yield slots
        yield from near_table("agg-near")
        # --compare: the reference's slots, the same columns (hidden without a reference)
        yield Static(id="agg-ref-title", classes="section")
        ref_slots = FastTable(id="agg-ref-slots", grow_only=False, frozen=1)
        ref_slots.add_columns(*(Text(name, justify="right") for name in SLOT_HEADER))
        yield ref_slots
        yield from near_table("agg-ref-near")
        yield Static(id="agg-legend", classes="section")
        yield Static(id="agg-rounds", classes="section")
        yield Static(id="agg-position", classes="section")
        yield Static(Text(BUFFERS_TITLE, style="bold"), classes="section")
        # a line-API table: only its visible rows are laid out (there are ~70 buffers)
        table = FastTable(id="agg-buffers", grow_only=False, frozen=3)
        table.add_columns(*BUFFER_HEADER)
        yield table

    def show(self, frame: Frame) -> None:
        if self.off_screen():
            return
        history, reference = frame.history, frame.reference_history
        rows = len(history) if history is not None else 0
        # While replay reads its trace, the rows grow at every batch it hands over: counted
        # again when the progress shown moves on (a few times a second), not at every key.
        grown = (rows, len(reference) if reference is not None else 0) if frame.reading is None \
            else frame.reading
        key = (id(history), id(reference), frame.aggregate_rounds, grown)
        if key != self._key:
            self._key = key
            self._fill(history, rows, frame.aggregate_rounds, frame.reading)
            self._fill_reference(reference, frame.info.compare if frame.info else None,
                                 frame.aggregate_rounds)
        # the selected slot's row is the cursor: a slot key moves it and counts nothing again
        for slots in self.query("#agg-slots, #agg-ref-slots").results(FastTable):
            slot = min(frame.slot, slots.row_count - 1)
            if slot >= 0 and slots.cursor_row != slot:
                slots.move_cursor(row=slot)

    def _fill(self, history, rows: int, chosen: Optional[tuple],
              reading: Optional[tuple[int, int]] = None) -> None:
        if not rows:
            self._title = None
            self._update("title", Text(reading_text(reading) if reading else "no completed round yet",
                                       style="dim"))
            for name in ("legend", "rounds", "position"):
                self._update(name, Text(""))
            self.query_one("#agg-slots", FastTable).set_rows([])
            self._fill_near("agg-near", [])
            self.query_one("#agg-buffers", FastTable).set_rows([])
            return
        from dflash_tui import aggregates  # numpy: loaded once there is something to count

        if chosen is None:
            span = aggregates.every_round(history)
        else:
            span = aggregates.rounds_span(history, *chosen)
        rounds = history.round.values
        first_last = (int(rounds[span.start]), int(rounds[span.stop - 1])) if len(span) else None
        self._title = (first_last, len(span), rows, chosen, aggregates.mean_accepted(history, span),
                       reading)
        self._draw_title()
        stats = aggregates.slot_stats(history, span)
        self.query_one("#agg-slots", FastTable).set_rows(slot_rows(stats))
        self._fill_near("agg-near", stats)
        self._legend_nonfinite = any(s.nonfinite for s in stats)
        self._update("legend", slot_legend(self._legend_nonfinite) if stats else Text(""))
        self._update("rounds", render_rounds(
            history.accepted.values[span.rows][-PLOT_WIDTH:].tolist(),
            history.gamma.values[span.rows][-PLOT_WIDTH:].tolist(),
            aggregates.min_headroom_per_round(history, span)[-PLOT_WIDTH:].tolist()))
        self._update("position", render_position(aggregates.acceptance_by_position(history, span, POSITION_BINS)))
        self.query_one("#agg-buffers", FastTable).set_rows(buffer_rows(aggregates.buffer_stats(history, span)))

    def _title_width(self) -> Optional[int]:
        # the panel's, less a title's padding (0 until laid out: no limit)
        width = self.scrollable_content_region.width - 2
        return width if width > 0 else None

    def _draw_title(self) -> None:
        self._update("title", render_title(*self._title, width=self._title_width()))

    def _draw_ref_title(self) -> None:
        self.query_one("#agg-ref-title", Static).update(
            reference_title(self._ref_spec, self._title_width()))

    def on_resize(self) -> None:
        self._fit_titles()

    def watch_show_vertical_scrollbar(self) -> None:
        # The tables filled after a title was fitted can bring the scrollbar in, 2 columns
        # narrower, with no resize: a title that fitted only without it ran under it.
        self._fit_titles()

    def _fit_titles(self) -> None:
        if self._title is not None:  # fitted to the width
            self._draw_title()
        if self._ref_spec is not None:
            self._draw_ref_title()
        for name in self._near_k:
            self._draw_near_title(name)

    def _fill_reference(self, reference, spec: Optional[str], chosen: Optional[tuple]) -> None:
        """The reference's per-slot table: slot_stats over its side of the same rounds (the
        same span of round numbers), laid out by the drafter's slot_rows."""
        title = self.query_one("#agg-ref-title", Static)
        table = self.query_one("#agg-ref-slots", FastTable)
        near_title = self.query_one("#agg-ref-near-title", Static)
        near = self.query_one("#agg-ref-near", FastTable)
        title.display = table.display = near_title.display = near.display = reference is not None
        self._ref_spec = None if reference is None else spec or ""
        # with two tables, say whose the first is
        self.query_one("#agg-slots-title", Static).update(
            Text("per slot" if reference is None else "per slot, drafter", style="bold"))
        if reference is None:
            return
        stats = []
        if len(reference):
            from dflash_tui import aggregates  # loaded: the drafter's table counted first

            span = aggregates.every_round(reference) if chosen is None else \
                aggregates.rounds_span(reference, *chosen)
            stats = aggregates.slot_stats(reference, span)
            if any(s.nonfinite for s in stats) and not self._legend_nonfinite:
                self._update("legend", slot_legend(nonfinite=True))  # the reference's n/f cells
        self._draw_ref_title()
        table.set_rows(slot_rows(stats))
        self._fill_near("agg-ref-near", stats)

    def _fill_near(self, name: str, stats) -> None:
        """A near-miss table and its title (the selector's K in it)."""
        self._near_k[name] = next((s.top_k for s in stats if s.top_k), None)
        self._draw_near_title(name)
        self.query_one(f"#{name}", FastTable).set_rows(near_rows(stats))

    def _draw_near_title(self, name: str) -> None:
        self.query_one(f"#{name}-title", Static).update(
            Text(slot_text.near_title(self._near_k.get(name), self._title_width()), style="bold"))

    def on_fast_table_row_highlighted(self, event: FastTable.RowHighlighted) -> None:
        event.stop()
        if event.table.id in ("agg-slots", "agg-ref-slots"):  # the slot is the app's: the other tabs follow
            self.post_message(RanksPanel.SlotSelected(event.cursor_row))

    def _update(self, section: str, text: Text) -> None:
        """A layout pass (which repaints the screen) only when the section's size changes:
        during a run the numbers change every round, the shape seldom."""
        lines = text.plain.split("\n")
        size = (len(lines), max(len(line) for line in lines))
        self.query_one(f"#agg-{section}", Static).update(text, layout=size != self._sizes.get(section))
        self._sizes[section] = size


def range_text(chosen: tuple, dash: str = "–") -> str:
    """A chosen range as the user wrote it: an open end (None) stays open ("5000–", "–9")."""
    return dash.join("" if end is None else str(end) for end in chosen)


def render_title(first_last, count: int, total: int, chosen, mean: Optional[float],
                 reading: Optional[tuple[int, int]] = None, width: Optional[int] = None) -> Text:
    """The span, the `a` hint and the mean accepted, fitted to `width` (None: no limit): the
    hint is shortened, then left out, then "all rounds" ("N of N" says it too), then "mean
    accepted" says "mean", then the counts go; a number is whole or not there (wider than
    the shortest form, the panel scrolls sideways). While replay still reads its trace
    (`reading`), how far it has read stands where "all rounds" and the hint do."""
    if first_last is None:
        span = (f"no completed round in {range_text(chosen)}", "bold yellow")
        counts = None
    else:
        span = (f"rounds {first_last[0]}–{first_last[1]}", "bold")
        counts = (f" ({count} of {total})", "dim")
    every = ("  all rounds", "cyan") if chosen is None else None
    hints = ([" (a: pick a range)", " (a: range)"] if chosen is None else
             ["  (a: another range; empty: all)", "  (a: range; empty: all)", "  (a: range)"])
    means = [""] if mean is None else [f"  mean accepted {mean:.2f}", f"  mean {mean:.2f}"]
    choices = [(counts, every, (hint, "dim"), (means[0], "bold")) for hint in hints] + [
        (counts, every, None, (means[0], "bold")),
        (counts, None, None, (means[0], "bold")),
        (counts, None, None, (means[-1], "bold")),
        (None, None, None, (means[-1], "bold"))]
    if reading is not None:  # how far it has read: kept longest, shortened before it goes
        done, total = reading
        notes = [("  " + reading_text(reading), "yellow"),
                 (f"  reading {100 * done // max(total, 1)}%…", "yellow")]
        choices = [(counts, note, None, (m, "bold")) for note in notes for m in means] + [
            (None, notes[-1], None, (means[-1], "bold")), (None, None, None, (means[-1], "bold"))]
    for parts in choices:
        parts = [span, *(part for part in parts if part is not None)]
        if width is None or sum(len(words) for words, _ in parts) <= width:
            break
    text = Text(no_wrap=True)
    for words, style in parts:
        text.append(words, style=style)
    return text


def reference_title(spec: str, width: Optional[int] = None) -> Text:
    """`per slot, reference SPEC (its own proposals, judged on its own prefix)`, fitted to
    `width` (None: no limit): the note shortened, then on a line of its own (shortened
    again), the spec cut with `…` where it alone is wider (at 80 columns the panel's edge
    cut the note mid-word: `(its own proposals, jud`)."""
    head = f"per slot, reference {spec}"
    notes = ["(its own proposals, judged on its own prefix)", "(own proposals, judged on own prefix)",
             "(own proposals, own prefix)", "(own proposals)"]
    fits = (lambda line: True) if width is None else (lambda line: len(line) <= width)
    note = next((" " + n for n in notes[:2] if fits(f"{head} {n}")), None)
    if note is None:
        note = "\n" + next((n for n in notes if fits(n)), "")
        if not fits(head):
            head = head[: max(width - 1, 0)] + "…"
    text = Text(head, style="bold", no_wrap=True)
    text.append(note.rstrip("\n"), style="dim")
    return text


# help in green and hurt in red where they are not 0
COUNT_STYLES = {SLOT_HEADER.index("help"): "green", SLOT_HEADER.index("hurt"): "red"}


def slot_rows(stats) -> list[list[Text]]:
    """The cells bench --slots prints (slot_text.slot_cells), as the table's Text."""
    rows = []
    for s in stats:
        cells = slot_text.slot_cells(s, DASH)
        rows.append([_count(int(c), COUNT_STYLES[i]) if i in COUNT_STYLES else
                     Text(c, justify="right") for i, c in enumerate(cells)])
    return rows


def near_table(name: str):
    """The title and table of the misses by rank (filled by AggregatesPanel._fill_near)."""
    yield Static(Text(slot_text.near_title(None), style="bold"), id=f"{name}-title",
                 classes="section")
    table = FastTable(id=name, grow_only=False, frozen=1)
    table.add_columns(*(Text(h, justify="right") for h in ["slot", *slot_text.NEAR_HEADER]))
    yield table


def near_rows(stats) -> list[list[Text]]:
    return [[Text(c, justify="right") for c in [str(s.slot), *slot_text.near_cells(s, DASH)]]
            for s in stats]


def slot_legend(nonfinite: bool = False) -> Text:
    """The columns in words; with `nonfinite` (a table holds n/f cells) what n/f means, a
    line only sessions that need it pay for."""
    from dflash_tui.aggregates import TORN  # loaded already: the stats came from there

    return Text("P>=: accepted ≥ s+1 · reach: every earlier slot accepted · acc: once reached"
                "\nargmax: the drafter's argmax was the target's token (reached slots)"
                "\nmean: the target token's mean rank (reached slots)"
                "\nin K: recall over every proposed slot (reached or not, unlike ≤K)"
                "\noff: the token's median rank where the drafter's argmax missed it"
                "\nmiss: reached slots where the argmax missed; of them, the target token"
                "\n  was 2nd, in the top 5, among the K candidates (≤K) or beyond K"
                # the reached slots rejected (acc's misses), not `miss` above (the argmax's)
                "\ntorn: of the reached slots rejected, the share where the target's own top token"
                f" had p < {TORN:g}"
                "\nleft: the walk left the argmax (any proposed slot); on reached slots"
                "\n  it helped / hurt / neither, so help + hurt + neut ≤ left"
                + ("\nn/f: the slot's logits held a NaN or Inf in every round counted; such"
                   "\n  rounds are left out of argmax, mean, off, in K and the misses"
                   if nonfinite else ""),
                style="dim")


def render_rounds(accepted: list, gamma: list, headroom: list) -> Text:
    text = Text(f"last {rounds_count(len(accepted))} of the span\n", style="bold", no_wrap=True)
    text.append("accepted      ", style="dim")
    text.append_text(sparkline(accepted, gamma))
    text.append("\nmin fp16 bits ", style="dim")
    text.append_text(headroom_line(headroom))
    known = [b for b in headroom if not math.isnan(b)]
    if known:
        text.append(f"  lowest {min(known):.1f}", style="bold")
    return text


def render_position(bins) -> Text:
    top = max((b.mean_gamma or 0 for b in bins), default=1) or 1
    text = Text("mean accepted by anchor position\n", style="bold", no_wrap=True)
    for b in bins:
        text.append(f"{b.start:>6}–{b.stop - 1:<6}", style="dim")
        if b.mean_accepted is None:
            text.append("  no rounds\n", style="dim")
            continue
        text.append(bar(b.mean_accepted / top, 16), style="cyan")
        text.append(f" {b.mean_accepted:5.2f}  ({rounds_count(b.rounds)})\n")
    text.rstrip()
    return text


def buffer_rows(stats) -> list[list]:
    """Non-finite buffers first, in the order they went bad: the earliest round, then the
    round's data flow (`stats` comes in pipeline order; the sort is stable), so the top row
    is where the NaN began, as the probes' first non-finite buffer is (a target's NaN in the
    context capture, not a drafter buffer after it with finite values left to rank by
    headroom); then the closest to overflowing fp16."""
    stats = sorted(stats, key=lambda b: (
        (0, b.first_nonfinite_round, 0.0) if b.nonfinite_rounds else
        (1, 0, math.inf if b.min_headroom is None else b.min_headroom)))
    absmax = column([b.max_absmax for b in stats], engine_value=False)
    rows = []
    for b, big in zip(stats, absmax):
        bad = b.nonfinite_rounds > 0
        rows.append([
            Text(b.stage, style="dim"), DASH if b.layer is None else str(b.layer),
            Text(b.name, style="bold red" if bad else ""),
            headroom_cell(b.min_headroom),
            Text(DASH if b.min_headroom_round is None else str(b.min_headroom_round), justify="right"),
            Text(big, justify="right"),
            Text(rounds_count(b.nonfinite_rounds) if bad else "0",
                 style="bold white on red" if bad else "dim", justify="right"),
            Text(DASH if b.first_nonfinite_round is None else str(b.first_nonfinite_round), justify="right"),
        ])
    return rows


def bar(fraction: float, width: int) -> str:
    """A horizontal bar of eighths, `width` characters at most."""
    eighths = max(0, min(round(fraction * width * 8), width * 8))
    full, part = divmod(eighths, 8)
    return ("█" * full + (" ▏▎▍▌▋▊▉"[part] if part else "")).ljust(width)


def headroom_line(bits) -> Text:
    """One glyph per round: taller with more headroom (16 bits and up: full), red below 0,
    yellow below LOW_HEADROOM_BITS, a dot where nothing was measured."""
    text = Text(no_wrap=True)
    for b in bits:
        if b is None or math.isnan(b):
            text.append("·", style="dim")
            continue
        level = min(len(BARS) - 1, max(0, int(b / 16 * (len(BARS) - 1))))
        style = "bold red" if b < 0 else "bold yellow" if b < LOW_HEADROOM_BITS else "green"
        text.append(BARS[level], style=style)
    return text


def _count(n: int, style: str) -> Text:
    return Text(str(n), style=style if n else "dim", justify="right")
