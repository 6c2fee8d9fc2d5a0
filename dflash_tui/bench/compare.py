"""`bench --compare SPEC`: the reference configuration's acceptance beside the drafter's.

Every round of every decode carries the reference's accepted count on the same committed
stream (engine/compare.py), so the reference's tables are the ordinary ones computed from
the same rounds with its counts in place of the drafter's: no second decode, and the two
sides differ only by what their drafters proposed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Sequence

from rich.console import Group
from rich.text import Text

from ..engine.codec import encode
from ..probe import left_out_line, once_each
from .runner import BenchResult
from .stats import Cell
from .tables import DASH, _section, _table, num, position_rows


def reference_result(result: BenchResult) -> BenchResult:
    """The same runs, each round's accepted count replaced by the reference's."""
    runs = [replace(run, rounds=tuple(replace(r, accepted=r.compare_accepted) for r in run.rounds))
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


def divergence_line(result: BenchResult) -> Text:
    rounds = _rounds(result)
    where = Counter(r.compare_divergent for r in rounds if r.compare_divergent)
    diverged = sum(where.values())
    line = (f"the configurations diverge beyond the tolerance in {diverged} of {len(rounds)} "
            "rounds")
    if where:
        line += "; first at: " + ", ".join(f"{w} ({n})" for w, n in where.most_common(4))
    return Text(line)


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
        *([Text(left_out_line(missing))] if missing else []),
    )


def to_json(result: BenchResult) -> dict:
    from .export import cell_json
    from .slots import stats_of
    from .slots import to_json as slots_json

    cells = []
    for c in reference_result(result).cells():
        cell = cell_json(c)
        cell.pop("speed")  # the decode's timings are the drafter's
        cells.append(cell)
    out = {"spec": result.compare, "tolerance": result.compare_tol, "cells": cells,
           "left_out": [encode(b) for b in left_out(result)]}
    if result.slots is not None:  # --slots: the reference's per-slot table too
        out["slots"] = slots_json(stats_of(result, reference=True))
    return out
