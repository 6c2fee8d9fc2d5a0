"""The MLX DFlash / DFlash2 engine. No Textual, no rich: plain records out.

    from dflash_tui.engine import SessionOptions, load_pair
    pair = load_pair("model_dir")                  # target + drafter, loaded once
    session = pair.open("Write a haiku", options=SessionOptions(gamma=7))
    record = session.step_stage()      # one stage
    record = session.step_round()      # the rest of the round

Submodules are imported lazily so that `dflash_tui.engine.records` (plain data) can be read
without loading MLX, as replay does.
"""

_EXPORTS = {
    "InputError": "errors",
    "ParameterError": "errors",
    "Pair": "api",
    "load_pair": "api",
    "Session": "session",
    "SessionOptions": "session",
    "SessionFinished": "session",
    "Stage": "session",
    "load_target": "target",
    "load_drafter": "checkpoint",
    "save_drafter": "checkpoint",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
