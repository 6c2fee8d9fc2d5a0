"""Entry points called by dflash_tui.cli: `dflash-tui [MODEL_DIR]` and `dflash-tui replay`.

Arguments are checked here, before the app opens, so a wrong path or flag ends with one
line and exit code 2 (InputError). Everything slow (MLX imports, loading, prefill) happens
on the engine thread after the first frame.
"""

from __future__ import annotations

import os
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Optional

from .. import sample
from ..engine.errors import GroupError, InputError
from ..engine.paths import check_drafter_dir, check_target_path, resolve_drafter_dir
from ..outputs import append_file, model_parts, not_a_model_file, output_dir, same_file
from .engine_thread import Launch

ENGINE_GRACE = 0.3  # seconds an idle engine thread gets to close its session on quit
# --distributed: the other ranks are inside the same stage; rank 0 lets it end there and
# tells them to quit, rather than leave them waiting for it (docs/DISTRIBUTED.md).
GROUP_QUIT_GRACE = 60.0
UI_SWITCH_INTERVAL = 0.001  # seconds (sys.setswitchinterval)


def launch_from_args(args) -> Launch:
    """Flag ranges were checked when parsing (flag_ranges); paths and outputs are checked
    here, with the same functions the loaders and headless commands use."""
    model, draft = sample.resolve(args.model, args.draft)
    model = model.expanduser()
    check_target_path(model)
    if draft is not None:
        draft = draft.expanduser()
        check_drafter_dir(draft)
    draft = resolve_drafter_dir(model, draft)
    prompt = args.prompt_text if args.prompt_text is not None else sample.DEFAULT_PROMPT
    if not prompt.strip():
        raise InputError("the prompt is empty (give --prompt TEXT or --prompt-file F)")
    if args.trace and args.prompt_file and same_file(Path(args.trace), Path(args.prompt_file)):
        raise InputError(f"--trace {args.trace}: same file as --prompt-file")  # it appends
    parts = model_parts(model, draft, args.compare.draft_dir if args.compare else None)
    if args.trace:  # it appends: a model file would be damaged
        not_a_model_file("--trace", Path(args.trace), parts)
    return Launch(
        model=model, draft=draft, prompt=prompt, prompt_source=args.prompt_source,
        chat=args.chat, dtype=args.dtype,
        keep_quantized=args.keep_quantized, layer_offset=args.layer_offset, gamma=args.block,
        temperature=args.temperature, seed=args.seed, max_tokens=args.max_tokens,
        trace=append_file("--trace", args.trace),
        mesh=getattr(args, "mesh", None), compare=args.compare, compare_tol=args.compare_tol,
        freeze_loaded=True,
    )


def run_app(args) -> int:
    launch = launch_from_args(args)
    # A folder the user named is checked now; the default one is made when first written
    # (the trace, `x`), and a failure there is reported in the app, which goes on without it
    # (a read-only working folder must not stop a session).
    given = {} if args.export_dir is None else {"export_dir": output_dir("--export-dir", args.export_dir)}
    if launch.mesh is not None:
        from .launched import run_group

        return run_group(launch, **given)
    return run_live(launch, record_trace=not args.no_trace, keep_rounds=args.keep_rounds, **given)


def run_live(launch: Launch, **app_options) -> Optional[int]:
    """Run the live app until it quits; leave without waiting for a stage in flight."""
    from .live import LiveApp

    # The engine thread runs Python between MLX ops; a short switch interval hands the GIL
    # to the UI thread within a millisecond when a key arrives (default: 5 ms).
    sys.setswitchinterval(UI_SWITCH_INTERVAL)
    # Likewise the engine's BLAS threads leave the UI thread a core of its own.
    from ..blas import leave_a_core_for_the_ui

    leave_a_core_for_the_ui()
    app = LiveApp(launch, **app_options)
    with _terminal(launch, app):
        code = app.run()
        failure = app.failure
        if failure is not None:
            print(f"dflash-tui: error: {failure.message}", file=sys.stderr)
            if failure.detail and os.environ.get("DFLASH_TUI_DEBUG"):
                print(failure.detail, file=sys.stderr)
    if launch.mesh is not None and launch.mesh.failure is not None:
        code = GroupError.exit_code
    return _leave(app.engine, code if code is not None else 0)


def _terminal(launch: Launch, app):
    """The app's own terminal; under --distributed, rank 0's (app/launched.py)."""
    if launch.mesh is None:
        return nullcontext()
    from .launched import rank0_terminal

    return rank0_terminal(app, launch.mesh)


def run_replay(args) -> int:
    from .replay import at_tolerance, open_recording
    from .replay_app import ReplayApp

    export_dir = output_dir("--export-dir", args.export_dir)
    recording = open_recording(Path(args.trace))  # indexed: rounds are read as shown
    if args.compare_tol is not None:
        recording = at_tolerance(recording, args.compare_tol)
    app = ReplayApp(recording, export_dir=export_dir)
    code = app.run()
    return code if code is not None else 0


def _leave(engine, code: int) -> Optional[int]:
    """Return normally when the engine thread has closed; if it is still inside a stage (an
    MLX op cannot be interrupted), exit at once: the terminal is already restored, the trace
    is flushed per round, and tearing MLX down under a running op could crash noisily."""
    mesh = engine.launch.mesh
    if mesh is not None and mesh.failure is None:
        engine.join(GROUP_QUIT_GRACE)
    elif engine.is_alive() and engine.busy_stage is None:  # idle: it closes at once on Quit
        engine.join(ENGINE_GRACE)
    if engine.is_alive():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
