"""`bench-diff --by-slot`: where two benches' rounds end, slot by slot.

For each workload and block, slot s's survival rate in each bench: of the rounds that
proposed slot s with every proposal before it accepted, the share that accepted slot s too,
P(accepted >= s+1 | accepted >= s). It is the bench's own "alpha per position" (stats.py
`positions`), pooled over the prompts both benches ran. Slots are numbered from 0, as in
tab 4 and `bench --slots`, so a column is the slot those call by its number. Two drafters
with the same mean can lose their rounds in different places: a low slot 0 is the first
token after the target's own (what the drafter guesses from the context alone), a falling
tail is a block that drifts.
"""

from __future__ import annotations

from rich import box
from rich.table import Table

from .diff import _signed
from .stats import ALL, RoundStat, positions

MAX_SLOTS = 32  # columns; a block past this shows its first 32 slots


def survival(runs: list, side: int, block: int) -> list:
    """Slot 0..block-1's P(accepted >= s+1 | accepted >= s) over the runs' rounds (None: no
    round reached the slot with the ones before it accepted)."""
    rounds = [RoundStat(gamma=g, accepted=a, committed=0, stage_ms=())
              for run in runs for g, a in run[side].per_round]
    return [p.conditional for p in positions(rounds, min(block, MAX_SLOTS))]


def slot_tables(groups: dict, width: int) -> list[Table]:
    """groups: diff.paired's (workload, block) -> [(prompt, A's run, B's run)]. One table per
    run of slots that fits `width` columns (block 15 at 80 columns: slots 0-7, then 8-14)."""
    widest = min(max(block for _, block in groups), MAX_SLOTS)
    rates = {}  # (workload, block) -> (A's, B's) survival per slot
    for block in sorted({blk for _, blk in groups}):
        named = [(w, runs) for (w, blk), runs in groups.items() if blk == block]
        if len(named) > 1:
            named.append((ALL, [run for _, runs in named for run in runs]))
        for workload, runs in named:
            rates[(workload, block)] = survival(runs, 1, block), survival(runs, 2, block)
    per_table = max(1, (width - LABELS_WIDTH) // SLOT_WIDTH)
    tables = [_table(rates, range(first, min(first + per_table, widest)))
              for first in range(0, widest, per_table)]
    longer = sorted({block for _, block in groups if block > MAX_SLOTS})
    if longer:  # not silently: the table's last column would read as the block's last slot
        tables[-1].caption = "; ".join(f"block {block}: slots {MAX_SLOTS} to {block - 1} left out"
                                       for block in longer)
        tables[-1].caption_justify = "left"
    return tables


LABELS_WIDTH, SLOT_WIDTH = 24, 7  # workload, block and A/B columns; a slot's "+0.00" and its gap
# Cropped at this width or more, a table loses only its blank edge; narrower, the digits
MIN_WIDTH = LABELS_WIDTH + SLOT_WIDTH


def _table(rates: dict, slots: range) -> Table:
    title = "by slot: P(slot s accepted | slots before it accepted), slots from 0"
    # one space between columns: seven slots of "+0.00" fit 80 columns whole
    t = Table(title=title if slots.start == 0 else None, title_justify="left",
              box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True)
    for name in ("workload", "block", ""):
        t.add_column(name, justify="right" if name == "block" else "left", no_wrap=True)
    for slot in slots:
        t.add_column(str(slot), justify="right", no_wrap=True, min_width=5)
    for (workload, block), (a, b) in rates.items():
        if len(a) <= slots.start:  # a shorter block has no slot in this table: no empty rows
            continue
        shown = [s for s in slots if s < len(a)]
        pad = [""] * (len(slots) - len(shown))
        t.add_row(workload, str(block), "A", *(_rate(a[i]) for i in shown), *pad)
        t.add_row("", "", "B", *(_rate(b[i]) for i in shown), *pad)
        t.add_row("", "", "B - A", *(_change(None if a[i] is None or b[i] is None else b[i] - a[i])
                                     for i in shown), *pad, end_section=True)
    return t


def _rate(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def _change(value) -> str:
    return "-" if value is None else _signed(value)
