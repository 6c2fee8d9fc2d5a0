"""The bench's terminal tables (rich). Every cell's text comes from the row functions below,
so tests read the same strings the user sees. Deterministic tables and the speed table are
titled as what they are: counts reproduce to the last digit, timings do not."""

from __future__ import annotations

from typing import Optional, Sequence

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .runner import BenchResult, nonfinite_logits
from .stats import ALL, Cell, fastest, mean_compare_ms

DASH = "-"


def num(value: Optional[float], digits: int = 2) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def percent(value: Optional[float]) -> str:
    return DASH if value is None else f"{100 * value:.1f}%"


def times(value: Optional[float]) -> str:
    return DASH if value is None else f"{value:.2f}x"


def alpha_range(cell: Cell) -> str:
    span = cell.conditional_range
    return DASH if span is None else f"{span[0]:.2f}-{span[1]:.2f}"


def _by_workload(cells: Sequence[Cell]) -> dict[str, dict[int, Cell]]:
    out: dict[str, dict[int, Cell]] = {}
    for c in cells:
        out.setdefault(c.workload, {})[c.block] = c
    return out


def acceptance_rows(cells: Sequence[Cell], blocks: Sequence[int]) -> list[list[str]]:
    """workload, per-position acceptance range at the largest block, mean accepted per block."""
    rows = []
    for workload, by_block in _by_workload(cells).items():
        widest = by_block[max(blocks)]
        rows.append([workload, alpha_range(widest)]
                    + [num(by_block[b].mean_accepted) for b in blocks])
    return rows


def rollback_rows(cells: Sequence[Cell], blocks: Sequence[int]) -> list[list[str]]:
    return [[workload] + [percent(by_block[b].rollback_rate) for b in blocks]
            for workload, by_block in _by_workload(cells).items()]


def position_rows(cells: Sequence[Cell], blocks: Sequence[int]) -> list[list[str]]:
    """workload, block, rounds, tokens, tau, then P(accepted >= i) for i = 1..max block."""
    width = max(blocks)
    rows = []
    for c in cells:
        reach = [num(p.acceptance) for p in c.positions]
        rows.append([c.workload, str(c.block), str(c.rounds), str(c.tokens), num(c.tau)]
                    + reach + [""] * (width - len(reach)))
    return rows


def speed_rows(cells: Sequence[Cell]) -> list[list[str]]:
    return [[c.workload, str(c.block), num(c.tokens_per_s, 1), num(c.target_tokens_per_s, 1),
             times(c.speedup), num(c.round_ms, 1), num(c.target_ms_per_token, 1),
             num(c.decode_s, 1)] for c in cells]


def implication_rows(cells: Sequence[Cell], blocks: Sequence[int]) -> list[list[str]]:
    """workload, fastest block, its speed-up, then per block the break-even acceptance and,
    in a cell of its own (so the numbers line up), whether the measured mean accepted
    cleared it."""
    best = fastest(cells)
    rows = []
    for workload, by_block in _by_workload(cells).items():
        top = best.get(workload)
        row = [workload, DASH if top is None else str(top.block),
               DASH if top is None else times(top.speedup)]
        for b in blocks:
            c = by_block[b]
            verdict = "" if c.break_even is None or c.mean_accepted is None else (
                "ok" if c.mean_accepted > c.break_even else "short")
            row += [num(c.break_even), verdict]
        rows.append(row)
    return rows


def _table(headers: Sequence[str], rows: list[list[str]], first_left: int = 1) -> Table:
    # No vertical rules and one space between columns (as bench-diff's): at the default four
    # blocks every table fits 80 columns whole (the speed table, 79, is the widest), where
    # boxed cells were cut to "0…". A column with no header (a verdict) reads on from the
    # number before it, so it is left-aligned.
    table = Table(box=box.SIMPLE_HEAD, padding=0, show_edge=False)
    for i, header in enumerate(headers):
        left = i < first_left or not header
        table.add_column(header, justify="left" if left else "right", no_wrap=True)
    for row in rows:
        table.add_row(*row, style="dim" if row[0] == ALL else None)
    return table


