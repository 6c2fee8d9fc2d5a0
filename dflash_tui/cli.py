"""The `dflash-tui` command line.

    dflash-tui [MODEL_DIR] [options]          the TUI (no MODEL_DIR: the bundled sample)
    dflash-tui probe [MODEL_DIR] ...          step headless, one line per round, JSON out
    dflash-tui bench [MODEL_DIR] ...          acceptance tables by workload and block
    dflash-tui bench-diff A.json B.json       two benches side by side, prompt by prompt
    dflash-tui distill TARGET --out DIR ...   train a DFlash2 drafter for a target
    dflash-tui quantize DRAFT_DIR --bits B --out DIR   a quantized copy of a drafter
    dflash-tui replay TRACE                   reopen a recorded session with no model
    dflash-tui export SOURCE --out DIR        flat tables (CSV / Parquet) of a recording

Bad input ends with one line on stderr naming what was wrong, exit code 2, no traceback.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from pathlib import Path
from typing import Optional

from . import flag_ranges
from .engine.compare_spec import DEFAULT_TOLERANCE, check_greedy, named_as_reference, parse_spec
from .engine.draft_config import read_drafter_config
from .engine.utf8 import check_utf8
from .engine.errors import GroupError, InputError, ParameterError
from .engine.paths import named_as_draft
from .prompt_file import read_prompt_file

KEEP_ROUNDS = 100  # the TUI's full records in memory: ~27 MB on the sample's shapes
COMMANDS = ("probe", "bench", "bench-diff", "distill", "quantize", "replay", "export")
# The flag that sets each engine parameter a ParameterError can name.
FLAGS = {
    "gamma": "--block", "dtype": "--dtype", "chat": "--chat", "prompt_ids": "--prompt",
    "draft": "--draft", "temperature": "--temperature", "seed": "--seed",
    "max_tokens": "--max-tokens", "layer_offset": "--layer-offset", "distributed": "--distributed",
    "compare": "--compare", "compare_tol": "--compare-tol",
}
AS_TYPED = {"draft"}  # a folder: `--draft DIR: ...`, as `--compare DIR: ...` reads


def user_message(error: InputError) -> str:
    """The error as a command-line user reads it: engine parameters named by their flags
    (`gamma=0: ...` becomes `--block 0: ...`)."""
    if isinstance(error, ParameterError) and error.name in FLAGS:
        flag, value = FLAGS[error.name], error.value
        scalar = isinstance(value, (int, float, str)) and not isinstance(value, bool)
        if not scalar:
            return f"{flag}: {error.problem}"
        # a float flag's value as typed (`--temperature 0.50`), not Python's repr of it
        shown = value if error.name in AS_TYPED else getattr(value, "typed", None) or repr(value)
        return f"{flag} {shown}: {error.problem}"
    return str(error)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        # No abbreviations: `bench --prompt Hi` was taken as `--prompts Hi` and refused as a
        # missing directory; an option that is not one is refused by its own name.
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message):  # argparse's own errors: one line, exit 2
        # The message alone: main's `dflash-tui: error:` is the prefix (the parser's prog,
        # `dflash-tui probe`, before it made two).
        raise InputError(message)


def _prompt_text(args) -> Optional[str]:
    if getattr(args, "prompt_file", None):
        return read_prompt_file(Path(args.prompt_file))
    prompt = getattr(args, "prompt", None)
    if prompt is not None and not prompt.strip():  # as an empty --prompt-file is refused
        raise InputError(f"--prompt {prompt!r}: the prompt is empty (expected the prompt's text)")
    if prompt is not None:
        check_utf8(prompt)  # before the model loads, not minutes later in the tokenizer
    return prompt


def _prompt_source(args) -> Optional[str]:
    """Where the prompt came from, as a refusal names it (`--prompt-file F: the prompt is 9931
    tokens; ...`); None for the sample's own prompt."""
    if getattr(args, "prompt_file", None):
        return f"--prompt-file {args.prompt_file}"
    return "--prompt" if getattr(args, "prompt", None) is not None else None


