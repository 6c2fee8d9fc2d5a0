"""How numbers and axes read: a column of numbers in one format (its decimal points line up
when right-justified), slot axes that never wrap, the status line's parts never cut."""

from __future__ import annotations

import math

import pytest

from dflash_tui.panels.format import column, sci
from dflash_tui.panels.history import LABEL, render_history, slot_ruler
from dflash_tui.panels.history import sparkline as sparkline_of
from dflash_tui.panels.status import fit_parts


@pytest.mark.parametrize("values", [
    [28.0, 11.7, -0.02552],  # logits and an edge score: fixed point, shared decimals
    [0.00012, 3.0, -250.0],  # magnitudes fixed point cannot show: scientific for all
    [1.5e6, 2.0, None, float("nan")],
])
def test_a_column_has_one_format_and_lines_up(values):
    cells = column(values)
    numbers = [c for c, v in zip(cells, values) if v is not None and math.isfinite(v)]
    width = max(len(c) for c in numbers)
    points = {c.rjust(width).index(".") for c in numbers}
    assert len(points) == 1, cells
    assert all(("e" in c) == ("e" in numbers[0]) for c in numbers), cells
    for cell, value in zip(cells, values):
        if value is not None and math.isfinite(value):
            assert float(cell) == pytest.approx(value, rel=0.01, abs=0.006)
        else:
            assert cell == "n/f"  # the engine always has a number there: NaN / Inf / null


def test_probe_statistics_line_up_whatever_their_magnitude():
    cells = [sci(x) for x in (28.0, 11.7, -0.02552, 1e-9, 65504.0)]
    assert len({c.rjust(9).index(".") for c in cells}) == 1


def test_the_slot_axis_never_wraps_and_marks_the_selected_slot():
    ruler = slot_ruler(15, selected=12)
    assert len(ruler.plain) == 30  # two characters a slot, however many digits
    assert ruler.plain[0:2] == "0 " and ruler.plain[10:12] == "5 " and ruler.plain[20:22] == "10"
    assert ruler.plain[24:26] == "12"
    assert slot_ruler(3, selected=0).plain == "0 · · "  # γ 3: three slots, not the 15 of before


def test_every_slot_of_the_round_has_a_bar_in_the_80_column_layout():
    """γ 15 in the history panel at 80 columns (32 characters inside its border): one
    character a slot rather than the first 11 slots of two. The selected slot keeps its
    number and value where its percentage does not fit: this test once asserted the axis
    alone (`s12 20%` needs 8 characters, 7 are left), and a user could not tell which slot
    the mark on the axis was; then the number alone, which read as a value missing."""
    by_slot = [(15 - s, 15) for s in range(15)]
    lines = render_history([3, 5], [15, 15], by_slot, slot=12, width=32).plain.split("\n")
    assert all(len(line) <= 32 for line in lines)
    assert lines[-1][LABEL:] == "0····5····10··· s12 20"
    full = [(15, 15)] * 15  # 100%: `s0 100%` does not fit either; `s0 100` does
    assert render_history([3], [15], full, slot=0, width=32).plain.split("\n")[-1].endswith("··· s0 100")
    assert len(lines[-2][LABEL:].rstrip()) == 15  # the bottom line of bars: one per slot
    assert slot_ruler(15, selected=12, column=1).spans[-1].style == "dim"  # after the marked 12
    wide = render_history([3], [15], by_slot, slot=0, width=60).plain.split("\n")
    assert wide[-1] == " " * LABEL + slot_ruler(15, selected=0).plain + " s0 100% (15/15)"