def _section(title: str, table: Table, caption: str) -> Group:
    """Title and caption as their own lines: a table's own title wraps at the table's width."""
    return Group(Text(""), Text(title, style="bold"), table, Text(caption, style="dim"))


def render(result: BenchResult) -> Group:
    cells = result.cells()
    blocks = list(result.settings.blocks)
    heads = [f"block {b}" for b in blocks]
    extras = speed_extras(result)
    return Group(
        _section(
            "Accepted proposals per round (mean over rounds)  [deterministic]",
            _table(["workload", "alpha per position"] + heads, acceptance_rows(cells, blocks)),
            f"block = proposals per round. alpha = per-position acceptance, P(slot s accepted | "
            f"slots before it accepted), min-max over slots 0..{max(blocks) - 1} at block "
            f"{max(blocks)}. tau = mean accepted + 1 (in the acceptance-by-position table)."),
        _section(
            "Rollback rate: share of rounds with any rejected proposal  [deterministic]",
            _table(["workload"] + heads, rollback_rows(cells, blocks)),
            "block = proposals per round."),
        _section(
            "Acceptance by position: P(accepted >= i) over rounds that proposed i or more  "
            "[deterministic]",
            _table(["workload", "block", "rounds", "tokens", "tau"]
                   + [str(i) for i in range(1, max(blocks) + 1)],
                   position_rows(cells, blocks), first_left=2),
            "tokens = generated tokens over all prompts; i = accepted proposals, a count "
            "(column i: slots 0..i-1 all accepted); blank = a block smaller than i."),
        _section(
            "Speed  [wall clock on this machine: varies from run to run]"
            + (f"  (includes {' and '.join(extras)})" if extras else ""),
            _table(["workload", "block", "tokens/s", "target alone", "speed-up",
                    "ms/round", "target ms/token", "decode s"],
                   speed_rows(cells), first_left=2),
            "decode only, prefill excluded on both sides. target alone = the target's own "
            "one-token greedy decode of the same prompts in this run; speed-up = tokens/s "
            "over it. ms/round = a whole round (draft and verify, with their rollback)."
            + speed_note(result)),
        _section(
            "What the speed implies on this machine  [wall clock]",
            _table(["workload", "fastest", "speed-up"]
                   + [h for b in blocks for h in (f"even {b}", "")],
                   implication_rows(cells, blocks)),
            "fastest = the block with the highest speed-up. even B = the break-even at block B: "
            "accepted proposals per round a block needs to match the target "
            "alone: ms/round / target ms/token - 1 (a round yields accepted + 1 tokens). "
            "ok / short: the measured mean accepted is above / below it."),
    )


def speed_extras(result: BenchResult) -> list[str]:
    """What the speed numbers include beyond the decode itself: a --compare reference's
    work every round, --slots' ranks."""
    return ((["the reference's work (--compare)"] if result.compare else [])
            + (["the ranks --slots computes"] if result.settings.slots else []))


def speed_note(result: BenchResult) -> str:
    """The caption's word on speed_extras: how much of a round the reference was."""
    notes = []
    if result.compare:
        ids = result.finished_prompt_ids()
        ms = mean_compare_ms([r for run in result.spec_runs if run.prompt.id in ids
                              for r in run.rounds])
        notes.append(f"Every round also ran the reference {result.compare}"
                     + ("" if ms is None else f", {ms:.1f} ms of it on average")
                     + ": the speed-ups are the drafter's with the compare lab running, "
                     "lower than it alone")
    if result.settings.slots:
        notes.append("--slots computes every slot's rank (passes over both models' "
                     "full-vocabulary logits each round), which a plain decode does not")
    return "".join(f" {note}." for note in notes)


