"""`bench --slots`: the aggregates tab's per-slot questions, over every prompt of a workload.

Which slot fails, how often the drafter's argmax is the target's token, whether the true
token was among the selector's candidates, and where the selector's walk helped or hurt:
the TUI answers these for one decode (tab 4); a drafter is judged on many. Each finished
run's rounds go into one History per workload and block (and the pooled `all`), and the
numbers are the TUI's own (`aggregates.slot_stats`), so the two never disagree. Sessions
then compute ranks (the bench otherwise leaves them off), which the speed table pays for.

With --compare the reference's slots are tallied too, from its side of the same rounds
(history.reference_side: its proposals, count, ranks and walk), into Histories of their
own, and counted by the same slot_stats: one table per side, the same columns.
"""

from __future__ import annotations

from typing import Sequence

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..aggregates import TORN, SlotStats, every_round, slot_stats
from ..engine.records import RoundRecord
from ..history import History, drafter_side, reference_side
from ..slot_text import NEAR_HEADER, near_cells, slot_cells
from ..slot_text import SLOT_HEADER as TAB4_HEADER
from .prompts import ALL

# One table per block, no vertical rules: tab 4's columns after the workload's fit 80
# columns (a workload name longer than its header folds onto a second line first).
SLOT_HEADER = ["workload", *TAB4_HEADER]


class SlotTally:
    """Rounds by (workload, block), a prompt's runs tallied once it has finished every block:
    the prompts the other tables count (an interrupted bench reports only those)."""

    def __init__(self, blocks: int) -> None:
        self.blocks = blocks
        self.histories: dict[tuple[str, int], History] = {}
        self.reference: dict[tuple[str, int], History] = {}  # --compare: the reference's side
        self._pending: dict[str, list] = {}  # a prompt's finished runs, until it has all

    def add_run(self, prompt: str, workload: str, block: int,
                records: Sequence[RoundRecord]) -> None:
        runs = self._pending.setdefault(prompt, [])
        runs.append((block, records))
        if len(runs) < self.blocks:
            return
        for block, records in self._pending.pop(prompt):
            for name in (workload, ALL):
                for histories, side in ((self.histories, drafter_side),
                                        (self.reference, reference_side)):
                    if side is reference_side and not any(r.compare for r in records):
                        continue
                    history = histories.setdefault((name, block), History(keep=1, side=side))
                    for record in records:
                        history.add(record)

    def stats(self, workloads: Sequence[str], blocks: Sequence[int],
              reference: bool = False) -> list[tuple[str, int, list[SlotStats]]]:
        """(workload, block, per-slot stats) in table order; `all` only over two workloads
        or more, as the other tables. reference: the --compare reference's slots."""
        histories = self.reference if reference else self.histories
        names = [w for w in workloads if any((w, b) in histories for b in blocks)]
        out = []
        for name in names + ([ALL] if len(names) > 1 else []):
            for block in blocks:
                history = histories.get((name, block))
                if history is not None:
                    out.append((name, block, slot_stats(history, every_round(history))))
        return out


def slot_rows(stats, block: int) -> list[list[str]]:
    rows = []
    for workload, at, slots in stats:
        if at != block:
            continue
        rows += [[workload, *slot_cells(s)] for s in slots]
    return rows


def slot_table(stats, block: int) -> Table:
    table = Table(box=box.SIMPLE_HEAD, padding=0, show_edge=False,
                  title=f"block {block}", title_justify="left")
    table.add_column(SLOT_HEADER[0], overflow="fold")  # the one that gives way
    for header in SLOT_HEADER[1:]:
        table.add_column(header, justify="right", no_wrap=True)
    for row in slot_rows(stats, block):
        table.add_row(*row, style="dim" if row[0] == ALL else None)
    return table


def near_rows(stats, block: int) -> list[list[str]]:
    return [[workload, str(s.slot), *near_cells(s)]
            for workload, at, slots in stats if at == block for s in slots]


def near_table(stats, block: int) -> Table:
    """Where the argmax missed, how near the target's token was: the aggregates tab's
    second table, a row per workload and slot."""
    top_k = next((s.top_k for _, at, slots in stats if at == block for s in slots if s.top_k),
                  None)
    table = Table(box=box.SIMPLE_HEAD, padding=0, show_edge=False,
                  title=f"block {block}, argmax missed" + (f" (K = {top_k})" if top_k else ""),
                  title_justify="left")
    for i, header in enumerate(["workload", "slot", *NEAR_HEADER]):
        table.add_column(header, justify="left" if i == 0 else "right", no_wrap=True)
    for row in near_rows(stats, block):
        table.add_row(*row, style="dim" if row[0] == ALL else None)
    return table


