"""`dflash-tui bench-diff A.json B.json`: two bench runs (`bench --json`) side by side, prompt
by prompt: accepted proposals per round for each workload and block in both, the change,
and how far the few prompts of a workload can be trusted to show it.

The means are the bench's own (accepted over rounds, pooled over a workload's prompts, only
prompts done at every block of their bench), so where both files ran the same prompts and
blocks they equal each file's `cells`. The interval is a paired bootstrap over prompts: the
same prompts are drawn with replacement for both runs, within each workload (the "all" row
draws every workload's own), and the change is recomputed; the 2.5th and 97.5th percentiles
bound it. It says how much the change rests on which prompts the set holds, not how the
drafters would differ on other text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

from ..engine.errors import InputError
from .console import stdout_console
from .export import SCHEMA
from .stats import ALL

LEVEL = 0.005  # a prompt's mean that moves less than this counts as level
MIN_PROMPTS = 3  # fewer, and a bootstrap over prompts has next to nothing to draw from
MAX_RESAMPLES = 100_000
MAX_BLOCK = 2**31 - 1  # proposals per round; far past any context, and inside a float64 sum
# settings that make two benches measure different things when they differ
SETTINGS = ("max_tokens", "temperature", "seed", "chat", "layer_offset", "dtype", "oracle")


@dataclass(frozen=True)
class PromptRun:
    """One prompt at one block: accepted proposals and rounds, summed over its rounds."""

    accepted: int
    rounds: int
    nonfinite: int = 0  # rounds whose drafter logits held a NaN or Inf (0 in older files)
    # each round's (proposals, accepted), for --by-slot (diff_slots.py)
    per_round: tuple[tuple[int, int], ...] = ()

    @property
    def mean(self) -> Optional[float]:
        return self.accepted / self.rounds if self.rounds else None


@dataclass(frozen=True)
class Bench:
    path: Path
    settings: dict
    drafter: str
    complete: bool
    runs: dict  # (workload, prompt, block) -> PromptRun, prompts done at every block only
    unfinished: int  # runs of prompts not done at every block, left out as the bench does
    extras: tuple[str, ...] = ()  # --compare SPEC, --slots: work its speed numbers include
    target: Optional[str] = None  # its file name and shape (_target); None in a file without


@dataclass(frozen=True)
class Row:
    workload: str
    block: int
    prompts: int
    a: float
    b: float
    interval: Optional[tuple[float, float]]  # None below MIN_PROMPTS
    up: int
    down: int

    @property
    def change(self) -> float:
        return self.b - self.a


def load(path: Path) -> Bench:
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: no such file (expected a `dflash-tui bench --json` file)") from None
    except IsADirectoryError:
        raise InputError(f"{path}: a folder (expected a `dflash-tui bench --json` file)") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise InputError(f"{path}: not a bench JSON file ({error})") from None
    except RecursionError:
        raise InputError(f"{path}: not a bench JSON file (nested too deeply to read)") from None
    schema = record.get("schema") if isinstance(record, dict) else None
    if schema != SCHEMA:
        raise InputError(f"{path}: not a bench JSON file (schema {schema!r}, expected {SCHEMA!r}; "
                         "`dflash-tui bench --json FILE` writes one)")
    complete = record.get("complete", True) is True
    runs = record.get("runs")
    if not complete and runs == []:
        raise InputError(_nothing_finished(path))
    if not isinstance(runs, list) or not runs:
        raise InputError(f"{path}: holds no runs (expected a list of per-prompt runs under \"runs\")")
    counted, where = {}, {}
    for k, run in enumerate(runs):
        key = _key(path, k, run)
        if key in where:  # a dict would keep the last one silently
            raise InputError(f"{path}: runs[{k}] repeats prompt {key[1]!r} at block {key[2]} "
                             f"(runs[{where[key]}] has it too); a bench runs each prompt once "
                             "per block")
        where[key] = k
        counted[key] = _counts(path, k, run, key[2])
    blocks = {block for _, _, block in counted}
    settings = record.get("settings")
    settings = settings if isinstance(settings, dict) else {}
    declared = settings.get("blocks")
    if (isinstance(declared, list) and all(type(b) is int for b in declared)
            and blocks <= set(declared)):
        # the blocks the bench was asked for: a prompt interrupted after its first block has
        # not finished, even where no other prompt ran the rest
        blocks = set(declared)
    done = {}
    for workload, prompt, _ in counted:
        done[(workload, prompt)] = done.get((workload, prompt), 0) + 1
    finished = {key: run for key, run in counted.items() if done[key[:2]] == len(blocks)}
    if not complete and not finished:
        raise InputError(_nothing_finished(path))
    return Bench(path, settings, _drafter(record.get("drafter")), complete, finished,
                 len(counted) - len(finished), _extras(record, settings), _target(record.get("target")))


def _target(target) -> Optional[str]:
    """`SmolLM2-135M-Instruct.Q4_1.gguf (llama, 30 layers, hidden 576)`: the file's name, not
    its path (one model benched on two machines sits in two places), and its shape."""
    if not isinstance(target, dict) or not target.get("path"):
        return None
    shape = ", ".join(form.format(target[k]) for k, form in
                      (("kind", "{}"), ("layers", "{} layers"), ("hidden", "hidden {}")) if k in target)
    return f"{Path(str(target['path'])).name} ({shape})"


def _drafter(drafter) -> str:
    """Its path, and a quantized one's packing (`dflash_tui/sample, q8/g64, float:
    codebooks`): a quantized drafter and its float original can share a path. Files
    older than the `quantization` key name the path alone."""
    if not isinstance(drafter, dict):
        return "?"
    packing = drafter.get("quantization")
    return str(drafter.get("path", "?")) + (f", {packing}" if isinstance(packing, str) else "")


def _nothing_finished(path: Path) -> str:
    """An interrupted bench that finished no prompt at every block (an older bench wrote
    one; it no longer does): said as such, not as a file with no runs or no shared prompt."""
    return (f"{path}: an interrupted bench (\"complete\": false) that finished no prompt at "
            "every block; nothing to compare")


def _extras(record: dict, settings: dict) -> tuple[str, ...]:
    """What else the bench ran every round besides the decode (its speed numbers include
    it): a --compare reference (the JSON's `compare`), --slots' ranks."""
    compare = record.get("compare")
    spec = compare.get("spec") if isinstance(compare, dict) else None
    return ((f"--compare {spec}",) if isinstance(spec, str) else ()) + \
        (("--slots",) if settings.get("slots") is True else ())


def _key(path: Path, k: int, run) -> tuple[str, str, int]:
    try:
        workload, prompt, block = run["workload"], run["prompt"], run["block"]
    except (KeyError, TypeError):
        raise InputError(f"{path}: runs[{k}] lacks workload, prompt or block") from None
    if not (isinstance(workload, str) and isinstance(prompt, str) and isinstance(block, int)
            and not isinstance(block, bool) and 0 < block <= MAX_BLOCK):
        raise InputError(f"{path}: runs[{k}]: expected text workload and prompt and a block >= 1 "
                         f"(at most {MAX_BLOCK}) (got {workload!r}, {prompt!r}, {_short(block)})")
    if workload == ALL:  # its row would sit beside the pooled one, under one name
        raise InputError(f"{path}: runs[{k}].workload: a workload cannot be named {ALL!r} (the "
                         "tables' pooled row)")
    return workload, prompt, block


def _counts(path: Path, k: int, run: dict, block: int) -> PromptRun:
    """Accepted proposals per round: whole numbers from 0 to the block (a round proposes at
    most a block), which also keeps every sum well inside a float64."""
    per_round = run.get("accepted_per_round")
    if not isinstance(per_round, list):
        raise InputError(f"{path}: runs[{k}].accepted_per_round: expected a list of counts >= 0 "
                         f"(got {_short(per_round)})")
    for r, a in enumerate(per_round):
        if not (isinstance(a, int) and not isinstance(a, bool) and 0 <= a <= block):
            raise InputError(f"{path}: runs[{k}].accepted_per_round[{r}] = {_short(a)}: expected "
                             f"a list of counts >= 0, at most the run's block ({block})")
    gammas = run.get("gamma_per_round", [block] * len(per_round))  # absent: every round proposed the block
    if not (isinstance(gammas, list) and len(gammas) == len(per_round)):
        raise InputError(f"{path}: runs[{k}].gamma_per_round: expected a list of {len(per_round)} "
                         f"proposal counts, one per round (got {_short(gammas)})")
    for r, (g, a) in enumerate(zip(gammas, per_round)):
        if not (isinstance(g, int) and not isinstance(g, bool) and a <= g <= block):
            raise InputError(f"{path}: runs[{k}].gamma_per_round[{r}] = {_short(g)}: expected the "
                             f"round's proposals, from its {a} accepted to the run's block ({block})")
    nonfinite = run.get("nonfinite_logit_rounds", 0)  # absent: a bench from before the count
    if not (isinstance(nonfinite, int) and not isinstance(nonfinite, bool)
            and 0 <= nonfinite <= len(per_round)):
        raise InputError(f"{path}: runs[{k}].nonfinite_logit_rounds = {_short(nonfinite)}: "
                         f"expected a count from 0 to the run's {len(per_round)} rounds")
    return PromptRun(sum(per_round), len(per_round), nonfinite, tuple(zip(gammas, per_round)))


def _short(value, limit: int = 40) -> str:
    """A value as the file has it, cut short (a 400-digit count, a long list)."""
    text = repr(value)  # JSON's ints stop at 4300 digits (Python's str limit), so repr works
    if isinstance(value, int) and len(text) > limit:
        return f"a {len(text.lstrip('-'))}-digit number"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def notes(a: Bench, b: Bench) -> list[str]:
    """What makes the two benches not measure alike, or the comparison not cover them whole."""
    out = []
    for key in SETTINGS:
        if a.settings.get(key) != b.settings.get(key):
            out.append(f"{key} differs: {a.settings.get(key)!r} in {a.path}, "
                       f"{b.settings.get(key)!r} in {b.path}")
    # --compare and --slots add work to every round and leave the decode (the drafter's)
    # as it was: the files' speed numbers move, the accepted counts compared here do not
    if a.extras != b.extras:
        ran = lambda bench: " ".join(bench.extras) or "neither"  # noqa: E731
        out.append(f"--compare / --slots differ: {ran(a)} in {a.path}, {ran(b)} in {b.path}; "
                   "their speed numbers are not alike (each includes that work), the accepted "
                   "counts compared here do not depend on it")
    elif a.extras:
        out.append(f"both ran with {' '.join(a.extras)}: their speed numbers include that "
                   "work, the accepted counts compared here do not depend on it")
    if a.target and b.target and a.target != b.target:
        # the change would then be the targets' as much as the drafters': the target decides
        # every accepted token
        out.append(f"the targets differ: {a.target} in {a.path}, {b.target} in {b.path}; the "
                   "change is the pairs', not the drafters' alone")
    for bench in (a, b):
        if not bench.complete:
            out.append(f"{bench.path} is an interrupted bench")
        if bench.unfinished:
            out.append(f"{bench.path}: {bench.unfinished} runs of prompts it did not finish at "
                       "every block are left out, as its own tables leave them")
    for bench in (a, b):
        # a drafter that overflowed accepts nothing for a numeric reason, not a weak guess:
        # the change in the table is then that failure's, which the means alone do not say
        bad = [run for run in bench.runs.values() if run.nonfinite]
        if bad:
            rounds = sum(run.rounds for run in bench.runs.values())
            runs = f"{len(bench.runs)} run{'s' if len(bench.runs) != 1 else ''}"
            out.append(f"{bench.path}: the drafter's logits held NaN/Inf in "
                       f"{sum(run.nonfinite for run in bad):,} of {rounds:,} rounds ({len(bad)} "
                       f"of {runs}): its accepted counts there reflect a numeric "
                       "failure (`dflash-tui probe` names the first non-finite buffer)")
    for bench, other in ((a, b), (b, a)):
        alone = bench.runs.keys() - other.runs.keys()
        if alone:
            blocks = ", ".join(map(str, sorted({blk for _, _, blk in alone})))
            out.append(f"{len(alone)} runs only in {bench.path} (block {blocks}) are left out: "
                       "the means are over what both ran")
    return out


def paired(a: Bench, b: Bench) -> dict:
    """(workload, block) -> [(prompt, A's run, B's run)] for the prompts both benches ran."""
    groups: dict = {}
    for key in a.runs:  # in A's order: its workloads as its bench ran them
        if key in b.runs:
            workload, prompt, block = key
            groups.setdefault((workload, block), []).append((prompt, a.runs[key], b.runs[key]))
    if not groups:
        raise InputError(f"{a.path} and {b.path} share no prompt at any block "
                         "(were they run on the same --prompts and --blocks?)")
    return groups


def rows(a: Bench, b: Bench, resamples: int = 2000, seed: int = 0) -> list[Row]:
    """One row per workload and block, then an "all" row per block with two workloads or more."""
    out: list[Row] = []
    groups = paired(a, b)
    for block in sorted({blk for _, blk in groups}):
        # one stream per block, so a block's intervals do not hang on the other blocks
        rng = np.random.default_rng([seed, block])
        totals, every, names = np.zeros((4, resamples)), [], []
        for (workload, blk), runs in groups.items():
            if blk != block:
                continue
            draws = rng.integers(0, len(runs), size=(resamples, len(runs)))
            sums = np.stack([_sums(runs, side, field, draws) for side in (1, 2)
                             for field in ("accepted", "rounds")])
            totals += sums
            out.append(_row(workload, block, runs, sums, len(runs) >= MIN_PROMPTS))
            every += runs
            names.append(workload)
        if len(names) > 1:  # stratified: each workload's own draws, summed
            enough = min(len(groups[(name, block)]) for name in names) >= MIN_PROMPTS
            out.append(_row(ALL, block, every, totals, enough))
    return out


def _sums(runs: list, side: int, field: str, draws: np.ndarray) -> np.ndarray:
    values = np.array([getattr(r[side], field) for r in runs], dtype=np.float64)
    return values[draws].sum(axis=1)


def _row(workload: str, block: int, runs: list, sums: np.ndarray, enough: bool) -> Row:
    a_accepted, a_rounds, b_accepted, b_rounds = sums
    interval = None
    if enough:
        change = b_accepted / np.maximum(b_rounds, 1) - a_accepted / np.maximum(a_rounds, 1)
        low, high = np.percentile(change, [2.5, 97.5])
        interval = (float(low), float(high))
    moves = [r[2].mean - r[1].mean for r in runs if r[1].rounds and r[2].rounds]
    return Row(workload, block, len(runs), _pooled(runs, 1), _pooled(runs, 2), interval,
               sum(m > LEVEL for m in moves), sum(m < -LEVEL for m in moves))


def _pooled(runs: list, side: int) -> float:
    """Accepted over rounds across the prompts, as the bench's cells count it."""
    return sum(r[side].accepted for r in runs) / max(sum(r[side].rounds for r in runs), 1)


def _signed(value: float) -> str:
    return f"{value + 0.0:+.2f}".replace("-0.00", "+0.00")  # no "-0.00" for a change that rounds to none


def table(result: list[Row]) -> Table:
    t = Table(box=box.SIMPLE_HEAD)
    for name in ("workload", "block", "n", "A", "B", "B - A", "95% interval", "up/down"):
        t.add_column(name, justify="left" if name == "workload" else "right", no_wrap=True)
    for row in result:
        change = _signed(row.change) + (f" ({row.change / row.a:+.1%})" if row.a else "")
        interval = "-" if row.interval is None else "..".join(map(_signed, row.interval))
        t.add_row(row.workload, str(row.block), str(row.prompts), f"{row.a:.2f}", f"{row.b:.2f}",
                  change, interval, f"{row.up}/{row.down}")
    return t


def by_prompt(a: Bench, b: Bench) -> Table:
    t = Table(title="by prompt (mean accepted per round)", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("prompt", "block", "rounds A / B", "A", "B", "B - A"):
        # a name too long for its column folds onto a second line: cut with an ellipsis
        # (rich's default for a word with no space to wrap at), two names that part late
        # read alike ("prose/02-why-leaves-change-col…" at 80 columns)
        t.add_column(name, justify="left" if name == "prompt" else "right", no_wrap=name != "prompt",
                     overflow="fold" if name == "prompt" else "ellipsis")
    for (workload, block), runs in paired(a, b).items():
        for prompt, ra, rb in runs:
            change = "-" if ra.mean is None or rb.mean is None else _signed(rb.mean - ra.mean)
            t.add_row(prompt, str(block), f"{ra.rounds} / {rb.rounds}", _mean(ra), _mean(rb), change)
    return t


def _mean(run: PromptRun) -> str:
    return "-" if run.mean is None else f"{run.mean:.2f}"


def run(args, console: Optional[Console] = None) -> int:
    if not 100 <= args.resamples <= MAX_RESAMPLES:
        raise InputError(f"--resamples {args.resamples}: expected 100 to {MAX_RESAMPLES}")
    if args.seed < 0:
        raise InputError(f"--seed {args.seed}: expected a seed >= 0")
    a, b = load(Path(args.a).expanduser()), load(Path(args.b).expanduser())
    result = rows(a, b, args.resamples, args.seed)  # checks that they share prompts first
    out = console or stdout_console()
    for note in notes(a, b):
        out.print(f"note: {note}")
    out.print(f"accepted proposals per round; A: {a.path} (drafter {a.drafter}), "
              f"B: {b.path} (drafter {b.drafter})")
    out.print(table(result))
    if args.by_prompt:
        out.print(by_prompt(a, b))
    if args.by_slot:
        from .diff_slots import MIN_WIDTH, slot_tables

        for slots in slot_tables(paired(a, b), out.width):
            # too narrow for one slot beside the labels: past the width rather than cropped,
            # where a number cut at the edge reads as another (0.75 as "0.7")
            out.print(slots, crop=out.width >= MIN_WIDTH)
    out.print(f"n: prompts both ran; up/down: prompts whose own mean rose / fell. Interval: a "
              f"paired bootstrap over prompts within each workload ({args.resamples} resamples, "
              f"seed {args.seed}; '-' under {MIN_PROMPTS} prompts): how much the change rests on "
              "which prompts the set holds. With a handful of prompts it tends to be too narrow, "
              "not too wide.")
    return 0