@pytest.mark.parametrize("gamma", [19, 23, 30, 99])
def test_slots_that_do_not_fit_are_counted_and_the_selected_one_keeps_its_number(gamma):
    """γ above 22 at 80 columns (`+` in the live app) used to drop the last slots' bars in
    silence. Now every slot that fits is drawn (22 of them: 32 characters less the label),
    the rest counted after the axis, and a selected slot among those left out named (one
    drawn is marked on the axis)."""
    by_slot = [(gamma - s, gamma) for s in range(gamma)]
    room = 32 - LABEL
    for slot in (0, 12, gamma - 1):
        lines = render_history([3, 5], [gamma, gamma], by_slot, slot=slot, width=32).plain.split("\n")
        assert all(len(line) <= 32 for line in lines), lines
        drawn = len(lines[-2][LABEL:].rstrip())  # the bottom line of bars: one per slot drawn
        axis = lines[-1][LABEL:]
        if gamma <= room:
            assert drawn == gamma and "…" not in axis, axis
            continue
        assert axis[drawn:].startswith(f"…+{gamma - drawn}"), axis
        if slot < drawn:
            assert drawn + len(f"…+{gamma - drawn}") >= room - 1, axis  # no room kept back
        else:  # named with its value (room is kept for it)
            a, n = by_slot[slot]
            assert axis.endswith(f" s{slot} {100 * a / n:.0f}") and drawn >= 12, axis


@pytest.mark.parametrize("accepted", [15, 12, 0])  # 100%, 80%, 0%
def test_every_selected_slot_shows_its_value_at_80_columns(accepted):
    """γ 15 at 80 columns leaves 7 characters after the bars: slot 0 at 100% read `s0`
    alone (`s0 100%` needs 8), as if its number were missing. Each slot shows a value, the
    `%` left out where it does not fit (`s0 100`, `s12 80`), and where that is still too
    wide (a two-digit slot at 100%), with no space before it after the axis's last dot
    (`···s14 100`)."""
    by_slot = [(accepted, 15)] * 15
    value = f"{100 * accepted / 15:.0f}"
    for slot in range(15):
        last = render_history([3], [15], by_slot, slot=slot, width=32).plain.split("\n")[-1]
        assert len(last) <= 32, last
        assert last[LABEL:LABEL + 15] == slot_ruler(15, selected=slot, column=1).plain, last
        assert last[LABEL + 15:].strip() in (f"s{slot} {value}%", f"s{slot} {value}"), last
    assert render_history([3], [15], by_slot, slot=14, width=32).plain.endswith(
        {"100": "···s14 100", "80": "··· s14 80", "0": "··· s14 0%"}[value])


@pytest.mark.parametrize("gamma", [4, 15, 23])
def test_a_narrow_history_keeps_to_its_width_and_gives_the_labels_room_to_the_bars(gamma):
    """The app's history is 32 characters wide at least (the left column's min-width), but
    render_history kept its labels and 4 characters of bars whatever the width: under 14
    its lines ran past the edge, and at 16 the labels left room for no bar (`…+15` alone).
    Every line now keeps to the width; under LABEL + 8 the labels go and the bars take
    their room, those that do not fit counted."""
    by_slot = [(gamma - s, gamma) for s in range(gamma)]
    for width in range(1, 40):
        for slot in (0, gamma - 1):
            lines = render_history([3, 0, 5] * 20, [gamma] * 60, by_slot, slot=slot,
                                   width=width).plain.split("\n")
            assert all(len(line) <= width for line in lines), (width, slot, lines)
    sparkline, top, bottom, axis = render_history([3, 0, 5], [gamma] * 3, by_slot, slot=0,
                                                  width=12).plain.split("\n")
    assert sparkline == sparkline_of([3, 0, 5], [gamma] * 3).plain  # no label before it
    drawn = len(bottom.replace(" ", ""))  # a bar a slot (every slot here has a rate > 0)
    assert drawn == gamma or axis[drawn:].startswith(f"…+{gamma - drawn}"), axis
    assert drawn >= min(gamma, 8), bottom  # the labels' room went to the bars


def test_the_selected_slot_keeps_its_percentage_when_the_counts_grow():
    """At 80 columns (32 characters inside the border), γ 3: four-digit counts leave no
    room for them, and the percentage stays."""
    by_slot = [(920, 1221), (600, 1221), (300, 1221)]
    lines = render_history([3, 5], [3, 3], by_slot, slot=0, width=32).plain.split("\n")
    assert lines[-1] == " " * LABEL + slot_ruler(3, selected=0).plain + " s0 75%"
    few = render_history([3], [3], [(92, 122), (60, 122), (3, 122)], slot=0, width=32)
    assert few.plain.split("\n")[-1].endswith(" s0 75% (92/122)")  # room for the counts