def add_model_args(p: argparse.ArgumentParser, model_required: bool = False) -> None:
    if model_required:
        p.add_argument("model", metavar="MODEL_DIR", help="mlx-lm model directory or .gguf file")
    else:
        p.add_argument("model", metavar="MODEL_DIR", nargs="?",
                       help="mlx-lm model directory or .gguf file (default: the bundled sample)")
    p.add_argument("--draft", metavar="DRAFT_DIR",
                   help="drafter directory (default: MODEL_DIR/draft; with no MODEL_DIR, the "
                        "bundled sample's drafter)")
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32",
                   help="the dtype the target and the drafter compute in (default: %(default)s)")
    p.add_argument("--layer-offset", type=int, default=0, metavar="K",
                   help="shift every target_layer_ids entry by K (test the off-by-one)")
    p.add_argument("--keep-quantized", action="store_true",
                   help="on the CPU, keep a quantized target and drafter quantized (default: "
                        "dequantize small ones, since MLX's CPU quantized matmul is slow)")
    p.add_argument("--distributed", action="store_true",
                   help="run on every rank of a group started by mlx.launch, the target "
                        "sharded across them; rank 0 prints and writes (docs/DISTRIBUTED.md)")


class _OneSpec(argparse.Action):
    """--compare given at most once: argparse keeps the last of a repeated flag, so a second
    --compare silently replaced the first (a key repeated inside one SPEC is refused too)."""

    def __call__(self, parser, namespace, values, option_string=None):
        before = getattr(namespace, self.dest)
        if before is not None:
            raise InputError(f"--compare {values!r}: given twice (after --compare {before!r}); "
                             "a run has one reference configuration (overrides combine in one "
                             "SPEC: bits=4,dtype=float16)")
        setattr(namespace, self.dest, values)


def add_compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--compare", metavar="SPEC", action=_OneSpec,
                   help="run a reference configuration beside the drafter every round: another "
                        "drafter directory, or overrides dtype=T, bits=B[,group=G], "
                        "layer-offset=K, residual-scale=S (docs/COMPARE.md)")
    p.add_argument("--compare-tol", type=flag_ranges.typed_float, default=None, metavar="TOL",
                   help="with --compare: the relative error beyond which a buffer of the two "
                        f"configurations diverges (default {DEFAULT_TOLERANCE})")


def add_recorded_tol_arg(p: argparse.ArgumentParser, what: str = "") -> None:
    """replay's and export's --compare-tol: a recording judged again, not a run's own."""
    p.add_argument("--compare-tol", type=flag_ranges.typed_float, default=None, metavar="TOL",
                   help=f"a session run with --compare: judge its divergence{what} again at "
                        "this tolerance, from the recorded relative errors (default: the "
                        "recording's)")


def check_compare(args) -> None:
    """Check --compare before any model loads: `args.compare` becomes the parsed spec."""
    if args.compare is None:
        if args.compare_tol is not None:
            raise InputError("--compare-tol: given without --compare")
        return
    args.compare = parse_spec(args.compare)
    if args.compare.draft_dir is not None:
        with named_as_reference(args.compare):
            check_drafter_path(args.compare.draft_dir)
    if args.compare_tol is None:  # its range is flag_ranges'
        args.compare_tol = DEFAULT_TOLERANCE
    check_greedy(args.temperature)
    if getattr(args, "distributed", False):
        raise InputError("--compare: not with --distributed (the reference runs beside a "
                         "decode on one process)")


def check_drafter_path(value) -> None:
    """A --draft or --compare drafter folder checked in full before the target loads (the
    loader checks the same, minutes later)."""
    read_drafter_config(Path(value).expanduser())


