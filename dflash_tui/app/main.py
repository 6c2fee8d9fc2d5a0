"""Entry points called by dflash_tui.cli: `dflash-tui [MODEL_DIR]` and `dflash-tui replay`.

Arguments are checked here, before the app opens, so a wrong path or flag ends with one
line and exit code 2 (InputError). Everything slow (MLX imports, loading, prefill) happens
on the engine thread after the first frame.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

from .. import sample
from ..engine.errors import InputError
from .engine_thread import Launch

ENGINE_GRACE = 0.3  # seconds an idle engine thread gets to close its session on quit
UI_SWITCH_INTERVAL = 0.001  # seconds (sys.setswitchinterval)


def launch_from_args(args) -> Launch:
    model, draft = sample.resolve(args.model, args.draft)
    model = model.expanduser()
    if not model.exists():
        raise InputError(f"{model}: no such model directory or .gguf file")
    if draft is not None:
        draft = draft.expanduser()
        if not draft.is_dir():
            raise InputError(f"{draft}: no such drafter directory")
    elif not (model.is_dir() and (model / "draft").is_dir()):
        raise InputError(f"{model}: no drafter given and no draft/ directory beside it "
                         "(pass --draft DIR)")
    if args.block is not None and args.block < 1:
        raise InputError(f"--block {args.block}: expected at least 1 proposal per round")
    if args.temperature < 0:
        raise InputError(f"--temperature {args.temperature}: expected 0 or more")
    if args.max_tokens < 1:
        raise InputError(f"--max-tokens {args.max_tokens}: expected at least 1")
    prompt = args.prompt_text if args.prompt_text is not None else sample.DEFAULT_PROMPT
    if not prompt.strip():
        raise InputError("the prompt is empty (give --prompt TEXT or --prompt-file F)")
    trace = Path(args.trace).expanduser() if args.trace else None
    if trace is not None and trace.is_dir():
        raise InputError(f"--trace {trace}: is a directory (expected a file to append to)")
    if args.keep_rounds < 1:
        raise InputError(f"--keep-rounds {args.keep_rounds}: expected at least 1")
    check_export_dir(args.export_dir)
    return Launch(
        model=model, draft=draft, prompt=prompt, chat=args.chat, dtype=args.dtype,
        keep_quantized=args.keep_quantized, layer_offset=args.layer_offset, gamma=args.block,
        temperature=args.temperature, seed=args.seed, max_tokens=args.max_tokens, trace=trace,
    )


def check_export_dir(value: str) -> Path:
    export_dir = Path(value).expanduser()
    if export_dir.exists() and not export_dir.is_dir():
        raise InputError(f"--export-dir {export_dir}: exists and is not a directory")
    return export_dir


def run_app(args) -> int:
    return run_live(launch_from_args(args), export_dir=Path(args.export_dir).expanduser(),
                    record_trace=not args.no_trace, keep_rounds=args.keep_rounds)


def run_live(launch: Launch, **app_options) -> Optional[int]:
    """Run the live app until it quits; leave without waiting for a stage in flight."""
    from .live import LiveApp

    # The engine thread runs Python between MLX ops; a short switch interval hands the GIL
    # to the UI thread within a millisecond when a key arrives (default: 5 ms).
    sys.setswitchinterval(UI_SWITCH_INTERVAL)
    app = LiveApp(launch, **app_options)
    code = app.run()
    failure = app.failure
    if failure is not None:
        print(f"dflash-tui: error: {failure.message}", file=sys.stderr)
        if failure.detail and os.environ.get("DFLASH_TUI_DEBUG"):
            print(failure.detail, file=sys.stderr)
    return _leave(app.engine, code if code is not None else 0)


def run_replay(args) -> int:
    from .replay import load
    from .replay_app import ReplayApp

    export_dir = check_export_dir(args.export_dir)
    recording = load(Path(args.trace))
    app = ReplayApp(recording, export_dir=export_dir)
    code = app.run()
    return code if code is not None else 0


def _leave(engine, code: int) -> Optional[int]:
    """Return normally when the engine thread has closed; if it is still inside a stage (an
    MLX op cannot be interrupted), exit at once: the terminal is already restored, the trace
    is flushed per round, and tearing MLX down under a running op could crash noisily."""
    if engine.is_alive() and engine.busy_stage is None:  # idle: it closes at once on Quit
        engine.join(ENGINE_GRACE)
    if engine.is_alive():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