CAPTION = ("P>= = share of rounds proposing the slot that accepted it and all before it; "
           "reach = rounds whose earlier slots were all accepted; acc = accepted once reached; "
           "argmax = the drafter's top token was the target's (reached slots); mean = the "
           "target token's mean rank in the drafter's logits (reached slots); off = where it "
           "was not the top, its median rank; in K = "
           "among the selector's candidates, over every proposed slot (reached or not, unlike "
           "≤K); "
           "miss = reached slots where the argmax was wrong; of them, the target's token was "
           "2nd, within the top 5 (≤5), among the selector's K candidates (≤K) or beyond K; "
           # torn is over the reached slots the target rejected (what acc misses), not over
           # `miss` above: with a selector the two differ wherever its walk helped or hurt
           f"torn = of the reached slots rejected (acc's misses, not the argmax's), the share "
           f"where the target's own top token had p < {TORN:g}; "
           "left = the selector's walk left the argmax, on any proposed slot; on the reached ones "
           "it helped (help: the argmax was wrong, the pick right), hurt (the other way) or "
           "neither (neut), so help + hurt + neut ≤ left.")


def to_json(stats) -> list[dict]:
    return [{"workload": workload, "block": block, "slots": [
        {"slot": s.slot, "proposed": s.proposed, "accepted": s.accepted, "reached": s.reached,
         "at_least": s.at_least, "acceptance": s.acceptance, "rank0": s.rank0,
         "ranked": s.ranked, "rank0_rate": s.rank0_rate, "rank_mean": s.rank_mean,
         "rank_median": s.rank_median, "off_rank_median": s.off_rank_median,
         "in_k": s.in_k, "in_k_known": s.in_k_known,
         "off_ranked": s.off_ranked, "off_second": s.off_second, "off_top5": s.off_top5,
         "off_in_k": s.off_in_k, "off_in_k_known": s.off_in_k_known, "top_k": s.top_k,
         "off_second_rate": s.off_second_rate, "off_top5_rate": s.off_top5_rate,
         "off_in_k_rate": s.off_in_k_rate, "off_beyond_k_rate": s.off_beyond_k_rate,
         "missed": s.missed, "torn": s.torn, "left": s.left, "helped": s.helped,
         "hurt": s.hurt, "neutral": s.neutral, "nonfinite": s.nonfinite,
         "nonfinite_reached": s.nonfinite_reached,
         "nonfinite_in_k_known": s.nonfinite_in_k_known} for s in slots]}
        for workload, block, slots in stats]


def stats_of(result, reference: bool = False) -> list:
    """The per-slot stats of a bench result (BenchResult with --slots): the drafter's, or
    the --compare reference's."""
    return result.slots.stats([w.name for w in result.workloads], list(result.settings.blocks),
                              reference)


def render(result) -> Group:
    sides = [("", stats_of(result))]
    if result.compare:
        sides.append((f", reference {result.compare} on the same committed stream",
                      stats_of(result, reference=True)))
    parts = []
    for title, stats in sides:
        parts += [Text(""),
                  Text(f"Per slot, over every round of each workload{title}  [deterministic]",
                       style="bold"),
                  *(table for block in result.settings.blocks
                    for table in (slot_table(stats, block), near_table(stats, block)))]
    nonfinite = any(s.nonfinite for _, stats in sides for _, _, slots in stats for s in slots)
    parts.append(Text(CAPTION + (REFERENCE_CAPTION if result.compare else "")
                      + (NONFINITE_CAPTION if nonfinite else ""), style="dim"))
    return Group(*parts)


REFERENCE_CAPTION = (" The reference's slots are its own proposals, judged against the "
                     "target's tokens after its own accepted prefix (torn: where that prefix "
                     "is the drafter's too).")
NONFINITE_CAPTION = (" n/f = the slot's logits held a NaN or Inf in every round the cell "
                     "counts (argmax, mean, off: the reached ones; in K: every proposed one), "
                     "where its rank, the vocabulary - 1, is no rank; rounds whose logits did "
                     "are left out of argmax, mean, off, in K and the argmax-missed table.")