def add_decode_args(p: argparse.ArgumentParser, block_default=None) -> None:
    p.add_argument("--block", type=int, default=block_default, metavar="G",
                   help="proposals per round (default: the drafter's block_size - 1)")
    p.add_argument("--temperature", type=flag_ranges.typed_float, default=0.0, metavar="T",
                   help="0: greedy; above 0: sampling, with rejection sampling against the "
                        "drafter's q (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="the sampling seed at T > 0 (default: %(default)s)")


def add_prompt_args(p: argparse.ArgumentParser, required: bool = False) -> None:
    group = p.add_mutually_exclusive_group(required=required)
    group.add_argument("--prompt", metavar="TEXT", help="the prompt (default: the sample's code request)")
    group.add_argument("--prompt-file", metavar="F", help="read the prompt from a UTF-8 file")
    chat = p.add_mutually_exclusive_group()
    chat.add_argument("--chat", dest="chat", action="store_true", default=None,
                      help="wrap the prompt in the chat template (default when there is one)")
    chat.add_argument("--raw", dest="chat", action="store_false", help="tokenize the prompt as is")


def build_parsers() -> dict[str, argparse.ArgumentParser]:
    parsers = {}

    p = _Parser(prog="dflash-tui", description="Step a DFlash/DFlash2 speculative decode live.",
                epilog=f"Other commands: {', '.join(COMMANDS)} (dflash-tui COMMAND --help)")
    add_model_args(p)
    add_prompt_args(p)
    add_decode_args(p)
    p.add_argument("--max-tokens", type=int, default=512, metavar="N",
                   help="the token budget: the session finishes after N generated tokens "
                        "(default: %(default)s)")
    p.add_argument("--export-dir", metavar="DIR",
                   help="one directory per session in here, with its trace and what x exports "
                        "(default: ./dflash-snapshots)")
    trace = p.add_mutually_exclusive_group()
    trace.add_argument("--trace", metavar="FILE",
                       help="record every round to FILE instead (appended to: one header per session)")
    trace.add_argument("--no-trace", action="store_true",
                       help="record no trace (older rounds then keep only their summary)")
    p.add_argument("--keep-rounds", type=int, default=KEEP_ROUNDS, metavar="N",
                   help="full records kept in memory (older ones are read back from the trace; "
                        "default: %(default)s)")
    add_compare_args(p)
    parsers["tui"] = p

    p = _Parser(prog="dflash-tui probe", description="Step the engine headless and print each round.")
    add_model_args(p)
    add_prompt_args(p)
    add_decode_args(p)
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--rounds", type=int, metavar="N", help="stop after N rounds")
    budget.add_argument("--max-tokens", type=int, metavar="N", help="stop after N tokens (default 64)")
    p.add_argument("--out", metavar="DIR", help="write DIR/round-NNNN.json and DIR/summary.json "
                   "(DIR must be empty or new)")
    p.add_argument("--force", action="store_true",
                   help="reuse a non-empty --out: first remove its round-*.json/npz and summary.json")
    p.add_argument("--npz", action="store_true", help="also write raw buffers as round-NNNN.npz")
    p.add_argument("--no-probes", action="store_true", help="skip the buffer statistics")
    add_compare_args(p)
    parsers["probe"] = p

    p = _Parser(prog="dflash-tui bench", description="Acceptance tables by workload and block.")
    add_model_args(p)
    p.add_argument("--prompts", metavar="DIR", help="one sub-folder per workload (default: sample_prompts/)")
    p.add_argument("--blocks", default="2,4,7,8", metavar="LIST",
                   help="proposals per round, comma-separated; each measured once, in ascending "
                        "order (default: %(default)s)")
    p.add_argument("--max-tokens", type=int, default=600, metavar="N",
                   help="tokens generated per prompt (default: %(default)s)")
    p.add_argument("--temperature", type=flag_ranges.typed_float, default=0.0, metavar="T",
                   help="0: greedy (default); above 0: sampling")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="the sampling seed (default: %(default)s)")
    p.add_argument("--limit", type=int, metavar="N", help="use only the first N prompts of each workload")
    p.add_argument("--json", metavar="FILE", help="write the full numbers as JSON")
    p.add_argument("--csv", metavar="FILE", help="write one row per workload and block as CSV")
    p.add_argument("--oracle", action="store_true",
                   help="force every proposal to the target's own greedy continuation (a drafter "
                        "that cannot miss): the speed ceiling of each block on this machine")
    p.add_argument("--slots", action="store_true",
                   help="also tabulate every slot over each workload: acceptance, how often the "
                        "drafter's argmax is the target's token, its rank, the selector's "
                        "candidates and walk (the TUI's aggregates, over every prompt)")
    chat = p.add_mutually_exclusive_group()
    chat.add_argument("--chat", dest="chat", action="store_true", default=None,
                      help="wrap each prompt in the chat template (default when there is one)")
    chat.add_argument("--raw", dest="chat", action="store_false", help="tokenize prompts as is")
    add_compare_args(p)
    parsers["bench"] = p

    p = _Parser(prog="dflash-tui bench-diff", description="Two bench runs (bench --json) side by "
                "side: accepted per round by workload and block, the change, and a paired "
                "bootstrap interval over prompts.")
    p.add_argument("a", metavar="A.json", help="the first bench's --json file (the baseline)")
    p.add_argument("b", metavar="B.json", help="the second bench's --json file")
    p.add_argument("--by-prompt", action="store_true", help="also list every prompt's change")
    p.add_argument("--by-slot", action="store_true",
                   help="also show, slot by slot, how often each bench accepted a proposal once "
                        "every proposal before it was accepted: where the rounds end")
    p.add_argument("--resamples", type=int, default=2000, metavar="N",
                   help="bootstrap resamples (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="the bootstrap's seed (default: %(default)s)")
    parsers["bench-diff"] = p

    p = _Parser(prog="dflash-tui distill", description="Train a DFlash2 drafter for a target by self-distillation.")
    p.add_argument("model", metavar="TARGET", nargs="?", help="mlx-lm model directory or .gguf file (default: the sample target)")
    p.add_argument("--out", metavar="DIR", required=True, help="where the drafter checkpoint goes")
    parsers["distill"] = p

    p = _Parser(prog="dflash-tui quantize", description="Write a quantized copy of a drafter (MLX affine, mlx-lm's layout).")
    from .quantize import add_arguments as add_quantize_arguments

    add_quantize_arguments(p)
    parsers["quantize"] = p

    p = _Parser(prog="dflash-tui replay", description="Reopen a recorded session in the TUI, no model needed.")
    p.add_argument("trace", metavar="SOURCE",
                   help="a trace, a snapshot, or a directory of them (a session directory or probe --out)")
    p.add_argument("--export-dir", metavar="DIR", default="dflash-snapshots",
                   help="where x writes snapshots, in a directory per replay (default: ./%(default)s)")
    add_recorded_tol_arg(p)
    parsers["replay"] = p

    p = _Parser(prog="dflash-tui export", description="Flat tables of a recorded session: "
                "rounds, slots and buffers (docs/SNAPSHOT.md).")
    p.add_argument("source", metavar="SOURCE",
                   help="a trace, a snapshot, or a directory of them (a session directory or probe --out)")
    p.add_argument("--out", metavar="DIR", required=True, help="where rounds / slots / buffers go")
    p.add_argument("--format", choices=("csv", "parquet"), default="csv",
                   help="csv (default) or parquet (needs pyarrow: pip install 'dflash-tui[parquet]')")
    p.add_argument("--session", type=int, metavar="N",
                   help="which session of a trace that holds several (1-based; default: the last)")
    p.add_argument("--force", action="store_true",
                   help="replace rounds / slots / buffers files already in --out (and nothing else)")
    add_recorded_tol_arg(p, " (its compare_first_divergent column)")
    parsers["export"] = p
    return parsers


def _trainer_cli():
    """The trainer's command line: an optional part (the dflash-tui-distill package)."""
    try:
        import dflash_tui_distill.cli
    except ModuleNotFoundError as error:
        if error.name != "dflash_tui_distill":
            raise
        raise InputError('distill: the trainer is not installed: pip install "dflash-tui[distill]" '
                         "(from a checkout: pip install ./distill)") from None
    return dflash_tui_distill.cli


def _check_command_word(word: str) -> None:
    """A bare word that is no command and no existing path is a mistyped command far more
    often than a model folder (`bench-dif A B` used to say `unrecognized arguments: A B`).
    Anything path-like (a separator, a dot) is left to the MODEL_DIR checks."""
    if word[:1] in ("-", "~") or "/" in word or os.sep in word or "." in word or Path(word).exists():
        return
    close = difflib.get_close_matches(word, COMMANDS, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise InputError(f"unknown command {word!r} ({hint}commands: {', '.join(COMMANDS)}; "
                     "or MODEL_DIR, an existing folder or .gguf file)")


def parse(argv: list[str]) -> tuple[str, argparse.Namespace]:
    parsers = build_parsers()
    command = argv[0] if argv and argv[0] in COMMANDS else "tui"
    if command == "tui" and argv:
        _check_command_word(argv[0])
    rest = argv[1:] if command != "tui" else argv
    if command == "distill":
        _trainer_cli().add_arguments(parsers["distill"])
    args = parsers[command].parse_args(rest)
    if command in ("tui", "probe", "bench", "replay", "export"):
        flag_ranges.check(args)
    if command == "quantize":  # DRAFT_DIR, its first argument: named by its path alone
        check_drafter_path(args.draft)
    elif getattr(args, "draft", None):
        with named_as_draft(args.draft):
            check_drafter_path(args.draft)
    if hasattr(args, "prompt"):
        args.prompt_text = _prompt_text(args)
        args.prompt_source = _prompt_source(args)
    if hasattr(args, "compare"):
        check_compare(args)
    flag_ranges.plain(args)  # checked: the typed text has nothing more to say
    return command, args


def main(argv: Optional[list[str]] = None) -> int:
    if argv is None:  # the console script (tests call main(argv) and keep their process as is)
        from .blas import maybe_reexec_with_openblas
        from .malloc import return_large_blocks

        maybe_reexec_with_openblas()
        return_large_blocks()
        argv = sys.argv[1:]
    mesh = None
    try:
        command, args = parse(argv)
        if getattr(args, "distributed", False):
            from .launched import join_group

            mesh = args.mesh = join_group(args, app=command == "tui")
        if command == "probe":
            from .probe import run
        elif command == "bench":
            from .bench.command import run
        elif command == "bench-diff":
            from .bench.diff import run
        elif command == "distill":
            run = _trainer_cli().run
        elif command == "quantize":
            from .quantize import run
        elif command == "replay":
            from .app.main import run_replay as run
        elif command == "export":
            from .export_tables import run
        else:
            from .app.main import run_app as run
        return int(run(args) or 0)
    except InputError as error:
        return _fail(user_message(error), InputError.exit_code, mesh)
    except GroupError as error:
        return _fail(str(error), GroupError.exit_code, mesh)
    except RuntimeError as error:
        lost = mesh.lost_contact(error) if mesh is not None else None
        if lost is None:
            raise
        return _fail(str(lost), GroupError.exit_code, mesh)
    except KeyboardInterrupt:
        print("dflash-tui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1


def _fail(message: str, code: int, mesh) -> int:
    """The one line a failed command leaves; in a group it names the rank, and reaches the
    terminal even from a rank whose output is silenced (dflash_tui/launched.py)."""
    if mesh is None:
        print(f"dflash-tui: error: {message}", file=sys.stderr)
    else:
        print(f"dflash-tui: error: {mesh.who}: {message}", file=sys.__stderr__, flush=True)
    return code
