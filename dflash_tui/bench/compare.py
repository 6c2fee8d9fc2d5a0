"""`bench --compare SPEC`: the reference configuration's acceptance beside the drafter's.

Every round of every decode carries the reference's accepted count on the same committed
stream (engine/compare.py), so the reference's tables are the ordinary ones computed from
the same rounds with its counts in place of the drafter's: no second decode, and the two
sides differ only by what their drafters proposed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Optional, Sequence

from rich.console import Group
from rich.text import Text

from ..engine.codec import encode
from ..probe import left_out_line, once_each
from .runner import BenchResult, nonfinite_logits
from .stats import Cell
from .tables import DASH, _section, _table, num, position_rows


def reference_result(result: BenchResult) -> BenchResult:
    """The same runs, each round's accepted count and non-finite logit count replaced by the
    reference's (its cells then count its own NaN / Inf rounds, not the drafter's)."""
    runs = [replace(run, rounds=tuple(
                replace(r, accepted=r.compare_accepted,
                        nonfinite_logit_count=r.compare_nonfinite_logit_count)
                for r in run.rounds))
            for run in result.spec_runs]
    return replace(result, spec_runs=runs)


def side_by_side_rows(primary: Sequence[Cell], reference: Sequence[Cell],
                      blocks: Sequence[int]) -> list[list[str]]:
    """workload, then per block: the drafter's mean accepted, the reference's, reference -
    drafter."""
    ref = {(c.workload, c.block): c for c in reference}
    rows: dict[str, list[str]] = {}
    for c in primary:
        r = ref[(c.workload, c.block)]
        mine, theirs = c.mean_accepted, r.mean_accepted
        diff = None if mine is None or theirs is None else theirs - mine
        rows.setdefault(c.workload, [c.workload]).extend(
            [num(mine), num(theirs), DASH if diff is None else f"{diff:+.2f}"])
    return list(rows.values())


def _rounds(result: BenchResult) -> list:
    return [r for run in result.spec_runs if run.prompt.id in result.finished_prompt_ids()
            for r in run.rounds]


def left_out(result: BenchResult) -> list:
    """The buffers the drift could not compare in any round (records.LeftOut), once each."""
    return once_each(b for r in _rounds(result) for b in r.compare_left_out)


def first_divergent(rounds) -> Counter:
    """How many rounds first diverged beyond the tolerance at each buffer; a round within
    it in every buffer counts at none."""
    return Counter(r.compare_divergent for r in rounds if r.compare_divergent)


SHOWN_BUFFERS = 4  # the divergence line names the commonest; the rest are counted


def divergence_line(result: BenchResult) -> Text:
    rounds = _rounds(result)
    where = first_divergent(rounds)
    diverged = sum(where.values())
    line = (f"the configurations diverge beyond the tolerance in {diverged} of {len(rounds)} "
            "rounds")
    if where:
        ranked = where.most_common()
        shown, rest = ranked[:SHOWN_BUFFERS], ranked[SHOWN_BUFFERS:]
        line += "; first at: " + ", ".join(f"{w} ({n})" for w, n in shown)
        if rest:  # every diverged round is accounted for: the named ones add up with these
            more = sum(n for _, n in rest)
            line += (f" and {more} more in {len(rest)} other "
                     f"buffer{'s' * (len(rest) != 1)}")
    return Text(line)


def nonfinite_line(result: BenchResult) -> Optional[Text]:
    """Where the reference (or the drafter, against it) went NaN / Inf, pooled: rounds whose
    reference logits held one, and rounds with a buffer non-finite on one side only, by the
    first such buffer. The divergence line names the first buffer beyond the tolerance,
    which against a bfloat16 drafter is float16's rounding, well before an overflow."""
    rounds = _rounds(result)
    logits = sum(1 for r in rounds if r.compare_nonfinite_logit_count)
    where = Counter(r.compare_nonfinite for r in rounds if r.compare_nonfinite)
    if not logits and not where:
        return None
    parts = []
    if logits:
        parts.append(nonfinite_logits(logits, len(rounds), whose="REFERENCE LOGITS"))
    if where:
        ranked = where.most_common()
        named = ", ".join(f"{w} ({n})" for w, n in ranked[:SHOWN_BUFFERS])
        rest = sum(n for _, n in ranked[SHOWN_BUFFERS:])
        parts.append(f"a buffer non-finite on one side only in {sum(where.values())} of "
                     f"{len(rounds)} rounds; first at: {named}"
                     + (f" and {rest} more" if rest else ""))
    return Text("; ".join(parts), style="bold red")


def drift_json(rounds) -> dict:
    """What the divergence and non-finite lines say, for a set of rounds: how many had the
    reference beside them, how many diverged beyond the tolerance, and by their first
    divergent buffer (most rounds first); how many had a buffer non-finite on one side only,
    by the first of them."""
    where = first_divergent(rounds)
    bad = Counter(r.compare_nonfinite for r in rounds if r.compare_nonfinite)
    return {"rounds_compared": len(rounds), "rounds_diverged": sum(where.values()),
            "first_divergent": dict(where.most_common()),
            "rounds_nonfinite": sum(bad.values()), "first_nonfinite": dict(bad.most_common())}


def render(result: BenchResult) -> Group:
    blocks = list(result.settings.blocks)
    primary, reference = result.cells(), reference_result(result).cells()
    missing = left_out(result)
    heads = [h for b in blocks for h in (f"block {b}", "ref", "diff")]
    side = _table(["workload"] + heads, side_by_side_rows(primary, reference, blocks))
    return Group(
        _section(
            f"Accepted per round: drafter vs reference {result.compare} on the same committed "
            "stream  [deterministic]",
            side,
            "block b = the drafter's mean accepted proposals per round; ref = how many of the "
            "reference's own proposals the target accepts in the same rounds; diff = ref - "
            "drafter."),
        _section(
            f"Acceptance by position, reference {result.compare}: P(accepted >= i)  "
            "[deterministic]",
            _table(["workload", "block", "rounds", "tokens", "tau"]
                   + [str(i) for i in range(1, max(blocks) + 1)],
                   position_rows(reference, blocks), first_left=2),
            "as the drafter's table above, with the reference's accepted counts; rounds and "
            "tokens are the drafter's decode."),
        divergence_line(result),
        *([bad] if (bad := nonfinite_line(result)) is not None else []),
        *([Text(left_out_line(missing))] if missing else []),
    )


def to_json(result: BenchResult) -> dict:
    from .export import cell_json
    from .slots import stats_of
    from .slots import to_json as slots_json

    cells = []
    for c, (_, _, runs) in zip(reference_result(result).cells(), result.cell_runs()):
        cell = cell_json(c)
        # The decode's timings and its lossless check (`checked`, `diverged`: prompts
        # compared with the target's own decode) are the drafter's, in the top-level cells;
        # here, the drift instead.
        for key in ("speed", "checked", "diverged"):
            cell.pop(key)
        cell.update(drift_json([r for run in runs for r in run.rounds]))
        cells.append(cell)
    out = {"spec": result.compare, "tolerance": result.compare_tol,
           **drift_json(_rounds(result)),  # the divergence line's numbers, over every round
           "cells": cells, "left_out": [encode(b) for b in left_out(result)]}
    if result.slots is not None:  # --slots: the reference's per-slot table too
        out["slots"] = slots_json(stats_of(result, reference=True))
    return out
