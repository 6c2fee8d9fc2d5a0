"""Per-slot numbers as both the TUI's aggregates tab (panels/aggregates.py) and `bench --slots`
(dflash_tui/bench/slots.py) write them, written once so the two never disagree. Plain
Python: panels/ may not import MLX, nor the bench the Textual panels."""

from __future__ import annotations

from typing import Optional


# A value that was NaN or Inf, as every table writes it (the panels' too: panels/format.py).
# A cell counted from ranks (argmax, mean, off, the near-miss cells) or candidates (in K)
# reads it where every such slot had NaN / Inf logits (SlotStats.nonfinite): rank_of's
# vocabulary - 1 there read like a real rank (off 319 for a float16 reference that overflowed).
NONFINITE = "n/f"


def from_ranks(stats, cell: str) -> str:
    """A cell of a SlotStats counted from its reached slots' ranks, or n/f where their
    logits were all non-finite."""
    return NONFINITE if stats.ranks_nonfinite else cell


def from_candidates(stats, cell: str) -> str:
    """The in K cell (counted from the selector's candidates, every proposed slot), or n/f
    where their logits were all non-finite."""
    return NONFINITE if stats.in_k_nonfinite else cell


# The per-slot table's columns, tab 4's and (after its workload) `bench --slots`' alike:
# one list, so that neither can leave a column out (the bench once left out mean and neut).
SLOT_HEADER = ["slot", "P>=", "reach", "acc", "argmax", "mean", "off", "in K", "torn", "left",
               "help", "hurt", "neut"]


def slot_cells(stats, dash: str = "-") -> list[str]:
    """A SlotStats's cells under SLOT_HEADER, as both tables write them (`dash` where a
    share has no rounds to count)."""
    def pct(x) -> str:
        return percent(x, dash)

    return [str(stats.slot), pct(stats.at_least), str(stats.reached), pct(stats.acceptance),
            from_ranks(stats, pct(stats.rank0_rate)),
            from_ranks(stats, rank_mean(stats.rank_mean, dash)),
            from_ranks(stats, off_rank(stats.off_rank_median, dash)),
            from_candidates(stats, pct(stats.recall)), pct(stats.torn_rate), str(stats.left),
            str(stats.helped), str(stats.hurt), str(stats.neutral)]


def rank_mean(mean: Optional[float], dash: str = "-") -> str:
    """Each slot's mean rank in its own precision: one slot whose true token once ranked in
    the thousands must not round every other slot's 0.21 to 0."""
    if mean is None:
        return dash
    if mean < 9.995:
        return f"{mean:.2f}"
    if mean < 99.95:
        return f"{mean:.1f}"
    return f"{mean:.0f}" if mean < 1e5 else f"{mean:.0e}"


def off_rank(median: Optional[float], dash: str = "-") -> str:
    """A median rank where the drafter's argmax missed (a whole number or a half) in five
    characters at most, the aggregates tab's column: 2.5, 861, 1588, then 1e+05; never cut
    to a smaller number. `dash` where no slot missed."""
    if median is None:
        return dash
    if median < 1000:
        return f"{median:g}"
    return f"{median:.0f}" if median < 1e5 else f"{median:.0e}"


# Where the drafter's argmax missed on a reached slot, how near the target's token was
# (aggregates.SlotStats.off_*): the same columns in the aggregates tab and `bench --slots`.
NEAR_HEADER = ["miss", "2nd", "≤5", "≤K", ">K"]


def near_cells(stats, dash: str = "-") -> list[str]:
    """A SlotStats's near-miss cells: the misses counted, then the cumulative shares (2nd,
    within the top 5, among the selector's K candidates) and the share beyond K; n/f where
    its reached slots' logits were all non-finite."""
    if stats.ranks_nonfinite:
        return [NONFINITE] * len(NEAR_HEADER)
    return [str(stats.off_ranked), *(percent(x, dash) for x in (
        stats.off_second_rate, stats.off_top5_rate, stats.off_in_k_rate,
        stats.off_beyond_k_rate))]


def near_title(top_k, width: Optional[int] = None) -> str:
    """What the near-miss table counts, with the selector's K where the records give it
    (the `≤K` and `>K` columns mean nothing without it), fitted to `width` (None: no limit):
    the words shortened, K kept. At 80 columns tab 4 has 41, and the whole title cut off
    its K: `argmax missed: the true token's rank (K =`."""
    k = "" if not top_k else f" (K = {top_k})"
    titles = [f"argmax missed: the true token's rank{k}", f"argmax missed: true token's rank{k}",
              f"argmax missed: true rank{k}"]
    return next((t for t in titles if width is None or len(t) <= width), titles[-1])


def percent(x, dash: str = "-") -> str:
    return dash if x is None else f"{100 * x:.0f}%"
