"""Drafter checkpoints in Z Lab's format: a directory of config.json + *.safetensors.

Loading checks every tensor against the shape the config implies and refuses a mismatch
naming the file, the tensor and both shapes. Saving writes the same format (used by
`distill` and by the test fixtures), so what we write is what a user's checkpoint is.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten

from .draft_config import DraftConfig, read_config
from .drafter import DraftModel
from .errors import InputError
from .files import write_json_atomic

PREFIX = "dflash."


def expected_shapes(config: DraftConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a checkpoint must hold, with the shape its config implies."""
    h, d = config.hidden_size, config.head_dim
    heads, kv = config.num_attention_heads, config.num_key_value_heads
    inter, n_ctx = config.intermediate_size, len(config.target_layer_ids)
    shapes = {
        "fc.weight": (h, n_ctx * h),  # the drafter shares the target's hidden size
        "hidden_norm.weight": (h,),
        "norm.weight": (h,),
    }
    for i in range(config.num_hidden_layers):
        p = f"layers.{i}."
        shapes.update({
            p + "self_attn.q_proj.weight": (heads * d, h),
            p + "self_attn.k_proj.weight": (kv * d, h),
            p + "self_attn.v_proj.weight": (kv * d, h),
            p + "self_attn.o_proj.weight": (h, heads * d),
            p + "self_attn.q_norm.weight": (d,),
            p + "self_attn.k_norm.weight": (d,),
            p + "mlp.gate_proj.weight": (inter, h),
            p + "mlp.up_proj.weight": (inter, h),
            p + "mlp.down_proj.weight": (h, inter),
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
        })
        if config.is_dflash2:
            k, groups = config.conv_kernel_size, h // config.conv_group_size
            for conv in ("attention_conv", "mlp_conv"):
                shapes[p + f"{conv}.base_kernel"] = (2, k, h)
                shapes[p + f"{conv}.kernel_projection.weight"] = (2 * k * groups, h)
    if config.is_dflash2:
        v, r = config.vocab_size, config.selector_rank
        shapes["candidate_selector.predecessor_codebook"] = (v, r)
        shapes["candidate_selector.successor_codebook"] = (v, r)
        shapes["candidate_selector.hidden_projection.weight"] = (r, h)
    return shapes


def read_weights(directory: Path) -> dict[str, mx.array]:
    files = sorted(f for f in directory.glob("*.safetensors") if not f.name.startswith("."))
    if not files:
        raise InputError(f"{directory}: no *.safetensors weights found beside config.json")
    weights: dict[str, mx.array] = {}
    for file in files:
        try:
            loaded = mx.load(str(file))
        except Exception as error:  # mlx raises RuntimeError/ValueError with its own text
            raise InputError(f"{file}: unreadable safetensors ({error})") from None
        for name, tensor in loaded.items():
            weights[name] = tensor
    # One-file installs keep the drafter's tensors behind a `dflash.` prefix.
    if any(name.startswith(PREFIX) for name in weights):
        weights = {n[len(PREFIX):]: t for n, t in weights.items() if n.startswith(PREFIX)}
    return weights


def check_shapes(weights: dict[str, mx.array], config: DraftConfig, where: Path) -> None:
    for name, shape in expected_shapes(config).items():
        if name not in weights:
            raise InputError(f"{where}: tensor {name!r} is missing (expected shape {list(shape)})")
        got = tuple(weights[name].shape)
        if got != shape:
            raise InputError(
                f"{where}: tensor {name!r} has shape {list(got)}; expected {list(shape)} "
                "(from config.json)"
            )


def load_drafter(directory: str | Path, dtype: mx.Dtype = mx.float32) -> DraftModel:
    directory = Path(directory).expanduser()
    if not directory.is_dir():
        raise InputError(f"{directory}: no such drafter directory (expected config.json + *.safetensors)")
    config = read_config(directory / "config.json")
    weights = read_weights(directory)
    check_shapes(weights, config, directory)
    known = expected_shapes(config)
    model = DraftModel(config)
    model.load_weights([(n, w.astype(dtype)) for n, w in weights.items() if n in known], strict=True)
    model.eval()
    mx.eval(model.parameters())
    return model


def save_drafter(model: DraftModel, directory: str | Path, dtype: mx.Dtype | None = None,
                 metadata: dict | None = None) -> Path:
    """Write config.json + model.safetensors atomically (temp files, then rename)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    weights = dict(tree_flatten(model.parameters()))
    if dtype is not None:
        weights = {n: w.astype(dtype) for n, w in weights.items()}
    config = model.config.to_json()
    if metadata:
        config.update(metadata)
    # A dot-name the loader skips; it must end in .safetensors or MLX appends that suffix.
    tmp_weights = directory / f".model-{os.getpid()}-{uuid.uuid4().hex[:8]}.safetensors"
    mx.save_safetensors(str(tmp_weights), weights, metadata={"format": "mlx"})
    write_json_atomic(directory / "config.json", config)
    os.replace(tmp_weights, directory / "model.safetensors")
    return directory
