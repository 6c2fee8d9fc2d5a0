"""Quantized drafters in mlx-lm's convention, made and read with MLX's own quantization.

On disk (what mlx-lm's `convert` writes for any model): config.json carries
`"quantization": {"group_size": G, "bits": B, "mode": "affine"}`, optionally with
per-module entries (`"fc": false`, `"layers.0.mlp.down_proj": {"group_size": 32, "bits": 8}`),
and each quantized module `p` stores `p.weight` (uint32, B-bit values packed 32 / B to a
word), `p.scales` and `p.biases` ([rows, in / G], float). As in `mlx_lm.utils.load_model`,
a module is quantized when its config entry says so or, with no entry, when `p.scales` is
among the weights; its bits and group size are then read back from the tensors' shapes
(mlx-lm's `infer_quant_config`). Everything else stays float.

The selector's codebooks are plain [V, r] arrays in Z Lab's checkpoints
(`candidate_selector.predecessor_codebook`, no `.weight`), and a float drafter keeps them
so. What they are is an embedding table (Z Lab's MLX model makes them `nn.Embedding`s), so
for quantization `quantize_modules` shows them to `nn.quantize` as `nn.Embedding`s and
takes back the ones it left in float: a quantized codebook is an `nn.QuantizedEmbedding`
stored as `...codebook.weight/.scales/.biases`, exactly what `nn.quantize` makes of Z Lab's
model, and a float one keeps its bare name.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Union

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_unflatten

from .draft_config import QUANT_BITS, QUANT_GLOBAL_KEYS, QUANT_GROUP_SIZES
from .errors import InputError

SELECTOR = "candidate_selector"
CODEBOOKS = ("predecessor_codebook", "successor_codebook")
QUANTIZED = (nn.QuantizedLinear, nn.QuantizedEmbedding)
# --keep accepts these short names besides module paths.
KEEP_ALIASES = {"selector": SELECTOR}

Predicate = Callable[[str, nn.Module], Union[bool, dict]]


def quantize_drafter(model: nn.Module, bits: int, group_size: int = 64,
                     keep: tuple[str, ...] = (), where: str = "drafter") -> None:
    """Quantize a float drafter in place (what `dflash-tui quantize` writes): every module
    `choose_predicate` picks, to `bits` in groups of `group_size`; config.quantization
    records the settings for the loader."""
    if bits not in QUANT_BITS:
        raise InputError(f"bits {bits!r}: expected one of {', '.join(map(str, QUANT_BITS))}")
    if group_size not in QUANT_GROUP_SIZES:
        raise InputError(
            f"group_size {group_size!r}: expected one of {', '.join(map(str, QUANT_GROUP_SIZES))}"
        )
    if quantized_modules(model):  # (a dequantize_drafter'ed one is float again: it may be)
        raise InputError(f"{where}: this drafter is already quantized ({describe(model)}); "
                         "start from a float one")
    _check_something_quantized(model, group_size, keep, where)
    quantize_modules(model, choose_predicate(model, group_size, keep), group_size, bits)
    model.config = replace(
        model.config, quantization={"group_size": group_size, "bits": bits, "mode": "affine"}
    )


def quantize_modules(model: nn.Module, predicate: Predicate, group_size: int, bits: int) -> None:
    """`nn.quantize(model, ...)` over every Linear and both codebooks, in place."""
    selector = model.get(SELECTOR)
    if selector is not None:
        for name in CODEBOOKS:
            setattr(selector, name, _as_embedding(selector[name]))
    nn.quantize(model, group_size, bits, mode="affine", class_predicate=predicate)
    if selector is not None:
        for name in CODEBOOKS:
            if not isinstance(selector[name], nn.QuantizedEmbedding):
                setattr(selector, name, selector[name].weight)


def _as_embedding(codebook: mx.array) -> nn.Embedding:
    """A float codebook as `nn.quantize` is shown it (see the module doc)."""
    table = nn.Embedding(*codebook.shape)
    table.weight = codebook
    return table


def stored_predicate(quantization: dict[str, Any], weights: dict[str, mx.array],
                     where: str) -> Predicate:
    """mlx-lm's load rule: the config's entry for a module, else quantized iff its
    `.scales` were saved, with the bits and group size its tensors were packed with."""

    def predicate(path: str, module: nn.Module):
        quantizable = hasattr(module, "to_quantized")
        if path in quantization:
            entry = quantization[path]
            if entry and not quantizable:
                raise InputError(
                    f"{where}/config.json: quantization[{path!r}] names a "
                    f"{type(module).__name__}, which cannot be quantized"
                )
            return entry
        if not quantizable or f"{path}.scales" not in weights:
            return False
        return stored_params(path, module, weights, where)

    return predicate


def check_entries(quantization: dict[str, Any], model: nn.Module, where: str) -> None:
    """Refuse a per-module entry that names no module of this drafter (mlx-lm ignores it;
    here a typo would silently leave a module in float)."""
    known = set(dict(tree_flatten(model.leaf_modules(), is_leaf=nn.Module.is_module)))
    known |= set(quantizable_paths(model))
    for key in quantization:
        if key not in QUANT_GLOBAL_KEYS and key not in known:
            raise InputError(
                f"{where}/config.json: quantization[{key!r}] names no module of this drafter"
            )


def stored_params(path: str, module: nn.Module, weights: dict[str, mx.array], where: str) -> dict:
    """The group size and bits a saved module was packed with (mlx-lm's own inference),
    refused in one line when its tensors cannot be an affine quantization of this module."""
    from mlx_lm.utils import infer_quant_config

    packed, scales = weights.get(f"{path}.weight"), weights[f"{path}.scales"]
    in_dims = module.weight.shape[-1]
    if packed is None:
        raise InputError(
            f"{where}: tensor '{path}.weight' is missing ('{path}.scales' says {path} is "
            "quantized: it needs .weight, .scales and .biases)"
        )
    if packed.dtype != mx.uint32:
        raise InputError(
            f"{where}: tensor '{path}.weight' is {_dtype(packed)}; expected uint32 (packed "
            f"quantized values, since '{path}.scales' exists)"
        )
    if packed.ndim != 2 or scales.ndim != 2 or scales.shape[-1] == 0 or \
            not mx.issubdtype(scales.dtype, mx.floating):
        raise InputError(
            f"{where}: tensors '{path}.weight' {_shape(packed)} ({_dtype(packed)}) and "
            f"'{path}.scales' {_shape(scales)} ({_dtype(scales)}) are not an affine "
            f"quantization of {path} (expected 2-D uint32 weight and 2-D float scales)"
        )
    params = infer_quant_config(path, module, weights)
    if params["group_size"] not in QUANT_GROUP_SIZES or params["bits"] not in QUANT_BITS:
        raise InputError(
            f"{where}: tensors '{path}.weight' {_shape(packed)} and '{path}.scales' "
            f"{_shape(scales)} imply {params['bits']} bits in groups of {params['group_size']} "
            f"for {path}'s {in_dims} input columns; expected bits "
            f"{', '.join(map(str, QUANT_BITS))} and groups of "
            f"{', '.join(map(str, QUANT_GROUP_SIZES))}"
        )
    return params


def choose_predicate(model: nn.Module, group_size: int, keep: tuple[str, ...]) -> Predicate:
    """What `dflash-tui quantize` quantizes: every Linear and codebook whose input width
    splits into groups (as mlx-lm's quantize_model), except the modules `keep` names."""
    kept = kept_paths(model, keep)

    def predicate(path: str, module: nn.Module) -> bool:
        return (hasattr(module, "to_quantized") and path not in kept
                and module.weight.shape[-1] % group_size == 0)

    return predicate


def _check_something_quantized(model: nn.Module, group_size: int, keep: tuple[str, ...],
                               where: str) -> None:
    """Refuse settings under which no module would be quantized (a copy that is the float
    drafter again, labelled quantized), naming why: --keep left nothing, or no module's
    input width splits into groups of `group_size`. Asks `choose_predicate` itself, so the
    check cannot drift from what quantize_modules then does."""
    modules = _quantize_candidates(model)

    def chosen(size: int) -> bool:
        predicate = choose_predicate(model, size, keep)
        return any(predicate(path, module) for path, module in modules.items())

    if chosen(group_size):
        return
    kept = kept_paths(model, keep)
    widths = {module.weight.shape[-1] for path, module in modules.items() if path not in kept}
    if not widths:
        raise InputError(f"{where}: nothing would be quantized: --keep {','.join(keep)} leaves "
                         "every quantizable module in float")
    fits = [g for g in QUANT_GROUP_SIZES if chosen(g)]
    shown = ", ".join(map(str, sorted(widths)))
    raise InputError(
        f"{where}: nothing would be quantized in groups of {group_size}: no module's input width "
        f"({shown}) is a multiple of {group_size}"
        + (f" (groups of {' or '.join(map(str, fits))} fit)" if fits else ""))


def _quantize_candidates(model: nn.Module) -> dict[str, nn.Module]:
    """A float drafter's quantizable modules as `nn.quantize` is shown them (by
    quantize_modules): the Linears, and each codebook as an nn.Embedding."""
    leaves = dict(tree_flatten(model.leaf_modules(), is_leaf=nn.Module.is_module))
    return {path: leaves[path] if path in leaves
            else _as_embedding(model[SELECTOR][path.rsplit(".", 1)[-1]])
            for path in quantizable_paths(model)}


def quantizable_paths(model: nn.Module) -> list[str]:
    """Module paths MLX can quantize (or has): the Linears, and the codebooks (see the
    module doc)."""
    leaves = tree_flatten(model.leaf_modules(), is_leaf=nn.Module.is_module)
    paths = [path for path, module in leaves
             if hasattr(module, "to_quantized") or isinstance(module, QUANTIZED)]
    if model.get(SELECTOR) is not None:  # plain arrays while float
        paths += [p for p in (f"{SELECTOR}.{name}" for name in CODEBOOKS) if p not in paths]
    return paths


def kept_paths(model: nn.Module, keep: tuple[str, ...]) -> set[str]:
    """The quantizable module paths that --keep names. A name matches a path when its dotted
    parts appear in the path in a row (`fc`, `layers.0`, `down_proj`, `candidate_selector`,
    `selector`, `predecessor_codebook`); a name that matches nothing is refused."""
    paths = quantizable_paths(model)
    kept: set[str] = set()
    for name in keep:
        parts = KEEP_ALIASES.get(name, name).split(".")
        hits = {p for p in paths if _contains(p.split("."), parts)}
        if not hits:
            raise InputError(
                f"--keep {name}: matches no quantizable module of this drafter (e.g. fc, "
                f"layers.0, self_attn, mlp, down_proj{', selector' if SELECTOR in model else ''})"
            )
        kept |= hits
    return kept


def _contains(path: list[str], parts: list[str]) -> bool:
    n = len(parts)
    return any(path[i:i + n] == parts for i in range(len(path) - n + 1))


def float_paths(model: nn.Module) -> list[str]:
    """Quantizable modules left in float (after quantize_modules)."""
    leaves = dict(tree_flatten(model.leaf_modules(), is_leaf=nn.Module.is_module))
    return [p for p in quantizable_paths(model) if not isinstance(leaves.get(p), QUANTIZED)]


def quantized_modules(model: nn.Module) -> dict[str, nn.Module]:
    leaves = tree_flatten(model.leaf_modules(), is_leaf=nn.Module.is_module)
    return {path: module for path, module in leaves if isinstance(module, QUANTIZED)}


def computes_in_float(model: nn.Module) -> bool:
    """True for a quantized drafter that dequantize_drafter turned into float: `describe`
    still names its packing, but no quantized kernel runs (what it costs differs)."""
    return getattr(model, "quantization_label", None) is not None and not quantized_modules(model)


def packing(model: nn.Module) -> str | None:
    """How a model's quantized modules are packed, most common first ("q4/g32+q8/g32"), or
    None when none is: a drafter's or a target kept quantized."""
    counts: dict[str, int] = {}
    for module in quantized_modules(model).values():
        key = f"q{module.bits}/g{module.group_size}"
        counts[key] = counts.get(key, 0) + 1
    return "+".join(sorted(counts, key=lambda k: -counts[k])) or None


def describe(model: nn.Module) -> str | None:
    """A short label for a quantized drafter, e.g. "q4/g64" or "q4/g64+q8/g32, float: fc,
    codebooks"; None for a float one."""
    label = packing(model)
    if label is None:
        return getattr(model, "quantization_label", None)  # dequantize_drafter's
    kept = _summarise(float_paths(model), quantizable_paths(model))
    return f"{label}, float: {', '.join(kept)}" if kept else label


def _summarise(floats: list[str], every: list[str], limit: int = 3) -> list[str]:
    """Float paths, folded into the unit they fill (a layer, the selector, the codebooks)."""
    names, left = [], list(floats)
    layers = dict.fromkeys(".".join(p.split(".")[:2]) for p in every if p.startswith("layers."))
    units = [SELECTOR, *layers]
    for unit in units:
        members = [p for p in every if p.startswith(unit + ".")]
        if members and all(p in left for p in members):
            names.append("selector" if unit == SELECTOR else unit)
            left = [p for p in left if p not in members]
    books = [f"{SELECTOR}.{name}" for name in CODEBOOKS]
    if all(p in left for p in books):
        names.append("codebooks")
        left = [p for p in left if p not in books]
    names += left
    return names if len(names) <= limit else names[:limit] + [f"{len(names) - limit} more"]


def _shape(x: mx.array) -> list[int]:
    return list(x.shape)


def _dtype(x: mx.array) -> str:
    return str(x.dtype).removeprefix("mlx.core.")


def dequantize_drafter(model: nn.Module) -> None:
    """Turn every quantized module of `model` back into float, in place, keeping its label.

    The float weights are exactly the quantized values (`mx.dequantize`: scale * q + bias,
    what the quantized kernel computes inside), so the drafter's function is the same up
    to the order of its sums. It exists for the CPU, where MLX's quantized matmul is a
    plain loop: docs/CPU.md measures what it buys. `describe` keeps naming the packing
    the weights were read with (`quantization_label`), since that is what they are.
    """
    packed = quantized_modules(model)
    if not packed:
        return
    label = describe(model)
    replaced = []
    for path, module in packed.items():
        weight = mx.dequantize(module.weight, module.scales, module.get("biases"),
                               module.group_size, module.bits, mode=module.mode)
        owner, _, name = path.rpartition(".")
        if owner == SELECTOR and name in CODEBOOKS:  # a float codebook is a bare array
            setattr(model[SELECTOR], name, weight)
            continue
        linear = nn.Linear(weight.shape[1], weight.shape[0], bias=False)  # no drafter Linear has one
        linear.weight = weight
        replaced.append((path, linear))
    model.update_modules(tree_unflatten(replaced))
    model.config = replace(model.config, quantization=None)  # a float drafter now, saved as one
    model.quantization_label = label


def dequantize_for_cpu(drafter: nn.Module) -> bool:
    """The target's rule (engine/target.py) for a drafter: on the CPU, a quantized drafter
    whose float weights fit CPU_DEQUANTIZE_LIMIT_BYTES computes in float. True when it was
    dequantized."""
    from .target import CPU_DEQUANTIZE_LIMIT_BYTES, backend, dequantized_bytes

    if backend() != "cpu":
        return False
    size = dequantized_bytes(drafter, drafter.dtype)
    if size == 0 or size > CPU_DEQUANTIZE_LIMIT_BYTES:
        return False
    dequantize_drafter(drafter)
    mx.eval(drafter.parameters())
    return True
