"""--init-from DIR: start training from an existing drafter's weights instead of random ones.

The checkpoint (Z Lab format, e.g. the shipped sample drafter or an earlier --out) fixes
the architecture: its shape flags become this run's defaults, and a flag given explicitly
that disagrees is refused, as is a checkpoint made for a target of another shape. Only the
weights carry over; the optimizer, the schedule and the data start fresh.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dflash_tui.engine.checkpoint import load_drafter, read_config
from dflash_tui.engine.draft_config import DFLASH2, DraftConfig
from dflash_tui.engine.errors import InputError

from .settings import comparable

# The drafter's own shape: fields of the checkpoint's config that the target does not fix.
SHAPE_FLAGS = ("kind", "layers", "gamma", "rank", "top_k", "target_layer_ids", "mask_token_id",
               "intermediate_size", "conv_kernel", "conv_group")


def _config_path(directory: str | Path) -> Path:
    path = Path(directory).expanduser()
    if not (path / "config.json").is_file():
        raise InputError(f"--init-from {path}: no drafter here (expected config.json + *.safetensors)")
    return path


def shape_settings(directory: str | Path) -> dict[str, Any]:
    """The checkpoint's architecture as TrainSettings values."""
    config = read_config(_config_path(directory) / "config.json")
    if config.quantization is not None:
        raise InputError(f"--init-from {directory}: a quantized drafter; training quantized "
                         "weights is not supported (start from its float original)")
    dflash2 = config.kind == DFLASH2
    return {
        "kind": "dflash2" if dflash2 else "dflash",
        "layers": config.num_hidden_layers,
        "gamma": config.block_size - 1,
        "rank": config.selector_rank if dflash2 else None,
        "top_k": config.selector_top_k if dflash2 else None,
        "target_layer_ids": list(config.target_layer_ids),
        "mask_token_id": config.mask_token_id,
        "intermediate_size": config.intermediate_size,
        "conv_kernel": config.conv_kernel_size if dflash2 else None,
        "conv_group": config.conv_group_size if dflash2 else None,
    }


def apply_shape(given: dict[str, Any], directory: str | Path) -> dict[str, Any]:
    """`given` (train flags, None = not given) with the checkpoint's shape filled in."""
    shape = shape_settings(directory)
    out = dict(given)
    for name in SHAPE_FLAGS:
        wanted = shape[name]
        if wanted is None:
            continue
        value = given.get(name)
        if value is not None and comparable(value) != comparable(wanted):
            flag = "--block" if name == "gamma" else "--" + name.replace("_", "-")
            raise InputError(
                f"--init-from {directory}: that drafter has {flag} {_show(wanted)}; this command "
                f"says {_show(value)} (drop the flag, or train from scratch without --init-from)")
        out[name] = wanted
    return out


def refuse_other_target(directory: str | Path, shape: dict[str, int],
                        config: DraftConfig | None = None) -> None:
    """A checkpoint made for a target of another shape (architecture.target_shape) cannot
    start this one. Checked from its config.json as soon as the target is loaded, so a
    mismatch costs seconds, not a data phase."""
    path = _config_path(directory)
    config = config or read_config(path / "config.json")
    for name, want in shape.items():
        have = getattr(config, name)
        if have != want:
            raise InputError(
                f"--init-from {path / 'config.json'}: made for a target with {name} {have}; "
                f"this target has {want}")


def start_weights(directory: str | Path, shape: dict[str, int]):
    """The checkpoint's parameters in float32, checked against the target's shape."""
    start = load_drafter(_config_path(directory))
    refuse_other_target(directory, shape, start.config)
    return start.parameters()


def start_record(directory: str | Path) -> dict | None:
    """How the starting weights were made (their own "dflash_tui_training"), or None.

    A drafter trained in stages carries its whole lineage this way: each stage's record
    nests the one it started from under "started_from".
    """
    path = Path(directory).expanduser() / "config.json"
    if not path.is_file():  # a resumed run whose starting directory has since gone
        return None
    return read_config(path).extra.get("dflash_tui_training")


def _show(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
