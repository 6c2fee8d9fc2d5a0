"""`dflash-tui bench`: check the arguments, load the pair once, run, print, write.

Exit codes: 0 all decodes lossless (or unchecked at temperature > 0); 1 a speculative decode
diverged from the target's own greedy decode; 2 bad input (raised as InputError, printed by
the CLI as one line); 130 interrupted (the finished prompts are still printed and written; with none finished,
nothing is written).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

from rich.console import Console

from .. import sample
from ..engine.api import load_pair
from ..engine.errors import InputError
from ..engine.files import write_atomic, write_json_atomic
from ..outputs import model_parts, not_a_model_file, output_file, same_file, writing
from .compare import render as render_compare
from .console import stdout_console
from .export import to_csv, to_json
from .progress import LineProgress, RichProgress
from .prompts import load_workloads
from .runner import BenchResult, BenchRunner, Settings
from .slots import render as render_slots
from .tables import print_report

EXIT_DIVERGED = 1


def parse_blocks(text: str) -> tuple[int, ...]:
    """'2,4,7,8' -> (2, 4, 7, 8): a set of blocks, measured in ascending order, so a repeat
    is folded ('4,2,4' runs 2 and 4, as the start line says). An empty item ('4,,7', '4,')
    is refused, as `--compare ,` and `quantize --keep ,` are: it is a slip, not a block."""
    parts = [part.strip() for part in text.split(",")]
    if text.strip() and not all(parts):
        raise InputError(f"--blocks {text!r}: an empty item; expected a proposal count of at "
                         "least 1 on each side of every comma, e.g. 2,4,7,8")
    try:
        blocks = [int(part) for part in parts]
    except ValueError:
        blocks = []
    if not blocks or any(b < 1 for b in blocks):
        raise InputError(f"--blocks {text!r}: expected comma-separated proposal counts of at "
                         "least 1, e.g. 2,4,7,8")
    return tuple(sorted(set(blocks)))


def settings_from(args) -> Settings:
    """Flag ranges were checked when parsing (flag_ranges); here, what they mean together."""
    oracle = bool(getattr(args, "oracle", False))
    if oracle and args.temperature > 0:
        raise InputError("--oracle forces the target's greedy continuation; it needs "
                         "--temperature 0")
    for flag in ("slots", "compare"):  # both are about the drafter's own proposals
        if oracle and getattr(args, flag, None):
            raise InputError(f"--{flag} with --oracle: the oracle's proposals are not the "
                             "drafter's, so there is nothing of the drafter's to measure")
    return Settings(blocks=parse_blocks(args.blocks), max_tokens=args.max_tokens,
                    temperature=args.temperature, seed=args.seed,
                    chat=getattr(args, "chat", None), layer_offset=args.layer_offset,
                    dtype=args.dtype, oracle=oracle, slots=bool(getattr(args, "slots", False)))


def equivalent_command(model: Path, draft: Optional[Path], prompts: Path, args,
                       s: Settings) -> str:
    parts = ["dflash-tui", "bench", str(model)]
    if draft is not None:
        parts += ["--draft", str(draft)]
    parts += ["--prompts", str(prompts), "--blocks", ",".join(map(str, s.blocks)),
              "--max-tokens", str(s.max_tokens), "--temperature", str(s.temperature),
              "--seed", str(s.seed), "--dtype", s.dtype]
    if args.limit is not None:
        parts += ["--limit", str(args.limit)]
    if s.layer_offset:
        parts += ["--layer-offset", str(s.layer_offset)]
    if args.keep_quantized:
        parts.append("--keep-quantized")
    if s.chat is not None:
        parts.append("--chat" if s.chat else "--raw")
    if s.oracle:
        parts.append("--oracle")
    if s.slots:
        parts.append("--slots")
    if getattr(args, "distributed", False):
        parts.append("--distributed")
    if args.compare is not None:
        parts += ["--compare", args.compare.text, "--compare-tol", str(args.compare_tol)]
    return shlex.join(parts)


def run(args) -> int:
    settings = settings_from(args)
    json_path = output_file("--json", args.json)
    csv_path = output_file("--csv", args.csv)
    if json_path and csv_path and same_file(json_path, csv_path):
        raise InputError(f"--csv {csv_path}: same file as --json")
    prompts_dir = Path(args.prompts).expanduser() if args.prompts else sample.PROMPTS_DIR
    workloads = load_workloads(prompts_dir, args.limit)
    for flag, path in (("--json", json_path), ("--csv", csv_path)):  # or a prompt is lost
        read = next((p.path for w in workloads for p in w.prompts
                     if path and same_file(path, p.path)), None)
        if read is not None:
            raise InputError(f"{flag} {path}: is the prompt file {read} (the bench reads it; "
                             "write the results elsewhere)")
    model, draft = sample.resolve(args.model, args.draft)
    parts = model_parts(model, draft, args.compare.draft_dir if args.compare else None)
    for flag, path in (("--json", json_path), ("--csv", csv_path)):  # or the model is damaged
        not_a_model_file(flag, path, parts)

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    out = stdout_console()
    pair = load_pair(model, draft, dtype=args.dtype, keep_quantized=args.keep_quantized,
                     progress=lambda message: err.print(f"bench: {message}"),
                     mesh=getattr(args, "mesh", None),
                     compare=args.compare, compare_tol=args.compare_tol)
    counts = ", ".join(f"{w.name} {len(w.prompts)}" for w in workloads)
    n_prompts = sum(len(w.prompts) for w in workloads)
    err.print(f"bench: {pair.describe()}")
    err.print(f"bench: {n_prompts} prompts ({counts}) x blocks "
              f"{','.join(map(str, settings.blocks))}, plus the target alone; up to "
              f"{settings.max_tokens} tokens each, temperature {settings.temperature}"
              + ("; proposals forced to the target's greedy text (--oracle)" if settings.oracle else ""))
    progress = RichProgress(err) if err.is_terminal else LineProgress(err)
    runner = BenchRunner(pair, workloads, settings, progress=progress)
    command = equivalent_command(model, pair.draft_dir, prompts_dir, args, settings)
    try:
        with progress:
            result = runner.run()
    except KeyboardInterrupt:
        _finish(out, err, runner.result, pair.target, json_path, csv_path, command, prompts_dir, args)
        raise
    return _finish(out, err, result, pair.target, json_path, csv_path, command, prompts_dir, args)


def _finish(out: Console, err: Console, result: BenchResult, target, json_path, csv_path,
            command: str, prompts_dir: Path, args) -> int:
    if not result.complete and not result.finished_prompt_ids():
        # Nothing to report: a file of no prompts would only replace the one there (an
        # earlier run's, often) with something bench-diff cannot compare.
        kept = " and ".join(str(p) for p in (json_path, csv_path) if p is not None)
        err.print("bench: interrupted before any prompt finished every block; nothing to report"
                  + (f", {kept} not written" if kept else ""), style="yellow")
        return EXIT_DIVERGED if result.lossless is False else 0
    if not result.complete:
        done = len(result.finished_prompt_ids())
        err.print(f"bench: interrupted; reporting the {done} prompt{'s' * (done != 1)} that "
                  "finished every block",
                  style="yellow")
    if result.finished_prompt_ids():
        print_report(out, result)
        if result.compare:
            out.print(render_compare(result))
        if result.slots is not None:
            out.print(render_slots(result))
    out.print(f"wall time {result.wall_s:.1f} s", style="dim")
    if json_path is not None:
        with writing(json_path):
            write_json_atomic(json_path, to_json(result, command=command, prompts_dir=str(prompts_dir),
                                                 limit=args.limit, decode=target.tokenizer.decode))
        err.print(f"bench: wrote {json_path}")
    if csv_path is not None:
        with writing(csv_path):
            write_atomic(csv_path, to_csv(result))
        err.print(f"bench: wrote {csv_path}")
    return EXIT_DIVERGED if result.lossless is False else 0
