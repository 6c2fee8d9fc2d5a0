"""Which paths are a target and its drafter, decided from the file system alone.

No MLX here: the TUI checks its arguments with these before its first frame, and the
loaders call the same functions, so a path is refused with the same line everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from .errors import InputError, ParameterError

TARGET_KINDS = ("an mlx-lm model directory (config.json, model*.safetensors, tokenizer files) "
                "or a llama-family .gguf file")


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