def test_the_aggregates_title_gives_up_its_hint_before_a_number():
    from dflash_tui.panels.aggregates import render_title

    full = render_title((0, 1234), 1235, 1235, None, 1.16).plain
    assert full == "rounds 0–1234 (1235 of 1235)  all rounds (a: pick a range)  mean accepted 1.16"
    for width in range(24, len(full) + 1):  # 24: the shortest form, "rounds 0–1234  mean 1.16"
        for chosen in (None, (100, None), (None, 1234)):
            text = render_title((0, 1234), 1235, 1235, chosen, 1.16, width=width).plain
            assert len(text) <= width and text.endswith(" 1.16"), (width, text)
    assert render_title(None, 0, 9, (5000, None), None).plain.startswith("no completed round in 5000–  ")


def test_status_parts_are_whole_or_short_never_cut():
    parts = [("breaks: non-finite, accepted=0", "⚑ non-finite, accepted=0"),
             ("files → dflash-snapshots/20250301-142233/", "→ …/20250301-142233/")]
    assert fit_parts(parts, 200) == "breaks: non-finite, accepted=0  files → dflash-snapshots/20250301-142233/"
    assert fit_parts(parts, 60) == "breaks: non-finite, accepted=0  → …/20250301-142233/"
    assert fit_parts(parts, 30) == "⚑ non-finite, accepted=0"


def test_a_slots_mean_rank_keeps_its_precision_beside_a_huge_one():
    from dflash_tui.panels.format import DASH
    from dflash_tui.slot_text import rank_mean

    shown = [rank_mean(v, DASH) for v in (0.21, 12.345, 1045.0, 16658.0, 3e6, None)]
    assert shown == ["0.21", "12.3", "1045", "16658", "3e+06", "—"]
    # the table widens a column to its widest cell (nothing is cut); these keep it narrow
    assert all(len(s) <= 6 for s in shown)


def test_a_median_rank_where_the_argmax_missed_is_never_cut_smaller():
    from dflash_tui.panels.format import DASH
    from dflash_tui.slot_text import off_rank

    shown = [off_rank(v, DASH) for v in (1.0, 2.5, 999.5, 1587.5, 12345.5, 123456.0, None)]
    assert shown == ["1", "2.5", "999.5", "1588", "12346", "1e+05", "—"]
    assert all(len(s) <= 5 for s in shown)


def test_a_drift_row_non_finite_on_one_side_shows_no_max_diff_of_0():
    """`n/f  ref only  0` read as "no difference": max |Δ| is over the values finite on both
    sides (docs/COMPARE.md), so a row non-finite on one side with none of those differing
    shows `—`; a finite row's 0 stays 0, a difference its number."""
    from dflash_tui.engine.records import BufferDrift, Compare
    from dflash_tui.panels.compare import drift_rows

    buffers = (BufferDrift("draft", 0, "h", 0.0, None, "reference"),
               BufferDrift("draft", 0, "q", 2.5e-3, None, "primary"),
               BufferDrift("draft", 1, "h", 0.0, 0.0),
               BufferDrift("draft", 1, "q", 1.5e-3, 2e-4))
    compare = Compare(spec="dtype=float16", proposals=(), accepted=0, ranks=(), buffers=buffers)
    shown = [row[6].plain for row in drift_rows(compare, None, pinned=False)]
    assert shown == ["—", sci(2.5e-3), "0", sci(1.5e-3)]


def test_the_summarys_nonfinite_line_names_the_side_as_its_marked_row_does():
    """Under the ▶ line (a rounding-level divergence), `✗ n/f from ...` names the side that
    went NaN / Inf in the words of the drift row it marks ✗ (`drafter`, `ref only`,
    `both`): it said `drafter only` and `both sides` beside a row reading `drafter`, `both`."""
    from dflash_tui.engine.records import BufferDrift, Compare, first_divergent
    from dflash_tui.panels.compare import drift_rows, nonfinite_line

    for side in ("primary", "reference", "both"):
        buffers = (BufferDrift("draft", 0, "q", 2.5e-3, 0.02), BufferDrift("draft", 0, "h", 0.0, None, side))
        compare = Compare(spec="dtype=float16", proposals=(1, 2), accepted=0, ranks=(0, 0),
                          buffers=buffers, first_divergent=first_divergent(buffers, 0.01))
        marked, = [row for row in drift_rows(compare, None, pinned=False) if row[0].plain == "✗"]
        assert nonfinite_line(compare).plain == f"✗ n/f from draft L0 h, {marked[5].plain}", side


