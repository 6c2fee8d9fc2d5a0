"""Quantized drafters written the way someone else would write them: Z Lab's own MLX model
(dflash==0.1.0) loads a float fixture drafter, mlx-lm's `quantize_model` (MLX's
`nn.quantize` underneath) quantizes it and mlx-lm's `save_model` / `save_config` write it.
Nothing here touches the project's loader or its quantize code."""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

from fixtures import target_facts, write_drafter, zlab_config

# The fixture's selector rank is raised to 32 so that its codebooks split into groups of 32.
RANK = 32
# Mixed precision: one module in its own setting, one left float.
MIXED = {"layers.0.mlp.down_proj": {"group_size": 64, "bits": 8}}
KEPT = "candidate_selector.hidden_projection"


def float_drafter(target_dir: Path, directory: Path, kind: str = "DFlash2DraftModel") -> Path:
    facts = target_facts(target_dir)
    config = zlab_config(kind, vocab=facts["vocab"], target_layers=facts["layers"],
                         layer_ids=[1, 2], mask_token_id=facts["mask"])
    if kind == "DFlash2DraftModel":
        config["dflash_config"]["selector_rank"] = RANK
    return write_drafter(directory, config, seed=3)


def zlab_model(draft_dir: Path):
    """Z Lab's DFlashDraftModel / DFlash2DraftModel with the drafter's weights."""
    from unittest import mock

    import dflash.model_mlx as ref

    with mock.patch.object(ref, "snapshot_download", lambda *a, **k: str(draft_dir)):
        return ref.load_draft("local")


def quantize_with_mlx_lm(draft_dir: Path, out: Path, *, bits: int = 4, group_size: int = 32,
                         keep_float: tuple[str, ...] = (KEPT,), mixed: dict = MIXED):
    """Quantize every module but `keep_float` (mixed: per-module settings), as mlx-lm does.
    Returns Z Lab's quantized model."""
    from mlx_lm.utils import quantize_model, save_config, save_model

    model = zlab_model(draft_dir)
    config = json.loads((draft_dir / "config.json").read_text())

    def predicate(path, module):
        return False if path in keep_float else mixed.get(path, True)

    model, config = quantize_model(model, config, group_size, bits, quant_predicate=predicate)
    save_model(out, model)
    save_config(config, out / "config.json")
    return model


def dequantized_tensors(model) -> dict:
    """Z Lab's quantized model's weights in float (MLX's own dequantize), under Z Lab's
    checkpoint names: the float drafter the quantized one stands for."""
    out = {}
    leaves = dict(tree_flatten(model.leaf_modules(), is_leaf=nn.Module.is_module))
    for name, value in tree_flatten(model.parameters()):
        path, _, leaf = name.rpartition(".")
        module = leaves.get(path)
        if isinstance(module, (nn.QuantizedLinear, nn.QuantizedEmbedding)):
            if leaf != "weight":
                continue
            value = mx.dequantize(module.weight, module.scales, module.biases,
                                  group_size=module.group_size, bits=module.bits)
        if path.endswith("_codebook"):
            name = path  # Z Lab's checkpoints store the codebooks without `.weight`
        out[name] = value.astype(mx.float32)
    return out


def float_copy(draft_dir: Path, out: Path) -> Path:
    """A quantized checkpoint written back in float by MLX's own `mx.dequantize`, from its
    files alone (none of the project's loader): what Z Lab's loader, which reads no packed
    weights, is given. A float checkpoint is returned as it is."""
    config = json.loads((draft_dir / "config.json").read_text())
    quantization = config.pop("quantization", None)
    if quantization is None:
        return draft_dir
    config.pop("quantization_config", None)
    weights = {k: v for f in sorted(draft_dir.glob("*.safetensors")) for k, v in mx.load(str(f)).items()}
    tensors = {}
    for name, value in weights.items():
        path, _, leaf = name.rpartition(".")
        if f"{path}.scales" not in weights:
            tensors[name] = value
        elif leaf == "weight":
            entry = quantization.get(path)
            setting = entry if isinstance(entry, dict) else quantization
            value = mx.dequantize(value, weights[f"{path}.scales"], weights.get(f"{path}.biases"),
                                  group_size=setting["group_size"], bits=setting["bits"])
            tensors[path if path.endswith("_codebook") else name] = value
    out.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(out / "model.safetensors"), tensors, metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps(config))
    return out
