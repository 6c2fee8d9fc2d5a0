"""Which paths are a target and its drafter, decided from the file system alone.

No MLX here: the TUI checks its arguments with these before its first frame, and the
loaders call the same functions, so a path is refused with the same line everywhere.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Optional

from .errors import InputError, ParameterError

TARGET_KINDS = ("an mlx-lm model directory (config.json, model*.safetensors, tokenizer files) "
                "or a llama-family .gguf file")
DRAFTER_KIND = "a folder with config.json + *.safetensors"


def check_target_path(path: Path) -> None:
    """Refuse a path that cannot be a target, before a drafter beside it is looked for (an
    empty folder is "not a model", not "no drafter found")."""
    if not path.exists():
        raise InputError(f"{path}: no such file or directory (expected {TARGET_KINDS})")
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise InputError(f"{path}: not a model directory: {path / 'config.json'} is missing "
                             f"(expected {TARGET_KINDS})")
    elif path.suffix.lower() != ".gguf":
        raise InputError(f"{path}: not a model: a target is {TARGET_KINDS}")


def check_drafter_dir(path: Path) -> None:
    """Refuse a drafter path that is missing or a file (a .gguf or a .safetensors given
    where its folder belongs), before its config.json is read."""
    if not path.exists():
        raise InputError(f"{path}: no such drafter directory (expected {DRAFTER_KIND})")
    if not path.is_dir():
        raise InputError(f"{path}: a file, not a drafter directory (expected {DRAFTER_KIND})")


@contextmanager
def named_as_draft(draft: Optional[str | Path]):
    """An InputError raised inside about the drafter folder the caller gave as `draft`,
    re-raised as that parameter's (`draft='DIR': DIR/config.json: ...`, which the CLI says as
    `--draft DIR: ...`), so a user with two drafter folders on the line (--draft, --compare)
    knows which one it was. The default drafter (draft=None: MODEL_DIR/draft) is left as is."""
    try:
        yield
    except ParameterError:  # names its own parameter already
        raise
    except InputError as error:
        if draft is None:
            raise
        # `--draft DIR: no such drafter directory`, not `--draft DIR: DIR: no such ...`
        problem = str(error).removeprefix(f"{Path(draft).expanduser()}: ")
        raise ParameterError("draft", str(draft), problem) from None


def resolve_drafter_dir(model: Path, draft: Optional[str | Path]) -> Path:
    if draft is not None:
        return Path(draft).expanduser()
    if model.is_dir() and (model / "draft").is_dir():
        return model / "draft"
    raise ParameterError(
        "draft", None,
        f"no drafter given and no {model / 'draft' if model.is_dir() else 'draft/ directory'} "
        f"beside {model}",
    )
