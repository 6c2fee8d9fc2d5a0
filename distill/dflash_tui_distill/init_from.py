"""--init-from DIR: start training from an existing drafter's weights instead of random ones.

The checkpoint (Z Lab format, e.g. the shipped sample drafter or an earlier --out) fixes
the architecture: its shape flags become this run's defaults, and a flag given explicitly
that disagrees is refused, as is a checkpoint made for a target of another shape. Only the
weights carry over; the optimizer, the schedule and the data start fresh. A quantized
checkpoint (`dflash-tui quantize`, or the sample drafter if it ships quantized) starts
training from its dequantized values: float weights holding exactly what the packed ones
do, recorded as "dequantized_from" in the lineage.

--grow lets two flags differ, the two that buy capacity without starting over:
  --layers above the checkpoint's: each new layer is a copy of the last trained one with its
    output projections (o_proj, down_proj) zeroed. A layer adds its sublayers' outputs to
    the stream, and DFlash2's output-side convolution is linear in them, so the new layer
    adds nothing: the grown drafter computes what the checkpoint did, to the last bit.
  --rank below the checkpoint's: the selector's edge score is sum_r pred[p, r] h[r] succ[c, r],
    so each component r is kept or dropped whole; the kept ones are those with the largest
    |pred[:, r]| |succ[:, r]| |hidden_projection[r]| (a component's scale, the norms its three
    factors multiply). The selector changes a little; the drafter body does not.
  --target-layer-ids naming every layer the checkpoint reads and more, each once: the context is
    fc(concat of the captured layers), one block of fc's input columns per layer, so each
    layer the checkpoint read keeps its columns and each new one gets zero columns. The
    grown drafter computes what the checkpoint did (up to the order of fc's sums), and the
    new columns' gradient is not zero, so they learn to use what the new layers hold.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx.utils import tree_flatten, tree_unflatten

from dflash_tui.engine.checkpoint import load_drafter
from dflash_tui.engine.draft_config import DFLASH2, DraftConfig, read_config
from dflash_tui.engine.errors import InputError
from dflash_tui.engine.quantize import dequantize_drafter

from .settings import comparable

# The drafter's own shape: fields of the checkpoint's config that the target does not fix.
SHAPE_FLAGS = ("kind", "layers", "gamma", "rank", "top_k", "target_layer_ids", "mask_token_id",
               "intermediate_size", "conv_kernel", "conv_group")
# What --grow lets differ, and which way: the flag's value against the checkpoint's.
GROWABLE = {"layers": lambda given, have: given > have, "rank": lambda given, have: given < have,
            "target_layer_ids": lambda given, have: set(given) > set(have)}
GROW_HOW = "; --grow lets --layers go above it, --rank below it, and --target-layer-ids add layers"


def _config_path(directory: str | Path) -> Path:
    path = Path(directory).expanduser()
    if not (path / "config.json").is_file():
        raise InputError(f"--init-from {path}: no drafter here (expected config.json + *.safetensors)")
    return path


@contextmanager
def _named_as_init_from(directory: str | Path):
    """The loader's refusals (a target's folder, a damaged tensor) say which flag they mean."""
    try:
        yield
    except InputError as error:
        if str(error).startswith("--init-from "):
            raise
        raise InputError(f"--init-from {Path(directory).expanduser()}: {error}") from None


def shape_settings(directory: str | Path) -> dict[str, Any]:
    """The checkpoint's architecture as TrainSettings values."""
    with _named_as_init_from(directory):
        config = read_config(_config_path(directory) / "config.json")
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
    count = given.get("target_layers")
    if count is not None and given.get("target_layer_ids") is None and count != len(shape["target_layer_ids"]):
        # the count alone would pick Z Lab's spacing, whose ids need not include the
        # checkpoint's: a grown drafter names them (and it was silently ignored before)
        raise InputError(
            f"--init-from {directory}: that drafter reads {len(shape['target_layer_ids'])} target "
            f"layers ({_show(shape['target_layer_ids'])}); this command says --target-layers {count} "
            "(drop it, or give --grow --target-layer-ids with those and the new ones)")
    for name in SHAPE_FLAGS:
        wanted = shape[name]
        if wanted is None:
            continue
        value = given.get(name)
        if value is not None and comparable(value) != comparable(wanted):
            if given.get("grow") and name in GROWABLE and GROWABLE[name](value, wanted):
                continue
            flag = "--block" if name == "gamma" else "--" + name.replace("_", "-")
            how = GROW_HOW if name in GROWABLE else ""
            raise InputError(
                f"--init-from {directory}: that drafter has {flag} {_show(wanted)}; this command "
                f"says {_show(value)} (drop the flag, or train from scratch without --init-from{how})")
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


