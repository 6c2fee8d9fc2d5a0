"""Drafter checkpoints in Z Lab's format: a directory of config.json + *.safetensors.

Loading checks every tensor against the shape the config implies and refuses a mismatch
naming the file, the tensor and both shapes; a tensor the drafter has no place for is
refused by name too (as mlx-lm's strict load does). The expected shapes are those of the
model the config builds (quantized as its weights say, engine/quantize.py), not a list kept
by hand. Saving writes the same format (used by `distill`, `quantize` and the test
fixtures), so what we write is what a user's checkpoint is.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten

from .draft_config import DraftConfig, read_drafter_config
from .drafter import DraftModel
from .errors import InputError
from .files import write_json_atomic
from .quantize import check_entries, quantize_modules, quantized_modules, stored_predicate
from .safetensors_header import check_shards, dtype_words, unloadable_dtype
from .weight_check import nonfinite_weights

PREFIX = "dflash."


def build_drafter(config: DraftConfig, weights: dict[str, mx.array] | None = None,
                  where: str = "drafter") -> DraftModel:
    """The module tree a checkpoint fills: float, or quantized where its weights say so
    (engine/quantize.py). Nothing is evaluated: building it costs no compute."""
    model = DraftModel(config)
    q = config.quantization
    if q is not None:
        quantize_modules(model, stored_predicate(q, weights or {}, where), q["group_size"], q["bits"])
        check_entries(q, model, where)
    return model


def expected_shapes(config: DraftConfig, weights: dict[str, mx.array] | None = None
                    ) -> dict[str, tuple[int, ...]]:
    """Every tensor a checkpoint must hold, with the shape its config implies (for a
    quantized config, the modules `weights` hold quantized are a packed triple each)."""
    model = build_drafter(config, weights)
    return {name: tuple(value.shape) for name, value in tree_flatten(model.parameters())}


def read_weights(directory: Path) -> tuple[dict[str, mx.array], dict[str, Path]]:
    """Every tensor of every *.safetensors file, and the file each came from."""
    check_shards(directory)
    files = sorted(f for f in directory.glob("*.safetensors") if not f.name.startswith("."))
    if not files:
        raise InputError(f"{directory}: no *.safetensors weights found beside config.json")
    weights: dict[str, mx.array] = {}
    sources: dict[str, Path] = {}
    for file in files:
        try:
            loaded = mx.load(str(file))
        except Exception as error:  # mlx raises RuntimeError/ValueError with its own text
            raise InputError(unloadable_dtype(file)
                             or f"{file}: unreadable safetensors ({error})") from None
        for name, tensor in loaded.items():
            if name in sources:
                raise InputError(f"{file}: tensor {name!r} is also in {sources[name].name}")
            weights[name], sources[name] = tensor, file
    # One-file installs keep the drafter's tensors behind a `dflash.` prefix.
    if any(name.startswith(PREFIX) for name in weights):
        keep = [n for n in weights if n.startswith(PREFIX)]
        weights = {n[len(PREFIX):]: weights[n] for n in keep}
        sources = {n[len(PREFIX):]: sources[n] for n in keep}
    return weights, sources


def check_tensors(weights: dict[str, mx.array], sources: dict[str, Path], model: DraftModel,
                  where: Path) -> None:
    """Refuse a missing, mis-shaped, mis-typed or unexpected tensor, naming it."""
    if model.config.quantization is None:
        scales = next((name for name in weights if name.endswith(".scales")), None)
        if scales is not None:
            raise InputError(
                f"{sources[scales]}: tensor {scales!r} belongs to a quantized module, but "
                f"{where / 'config.json'} has no \"quantization\" (mlx-lm's group_size and bits)"
            )
    expected = dict(tree_flatten(model.parameters()))
    packed = quantized_modules(model)
    for name, want in expected.items():
        owner = name.rpartition(".")[0]
        how = _how_quantized(owner, packed.get(owner))
        if name not in weights:
            # a whole checkpoint under another prefix (`model.fc.weight`: a training wrapper's
            # state dict) reads as its first tensor missing; say what the file holds instead
            held = next((n for n in weights if n.endswith("." + name) and n not in expected), None)
            hint = (f"; {sources[held].name} holds {held!r}: Z Lab's format names tensors "
                    "without a prefix" if held else "")
            raise InputError(
                f"{where}: tensor {name!r} is missing (expected shape {list(want.shape)}{how})"
                f"{hint}"
            )
        got = weights[name]
        if tuple(got.shape) != tuple(want.shape):
            raise InputError(
                f"{where}: tensor {name!r} has shape {list(got.shape)}; expected "
                f"{list(want.shape)} (from config.json{how})"
            )
        if (want.dtype == mx.uint32) != (got.dtype == mx.uint32) or \
                (want.dtype != mx.uint32 and not mx.issubdtype(got.dtype, mx.floating)):
            kind = "uint32 (packed quantized values)" if want.dtype == mx.uint32 else "a float type"
            # an FP8 tensor loads as uint8: say what the file stores (safetensors_header)
            held = dtype_words(sources.get(name), (name, PREFIX + name),
                               str(got.dtype).removeprefix("mlx.core."))
            raise InputError(f"{sources.get(name, where)}: tensor {name!r} {held}; "
                             f"expected {kind}{how}")
    unexpected = [name for name in weights if name not in expected]
    if unexpected:
        more = f" (and {len(unexpected) - 1} more)" if len(unexpected) > 1 else ""
        raise InputError(
            f"{sources[unexpected[0]]}: unexpected tensor {unexpected[0]!r}{more}: not part of "
            f"a {model.config.kind_label} drafter with this config.json"
        )


def _how_quantized(path: str, module) -> str:
    if module is None:
        return ""
    return f"; {path} is quantized to {module.bits} bits in groups of {module.group_size}"


def load_drafter(directory: str | Path, dtype: mx.Dtype | None = mx.float32) -> DraftModel:
    """A drafter directory as a DraftModel: float tensors cast to `dtype` (None: as stored);
    quantized modules keep their packed weights."""
    directory = Path(directory).expanduser()
    config = read_drafter_config(directory)
    weights, sources = read_weights(directory)
    model = build_drafter(config, weights, str(directory))
    check_tensors(weights, sources, model, directory)
    stored = weights
    if dtype is not None:
        weights = {n: w if w.dtype == mx.uint32 else w.astype(dtype) for n, w in weights.items()}
    # (the dtype is named only where the cast made a tensor non-finite: never when uncast)
    model.weight_notes = nonfinite_weights(stored, weights, sources,
                                           str(dtype).removeprefix("mlx.core."))
    model.load_weights(list(weights.items()), strict=True)
    model.eval()
    mx.eval(model.parameters())
    return model


def save_drafter(model: DraftModel, directory: str | Path, dtype: mx.Dtype | None = None,
                 metadata: dict | None = None) -> Path:
    """Write config.json + model.safetensors atomically (temp files, then rename)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    weights = dict(tree_flatten(model.parameters()))
    if dtype is not None:  # packed quantized weights stay uint32
        weights = {n: w if w.dtype == mx.uint32 else w.astype(dtype) for n, w in weights.items()}
    config = model.config.to_json()
    if metadata:
        config.update(metadata)
    # A dot-name the loader skips; it must end in .safetensors or MLX appends that suffix.
    tmp_weights = directory / f".model-{os.getpid()}-{uuid.uuid4().hex[:8]}.safetensors"
    mx.save_safetensors(str(tmp_weights), weights, metadata={"format": "mlx"})
    write_json_atomic(directory / "config.json", config)
    os.replace(tmp_weights, directory / "model.safetensors")
    return directory