def test_a_drift_row_shows_the_rms_relative_error_beside_the_absmax_one():
    """A buffer with a few huge values read `rel err 1.16e-02` for a real change: the rms
    column says how much of the buffer moved; `—` where a recording predates it or one side
    is non-finite."""
    from dflash_tui.engine.records import BufferDrift, Compare
    from dflash_tui.panels.compare import DRIFT_COLUMNS, drift_rows

    buffers = (BufferDrift("context", None, "capture", 289.0, 0.0116, rms_rel_err=0.62),
               BufferDrift("draft", 0, "h", 0.0, 0.0, rms_rel_err=0.0),
               BufferDrift("draft", 0, "q", 2.5e-3, None, "primary"),
               BufferDrift("draft", 1, "q", 1.5e-3, 2e-4))  # a trace written before the rms
    compare = Compare(spec="layer-offset=1", proposals=(), accepted=0, ranks=(), buffers=buffers)
    column = DRIFT_COLUMNS.index("rms rel")
    rows = drift_rows(compare, None, pinned=False)
    assert [row[column].plain for row in rows] == ["6.20e-01", "0", "—", "—"]
    assert [row[DRIFT_COLUMNS.index("rel err")].plain for row in rows][:2] == ["1.16e-02", "0"]


def test_the_reference_tables_title_reads_whole_in_its_width():
    """At 80 columns the title was cut by the panel's edge mid-word (`(its own proposals,
    jud`): the note is shortened, then goes on a line of its own, and a spec wider than the
    width ends in `…`."""
    from dflash_tui.panels.aggregates import reference_title

    head = "per slot, reference layer-offset=-1"
    long = f"{head} (its own proposals, judged on its own prefix)"
    assert reference_title("layer-offset=-1").plain == long
    for width in range(16, len(long) + 1):
        lines = reference_title("layer-offset=-1", width).plain.split("\n")
        assert all(len(line) <= width for line in lines), (width, lines)
        assert lines[0] == head[: width - 1] + "…" if len(head) > width else lines[0].startswith(head)
        assert lines[-1].endswith((")", "…", "-1")) and lines[-1].count("(") == lines[-1].count(")"), lines
    assert reference_title("layer-offset=-1", 40).plain == f"{head}\n(own proposals, judged on own prefix)"
    assert reference_title("dtype=float16,residual-scale=0.25", 40).plain == \
        "per slot, reference dtype=float16,resid…\n(own proposals, judged on own prefix)"


def test_a_line_cut_to_its_width_ends_in_an_ellipsis_after_a_whole_number():
    """The selector's note (`off argmax at slots 0, 2, 4, …, 14  top-K 8`) stopped at the
    panel's edge with no `…`, a slot number cut (`10, 1`)."""
    from rich.text import Text

    from dflash_tui.panels.selector import fit_line

    line = Text("off argmax at slots 0, 2, 4, 6, 8, 10, 12, 14  top-K 8")
    assert fit_line(line, None).plain == line.plain == fit_line(line, len(line)).plain
    for width in range(12, len(line)):
        text = fit_line(line, width).plain
        assert len(text) <= width and text.endswith(" …"), (width, text)
        assert text[:-2].rstrip(",") in line.plain and not text[:-2].endswith(" 1"), text


def test_the_selector_note_ends_in_an_ellipsis_where_the_panel_cuts_it():
    from rich.text import Text
    from textual.app import App

    from dflash_tui.panels.selector import SelectorPanel

    from app_helpers import run, widget_text

    class Narrow(App):
        CSS = "SelectorPanel { width: 40; }"

        def compose(self):
            yield SelectorPanel()

    async def scenario():
        app = Narrow()
        async with app.run_test(size=(80, 24)) as pilot:
            app.query_one(SelectorPanel)._note(Text.assemble(
                ("off argmax at slots 0, 2, 4, 6, 8, 10, 12, 14", "bold magenta"), ("  top-K 8", "dim")))
            await pilot.pause()
            shown = widget_text(app, app.query_one("#selector-note")).strip()
            assert shown == "off argmax at slots 0, 2, 4, 6, 8, …", shown

    run(scenario())