def lossless_lines(result: BenchResult) -> list[Text]:
    """The verdict, and one line per divergent decode."""
    checked = [r for r in result.spec_runs if r.checked]
    if not checked:
        return [Text(f"losslessness not checked: temperature {result.settings.temperature} "
                     "> 0 samples (only greedy decodes have one right answer)", style="yellow")]
    bad = result.divergent
    if not bad and (result.target_weight_notes or result.target_nonfinite):
        # the greedy decode is garbage too (NaN logits' argmax): equal, but proves nothing
        why = ("computes from weights that hold NaN or Inf (the note above)"
               if result.target_weight_notes else
               "picked tokens from its own NaN or Inf logits (the line above)")
        return [Text(f"lossless: all {len(checked)} speculative decodes equal the target's own "
                     f"greedy decode, which {why}: equal, but not a check", style="yellow")]
    if not bad:
        return [Text(f"lossless: all {len(checked)} speculative decodes equal the target's own "
                     "greedy decode", style="green")]
    lines = [Text(f"NOT LOSSLESS: {len(bad)} of {len(checked)} speculative decodes diverged "
                  "from the target's own greedy decode", style="bold red")]
    for run in bad:
        lines.append(Text(divergence_line(run), style="red"))
    return lines


def target_nonfinite_lines(result: BenchResult) -> list[Text]:
    """Where the target decoding alone went NaN or Inf with finite weights: an activation
    that overflows its float type (float16's 65504 most often). Its own greedy decode is then
    the argmax of NaN, so the drafter's NaN and the lossless check follow from it."""
    runs = result.target_nonfinite
    if not runs:
        return []
    first = runs[0]
    hint = ("float16 holds at most 65504, so --dtype bfloat16 or float32 may hold it; "
            if result.info is not None and result.info.dtype == "float16" else "")
    return [Text(f"TARGET LOGITS NaN/Inf in the target's own decode of {len(runs)} of "
                 f"{len(result.target_runs)} prompts (first: {first.prompt.id}, from generated "
                 f"token {first.run.nonfinite_at}): {hint}`dflash-tui probe` on one of them "
                 "names the first buffer that went non-finite", style="bold red")]


def nonfinite_lines(result: BenchResult) -> list[Text]:
    """Where the drafter's logits went NaN or Inf: pooled, then per workload and block. With
    the bench's probes off it is the one sign of an overflowed drafter besides acceptance
    at 0 (`dflash-tui probe` on one of its prompts finds the first buffer that went bad)."""
    cells = [c for c in result.cells() if c.workload != ALL]
    bad = [c for c in cells if c.nonfinite_logit_rounds]
    if not bad:
        return []
    each = ", ".join(f"{c.workload} block {c.block}: {c.nonfinite_logit_rounds} of {c.rounds}"
                     for c in bad)
    total = nonfinite_logits(sum(c.nonfinite_logit_rounds for c in cells),
                             sum(c.rounds for c in cells), whose="DRAFTER LOGITS")
    # The drafter computes from the target's layer outputs, embedding and lm_head: with a
    # target weight non-finite, its logits are where the NaN shows, not where it began.
    source = ("the target's own weights hold NaN or Inf (the note above names them)"
              if result.target_weight_notes else
              "the target's own logits went NaN or Inf as well (the line above)"
              if result.target_nonfinite else None)
    target = (f": {source}, and the drafter computes from the target's layer outputs, "
              "embedding and lm_head; " if source else ": ")
    return [Text(f"{total} ({each}){target}`dflash-tui "
                 "probe` on one of its prompts names the first buffer that went non-finite",
                 style="bold red")]


def divergence_line(run) -> str:
    d = run.divergence
    ref = "end of text" if d.reference is None else f"token {d.reference}"
    cand = "end of text" if d.candidate is None else f"token {d.candidate}"
    line = (f"  {run.prompt.id} block {run.block}: first difference at generated token "
            f"{d.index} (position {d.position}): target {ref}, speculative {cand}; "
            f"target's logit margin there (top1 - top2) {d.margin:.4g}")
    if d.candidate_logit is not None:
        line += f", speculative token {d.target.top1_logit - d.candidate_logit:.4g} below top1"
    return line


def print_report(console: Console, result: BenchResult) -> None:
    console.print(render(result))
    for note_block, notes in sorted(result.notes.items()):
        for note in notes:
            console.print(f"note (block {note_block}): {note}", style="yellow")
    for line in target_nonfinite_lines(result) + nonfinite_lines(result) + lossless_lines(result):
        console.print(line)