def start_weights(directory: str | Path, shape: dict[str, int], config: DraftConfig | None = None):
    """The checkpoint's parameters, checked against the target's shape; grown to `config`'s
    layers and rank where those differ (--grow; module docstring)."""
    with _named_as_init_from(directory):
        start = load_drafter(_config_path(directory))
    refuse_other_target(directory, shape, start.config)
    dequantize_drafter(start)  # a quantized start trains from the values its weights hold
    params = start.parameters()
    if config is None:
        return params
    if config.num_hidden_layers > len(params["layers"]):
        params["layers"] = grown_layers(params["layers"], config.num_hidden_layers)
    if tuple(config.target_layer_ids) != tuple(start.config.target_layer_ids):
        params["fc"] = {"weight": grown_fc(params["fc"]["weight"], start.config.target_layer_ids,
                                           config.target_layer_ids)}
    if "candidate_selector" in params and config.selector_rank < start.config.selector_rank:
        params["candidate_selector"] = fewer_components(params["candidate_selector"],
                                                        config.selector_rank)
    return params


def grown_layers(layers: list[dict], count: int) -> list[dict]:
    """`layers` then copies of the last with zero output projections, `count` in all."""
    extra = []
    for _ in range(count - len(layers)):
        flat = dict(tree_flatten(layers[-1]))
        for name in ("self_attn.o_proj.weight", "mlp.down_proj.weight"):
            flat[name] = mx.zeros_like(flat[name])
        extra.append(tree_unflatten(list(flat.items())))
    return list(layers) + extra


def grown_fc(weight: mx.array, have: tuple[int, ...], wanted: tuple[int, ...]) -> mx.array:
    """fc's weight [H, len(have) * H] laid out for `wanted` (a superset of `have`): each layer
    of `have` keeps its block of columns, at its place in `wanted`; the new blocks are zero."""
    hidden = weight.shape[1] // len(have)
    blocks = {i: weight[:, k * hidden:(k + 1) * hidden] for k, i in enumerate(have)}
    zero = mx.zeros((weight.shape[0], hidden), dtype=weight.dtype)
    return mx.concatenate([blocks.get(i, zero) for i in wanted], axis=1)


def fewer_components(selector: dict, rank: int) -> dict:
    """The selector's `rank` strongest components (module docstring), in their old order."""
    pred, succ = selector["predecessor_codebook"], selector["successor_codebook"]
    proj = selector["hidden_projection"]["weight"]  # [r, hidden]
    norm = lambda a, axis: mx.sqrt((a.astype(mx.float32) ** 2).sum(axis=axis))  # noqa: E731
    scale = norm(pred, 0) * norm(succ, 0) * norm(proj, 1)
    keep = mx.sort(mx.argsort(-scale)[:rank])
    return {"predecessor_codebook": pred[:, keep], "successor_codebook": succ[:, keep],
            "hidden_projection": {"weight": proj[keep]}}


def start_record(directory: str | Path) -> dict | None:
    """How the starting weights were made (their own "dflash_tui_training"), or None.

    A drafter trained in stages carries its whole lineage this way: each stage's record
    nests the one it started from under "started_from".
    """
    path = Path(directory).expanduser() / "config.json"
    if not path.is_file():  # a resumed run whose starting directory has since gone
        return None
    config = read_config(path)
    record = config.extra.get("dflash_tui_training")
    if config.quantization is not None:  # started from its dequantized values (start_weights)
        record = {**(record or {}), "dequantized_from": config.quantization}
    return record


def _show(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
