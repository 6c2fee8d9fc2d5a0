"""The target model: loading, capturing its layer outputs, and undoing rejected rows.

A target is an mlx-lm model directory or a llama-family GGUF file. The drafter reads the
target's residual stream at the OUTPUT of selected decoder layers; we capture it by
replacing those entries of this model instance's layer list with thin wrappers that record
what the layer returned (no class is patched, so other model instances are untouched).

On rejection, attention caches are trimmed. Caches that cannot be trimmed (gated DeltaNet
and other recurrent state) are snapshotted before verify, restored, and the accepted prefix
is replayed through the model.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub: paths only

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_map, tree_map_with_path
from mlx_lm.models.cache import KVCache, can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

from .block_attention import KernelKVCache, route_target_attention
from .config_fields import check_target_field_types, rope_type
from .errors import InputError, ParameterError, strict_load_names
from .fused_projections import Fusion
from .padded_attention import PaddedKVCache
from .paths import check_target_path
from .quantize import quantized_modules
from .safetensors_header import check_shards, dtype_words, read_header, unloadable_dtype
from .utf8 import check_utf8
from .weight_check import WeightNotes, nonfinite_target_weights

DTYPES = {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}
VISION_MARKERS = ("vision_tower", "visual.", "vision_model", "multi_modal_projector")
# On the CPU, MLX's quantized matmul is a plain loop while float matmul goes to BLAS, so a
# quantized target this small or smaller is dequantized there (a large speed-up).
CPU_DEQUANTIZE_LIMIT_BYTES = 4 << 30
PREFILL_CHUNK = 512


def safetensors_keys(path: Path) -> list[str]:
    """Tensor names from a safetensors header, without reading any tensor."""
    return list(read_header(path))


class _CaptureLayer:
    """Stands in for one decoder layer of one model instance and records its output."""

    def __init__(self, layer, layer_id: int, store: dict):
        self._layer, self._layer_id, self._store = layer, layer_id, store

    def __call__(self, *args, **kwargs):
        out = self._layer(*args, **kwargs)
        self._store[self._layer_id] = out[0] if isinstance(out, tuple) else out
        return out

    def __getattr__(self, name):
        return getattr(self._layer, name)


def _find(model, attr: str):
    for owner in (model, getattr(model, "model", None), getattr(model, "language_model", None)):
        if owner is None:
            continue
        if hasattr(owner, attr):
            return owner
        inner = getattr(owner, "model", None)
        if inner is not None and hasattr(inner, attr):
            return inner
    return None


@dataclass
class TargetSpec:
    path: Path
    kind: str
    config: dict


class Target:
    """A loaded target model with its tokenizer, cache and layer-output capture."""

    # the tensors that hold NaN or Inf as loaded (load_target; engine/weight_check.py)
    weight_notes = WeightNotes()

    def __init__(self, model: nn.Module, tokenizer, spec: TargetSpec):
        self.model = model
        self.tokenizer = tokenizer
        self.spec = spec
        owner = _find(model, "embed_tokens")
        if owner is None:
            raise InputError(
                f"{spec.path}: the capture cannot hook this {spec.kind} model: it has no token "
                "embedding named embed_tokens (which the drafter borrows) beside its layer list"
            )
        self.embed_tokens = owner.embed_tokens
        self.embed_scale = float(
            getattr(self.embed_tokens, "embed_scale", getattr(owner, "embed_scale", 1.0))
        )
        text_model = getattr(model, "language_model", model)
        head = getattr(model, "lm_head", None) or getattr(text_model, "lm_head", None)
        self.lm_head = head if head is not None else self.embed_tokens.as_linear
        # The decoder stack that owns the embedding stores the real layer list (a `layers`
        # property on an outer wrapper may return a fresh slice, which wrapping would miss).
        layers = owner.get("layers") if isinstance(owner, nn.Module) else None
        if not isinstance(layers, list) or not layers:
            raise InputError(
                f"{spec.path}: the capture cannot hook this {spec.kind} model: it exposes no "
                "decoder layer list (looked for model.layers, language_model.model.layers, layers)"
            )
        self.layers: list = layers
        self.num_layers = len(layers)
        weight = self.embed_tokens.weight
        self.vocab_size = int(weight.shape[0])
        self.hidden_size = int(self.embed_tokens(mx.array([0])).shape[-1])
        self.cache = self.make_cache()
        self._store: dict[int, mx.array] = {}
        self.capture_ids: tuple[int, ...] = ()
        # The compare lab's reference drafter may read other layers (another layer offset):
        # their capture from the latest forward (or the whole prefill), beside the primary's.
        self.reference_ids: tuple[int, ...] = ()
        self.reference_capture: Optional[mx.array] = None
        self.fusion: Optional[Fusion] = None  # fuse_projections

    def fuse_projections(self) -> int:
        """Fuse each layer's q/k/v and gate/up projections for the forwards of more than one
        row (engine/fused_projections.py); returns how many groups were fused."""
        if self.fusion is None:
            self.fusion = Fusion(self.layers)
        return self.fusion.groups

    def refresh_fusion(self) -> None:
        """Fuse again from the layers' weights as they are now: the fused groups hold their
        own concatenated copy, which a cast of the weights (distill's retype) does not reach."""
        if self.fusion is not None:
            self.fusion = Fusion(self.layers)

    # ---- capture -------------------------------------------------------------------------

    def hook(self, layer_ids: tuple[int, ...], reference_ids: tuple[int, ...] = ()) -> None:
        """Capture the outputs of `layer_ids` (in that order) on every forward, and those of
        `reference_ids` as `reference_capture` (each layer of the union is hooked once)."""
        self.unhook()
        for i in sorted(set(layer_ids) | set(reference_ids)):
            self.layers[i] = _CaptureLayer(self.layers[i], i, self._store)
        self.capture_ids = tuple(layer_ids)
        self.reference_ids = tuple(reference_ids)

    def unhook(self) -> None:
        for i, layer in enumerate(self.layers):
            if isinstance(layer, _CaptureLayer):
                self.layers[i] = layer._layer
        self.capture_ids, self.reference_ids, self.reference_capture = (), (), None

    def forward(self, ids: mx.array) -> tuple[mx.array, Optional[mx.array]]:
        """ids [1, L] -> (logits [1, L, V], captured context rows [1, L, n*H] or None)."""
        self._store.clear()
        if self.fusion is not None and ids.shape[1] > 1:
            with self.fusion.applied():
                logits = self.model(ids, cache=self.cache)
        else:
            logits = self.model(ids, cache=self.cache)
        capture = self._captured(self.capture_ids)
        if self.reference_ids:
            same = self.reference_ids == self.capture_ids
            self.reference_capture = capture if same else self._captured(self.reference_ids)
        return logits, capture

    def _captured(self, layer_ids: tuple[int, ...]) -> Optional[mx.array]:
        if not layer_ids:
            return None
        return mx.concatenate([self._store[i] for i in layer_ids], axis=-1)

    def prefill(self, ids: list[int]) -> tuple[mx.array, mx.array]:
        """Run the prompt in chunks; returns (last logits [V], capture [1, n, n_ids*H])."""
        captures, references = [], []
        for start in range(0, len(ids), PREFILL_CHUNK):
            logits, capture = self.forward(mx.array([ids[start:start + PREFILL_CHUNK]]))
            captures.append(capture)
            references.append(self.reference_capture)
            mx.eval(logits, capture, [c.state for c in self.cache])
        if self.reference_ids:
            self.reference_capture = mx.concatenate(references, axis=1)
        return logits[0, -1], mx.concatenate(captures, axis=1)

    # ---- context ---------------------------------------------------------------------------

    @property
    def context_length(self) -> Optional[int]:
        """Positions the target declares it handles, or None where its config is silent."""
        return declared_context(self.spec.config)

    def check_prompt(self, ids: list[int], source: Optional[str] = None) -> None:
        """Refuse a prompt longer than the target's context (positions past it are ones the
        target never saw in training: the decode would run and mean nothing), or holding a
        token id past the embedding's rows (a tokenizer that does not belong to the weights:
        the embedding would read outside itself, and the decode run on garbage). `source`
        says where the prompt came from (`--prompt-file F`, a bench prompt file) and leads
        the line, since the prompt itself is too long to quote."""
        limit = self.context_length
        lead = f"{source}: " if source else ""
        if limit is not None and len(ids) > limit:
            raise InputError(f"{lead}the prompt is {len(ids)} tokens; the target "
                             f"{self.spec.path} has a context of {limit} tokens")
        beyond = next((i for i in ids if not 0 <= i < self.vocab_size), None)
        if beyond is not None:
            text = self.tokenizer.convert_ids_to_tokens(beyond) if beyond >= 0 else None
            raise InputError(
                f"{lead}the tokenizer of {self.spec.path} gives the prompt token id {beyond} "
                f"({text!r}); the target's embedding has {self.vocab_size} rows (expected ids "
                f"0..{self.vocab_size - 1}): the tokenizer files do not belong to these weights"
            )

    def check_block(self, gamma: int, drafter_positions: Optional[int] = None) -> None:
        """Refuse a block the target could never verify in one forward (it would also be a
        list of that many mask tokens per round: a corrupted block_size must not allocate
        billions). A target whose config declares no context is bounded by the drafter's
        `drafter_positions` (its max_position_embeddings): unbounded, a --block of 100000
        ended the process in a segmentation fault."""
        limit = self.context_length
        bound = f"the target's context of {limit} tokens"
        if limit is None and drafter_positions is not None:
            limit = drafter_positions
            bound = (f"the drafter's max_position_embeddings of {limit} (the target's config "
                     "declares no context)")
        if limit is not None and gamma + 1 > limit:
            raise InputError(f"a block of {gamma} proposals ({gamma + 1} positions) exceeds "
                             f"{bound} (propose fewer per round)")

    # ---- cache ---------------------------------------------------------------------------

    def make_cache(self, attention: str = "mlx") -> list:
        """A fresh cache whose multi-row forwards attend as `attention` says: "mlx" (MLX's
        attention over the rows held), "padded" (over whole KV buffers, masked:
        engine/padded_attention.py) or "kernel" (a block's rows through
        engine/block_attention.py)."""
        cache = make_prompt_cache(self.model)
        kind = {"padded": PaddedKVCache, "kernel": KernelKVCache}.get(attention)
        if kind is None:
            return cache
        if kind is KernelKVCache:
            route_target_attention(self.model)
        # plain attention caches only: rotating, recurrent and quantized ones attend as before
        return [kind() if type(c) is KVCache and c.keys is None else c for c in cache]

    def reset(self, attention: str = "mlx") -> None:
        self.cache = self.make_cache(attention)

    @property
    def offset(self) -> int:
        for c in self.cache:
            if hasattr(c, "offset"):
                return int(c.offset)
        return 0

    @property
    def trimmable(self) -> bool:
        return can_trim_prompt_cache(self.cache)

    def checkpoint(self) -> Optional[list]:
        """Before verify: copies of every non-trimmable cache's state (None if all trim)."""
        if self.trimmable:
            return None
        return [None if c.is_trimmable() else _copy_fields(c) for c in self.cache]

    def trim(self, rows: int) -> None:
        """Drop the last `rows` positions of every (trimmable) cache."""
        trim_prompt_cache(self.cache, rows)

    def rewind(self, saved: Optional[list], rows: int) -> None:
        """Undo the last forward of `rows` positions: trim the caches that trim, restore the
        others from `saved` (the `checkpoint()` taken before it; None: every cache trims)."""
        if saved is None:
            self.trim(rows)
            return
        for c, s in zip(self.cache, saved):
            if s is None:
                c.trim(rows)
            else:
                c.__dict__.update(_copy_fields(s))

    def restore_and_replay(self, saved: list, verify_rows: int, keep: list[int]) -> None:
        """Undo a whole verify pass, then run the accepted tokens through again. The replay is
        queued, not waited for: the next verify pass computes it first."""
        self.rewind(saved, verify_rows)
        self.forward(mx.array([keep]))


def _copy_fields(obj) -> dict:
    """A cache's attributes with fresh containers and array handles. MLX's `a[i] = b`
    rebinds the array object it is called on, so a snapshot must not share those objects."""
    fields = obj if isinstance(obj, dict) else vars(obj)
    return tree_map(lambda x: mx.array(x) if isinstance(x, mx.array) else x, dict(fields))


def declared_context(config: dict) -> Optional[int]:
    """max_position_embeddings (nested under text_config for multimodal-style configs),
    stretched by a rope_scaling that extends the context (yarn, linear, dynamic: factor times
    the original length; llama3-style scaling already states the extended length)."""
    config = {**config.get("text_config", {}), **config} if isinstance(config.get("text_config"), dict) else config
    limit = config.get("max_position_embeddings")
    if not isinstance(limit, int) or limit <= 0:
        return None
    scaling = config.get("rope_scaling") or {}
    kind = rope_type(scaling) if isinstance(scaling, dict) else None
    factor = scaling.get("factor") if isinstance(scaling, dict) else None
    if kind in ("yarn", "linear", "dynamic") and isinstance(factor, (int, float)) and factor > 1:
        original = scaling.get("original_max_position_embeddings")
        limit = max(limit, int((original if isinstance(original, int) else limit) * factor))
    return limit


def backend() -> str:
    return "gpu" if mx.default_device() == mx.gpu else "cpu"


def _cast(model: nn.Module, dtype: mx.Dtype) -> None:
    """Cast floating parameters to dtype, honouring the model's own cast exclusions."""
    keep = getattr(model, "cast_predicate", None) or (lambda path: True)

    def cast(path, x):
        if mx.issubdtype(x.dtype, mx.floating) and keep(path):
            return x.astype(dtype)
        return x

    model.update(tree_map_with_path(cast, model.parameters()))


def dequantized_bytes(model: nn.Module, dtype: mx.Dtype) -> int:
    """What a model's quantized modules would take in `dtype` (0: none is quantized). A
    packed uint32 row holds in_features * bits / 32 words (3 and 6 bits do not divide 32)."""
    total = 0
    for _, module in model.named_modules():
        if isinstance(module, (nn.QuantizedLinear, nn.QuantizedEmbedding)):
            rows, packed = module.weight.shape
            total += rows * packed * 32 // module.bits * dtype.size
    return total


def _maybe_dequantize(model: nn.Module, dtype: mx.Dtype, keep_quantized: bool) -> bool:
    if keep_quantized or backend() != "cpu":
        return False
    size = dequantized_bytes(model, dtype)
    if size == 0 or size > CPU_DEQUANTIZE_LIMIT_BYTES:
        return False
    from mlx_lm.utils import dequantize_model

    dequantize_model(model)
    return True


# Splits a freshly built model across ranks before its weights are read (engine/distributed.py).
Shard = Callable[[nn.Module, dict, str], None]


def load_target(path: str | Path, dtype: str = "float32", keep_quantized: bool = False,
                shard: Optional[Shard] = None, fuse: Optional[bool] = None) -> Target:
    """Load a target cast to `dtype`. `fuse` (default: on a GPU) fuses each layer's q/k/v
    and gate/up projections into one matmul each for forwards of more than one row
    (engine/fused_projections.py): on CUDA a verify's few rows cost a matmul about the same
    at any width; on the CPU it gained nothing measurable."""
    path = Path(path).expanduser()
    if dtype not in DTYPES:
        raise ParameterError("dtype", dtype, f"expected one of {', '.join(DTYPES)}")
    mx_dtype = DTYPES[dtype]
    check_target_path(path)
    if path.is_file():
        from .gguf import load_gguf_model
        from mlx_lm.tokenizer_utils import TokenizerWrapper

        model, config, tokenizer = load_gguf_model(path, mx_dtype)
        tokenizer = TokenizerWrapper(tokenizer)
        spec = TargetSpec(path, "llama", config)
        keys = {}
    else:
        model, tokenizer, spec, keys = _load_mlx_lm_dir(path, lazy=shard is not None)
    # a quantized layer's float tensors as loaded: where the CPU dequantizes it, its weight is
    # checked for NaN / Inf in these (_weight_notes), an eighth of the values or less
    packed = _packed_floats(model)
    dequantized = _maybe_dequantize(model, mx_dtype, keep_quantized)
    if shard is not None:  # lazily loaded weights: each rank reads only its slices
        shard(model, spec.config, str(path))
    _cast(model, mx_dtype)
    mx.eval(model.parameters())
    spec.config["dequantized_for_cpu"] = dequantized
    target = Target(model, tokenizer, spec)
    target.weight_notes = _weight_notes(model, path, keys, dtype, packed if dequantized else {})
    del packed
    if fuse is None:
        fuse = backend() != "cpu"
    if fuse:
        spec.config["fused_projection_groups"] = target.fuse_projections()
    return target


def _load_mlx_lm_dir(path: Path, lazy: bool = False):
    config_path = path / "config.json"
    try:
        config = json.loads(config_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{config_path}: unreadable ({error})") from None
    if not isinstance(config, dict):
        raise InputError(f"{config_path}: expected a JSON object of model settings")
    if "model_type" not in config:
        raise InputError(f"{config_path}: missing required field 'model_type' (mlx-lm picks the "
                         "architecture by it, e.g. \"llama\")")
    if not isinstance(config["model_type"], str):
        raise InputError(f"{config_path}: model_type = {config['model_type']!r}; expected a "
                         "string such as \"llama\"")
    check_target_field_types(config, str(config_path))
    check_shards(path)
    weights = sorted(path.glob("model*.safetensors"))
    if not weights:
        raise InputError(f"{path}: no model*.safetensors weights found")
    keys = {file: safetensors_keys(file) for file in weights}
    for file in weights:
        for key in keys[file]:
            if any(marker in key for marker in VISION_MARKERS):
                raise InputError(
                    f"{file}: the target has a vision tower (tensor {key!r}); dflash-tui drives "
                    "text-only targets (convert with mlx_lm.convert to drop it)"
                )
    from mlx_lm.utils import load_model, load_tokenizer

    try:
        model, config = load_model(path, lazy=lazy)
    except TypeError as error:  # the architecture's ModelArgs was called without a field
        raise InputError(_args_error(config_path, config["model_type"], error)) from None
    except (ValueError, RuntimeError, KeyError, OSError) as error:
        raise InputError(_unreadable_weights(weights) or _build_error(path, error)) from None
    check_weight_dtypes(model, path, keys)
    try:
        tokenizer = load_tokenizer(path, eos_token_ids=config.get("eos_token_id"))
    except Exception as error:  # transformers raises OSError/ValueError/EnvironmentError
        raise InputError(
            _config_error(config_path, error)
            or f"{path}: cannot load the tokenizer ({error.__class__.__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''}); expected tokenizer.json "
            "and tokenizer_config.json beside config.json"
        ) from None
    kind = config.get("model_type", "unknown")
    return model, tokenizer, TargetSpec(path, kind, config), keys


def _packed_floats(model: nn.Module) -> dict[str, mx.array]:
    """The float tensors of each quantized layer (scales, biases), by parameter name."""
    return {f"{path}.{name}": value
            for path, module in quantized_modules(model).items()
            for name, value in tree_flatten(module.parameters())
            if mx.issubdtype(value.dtype, mx.floating)}


def _weight_notes(model: nn.Module, path: Path, keys: dict[Path, list[str]], dtype: str,
                  dequantized: dict[str, mx.array]) -> WeightNotes:
    """The notes naming a weight that holds NaN or Inf as the target computes with it (the
    drafter's get the same: engine/weight_check.py). `keys`: each safetensors file's tensor
    names, to name the file and read the tensor as stored; a GGUF (no keys) is named whole.

    `dequantized`: the scales and biases of the layers the CPU dequantized, as loaded. A
    dequantized weight (packed whole numbers times scales plus biases) is non-finite where
    those are (and, in float16 only, where a finite scale times up to 2^bits - 1 passes
    65504: a scale far beyond any real model's, which this leaves unnoted), so they are
    checked in its place, and the note names the tensor the file holds
    (`...down_proj.scales`; a GGUF's, whose blocks hold them, by the tensor of blocks:
    `'blk.3.ffn_down.weight' (the scales of its quantized blocks)`): on the sample (a 4-bit
    GGUF) that is 8.4M values rather than 135M, ~8 ms rather than ~60 ms of a ~1.2 s load
    (2 CPU cores)."""
    weights = dict(tree_flatten(model.parameters()))
    owners = {name.rpartition(".")[0] for name in dequantized}
    weights = {**{n: w for n, w in weights.items() if n.rpartition(".")[0] not in owners
                  or n.rpartition(".")[2] != "weight"}, **dequantized}
    files = {name: file for file, names in keys.items() for name in names}
    sources = {name: files.get(name, path) for name in weights}

    def stored(name: str) -> Optional[mx.array]:
        file = sources[name]
        if file.suffix != ".safetensors":
            return None
        return mx.load(str(file))[name]  # lazy: only this tensor is read

    label = repr
    if path.is_file():  # a GGUF: its own tensor names (blk.1.ffn_norm.weight)
        from .gguf import note_name as label
    return nonfinite_target_weights(weights, sources, dtype, stored, label)


def check_weight_dtypes(model: nn.Module, path: Path, keys: dict[Path, list[str]]) -> None:
    """Refuse integer or boolean weights in the plain float layers (the model loads them,
    and its first forward fails: "[rms_norm] Received unsupported type int32"). Any other
    layer may pack its weights as whole numbers (mlx's quantized layers, mlx-lm's BitNet
    BitLinear beside its weight_scale). `keys`: each file's tensor names, to name the file."""
    modules = dict(model.named_modules())
    for name, value in tree_flatten(model.parameters()):
        if mx.issubdtype(value.dtype, mx.floating):
            continue
        if not isinstance(modules.get(name.rpartition(".")[0]), FLOAT_LAYERS):
            continue
        file = next((f for f, names in keys.items() if name in names), path)
        # an FP8 tensor loads as uint8: say what the file stores (safetensors_header)
        held = dtype_words(file, (name,), str(value.dtype).removeprefix("mlx.core."))
        raise InputError(f"{file}: tensor {name!r} {held}; expected floating-point weights "
                         "(float32, float16 or bfloat16), or a quantized layer's packed weight "
                         "beside its scales")


FLOAT_LAYERS = (nn.Linear, nn.Embedding, nn.RMSNorm, nn.LayerNorm)  # weights only ever float


def _config_error(config_path: Path, error: BaseException) -> Optional[str]:
    """transformers reads config.json again while it loads the tokenizer, with checks of its
    own (rope parameters, field types), and its error then reads as a tokenizer problem.
    Where loading the config alone fails the same way, the line names config.json instead."""
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(config_path.parent)
    except Exception as config_error:  # an architecture transformers lacks fails otherwise
        if type(config_error) is type(error) and str(config_error) == str(error):
            detail = " ".join(str(error).split())
            detail = detail if len(detail) <= 300 else detail[:299] + "…"
            return (f"{config_path}: transformers refuses it ({error.__class__.__name__}: "
                    f"{detail}); fix the field it names")
    return None


_MISSING_ARGS = re.compile(r"missing \d+ required (?:positional|keyword-only) arguments?: (.*)")


def _args_error(config_path: Path, model_type: str, error: TypeError) -> str:
    """mlx-lm builds each architecture's settings as ModelArgs(**config): a field the
    config lacks is a TypeError naming the argument. Say which field, of which file."""
    found = _MISSING_ARGS.search(str(error))
    if found:
        names = re.findall(r"'(\w+)'", found.group(1))
        fields = ", ".join(repr(n) for n in names)
        return (f"{config_path}: missing required field{'s' if len(names) > 1 else ''} {fields} "
                f"(mlx-lm's {model_type} model needs it)")
    return f"{config_path}: mlx-lm cannot build a {model_type} model from it ({_first_line(error)})"


def _unreadable_weights(files: list[Path]) -> Optional[str]:
    """The weights file mlx cannot read (a download cut short: its header promises more
    bytes than the file holds), named as the drafter's loader names one; mlx-lm's own
    error names no file."""
    for file in files:
        try:
            mx.load(str(file))
        except Exception as error:  # mlx raises RuntimeError/ValueError with its own text
            return unloadable_dtype(file) or f"{file}: unreadable safetensors ({_first_line(error)})"
    return None


def _build_error(path: Path, error: BaseException) -> str:
    """mlx-lm's load error, in one line that names the first tensor where it lists some."""
    found = strict_load_names(error)
    if not found:
        return f"{path}: mlx-lm cannot build this model ({_first_line(error)})"
    which, count, first = found
    more = f" (and {count - 1} more)" if count > 1 else ""
    if which == "Missing":
        return (f"{path}: tensor {first!r} is missing from the weights{more}; "
                "expected every tensor of the model config.json describes")
    return (f"{path}: tensor {first!r} is not in the model config.json describes{more}; "
            "check num_hidden_layers and the other sizes")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else error.__class__.__name__


def encode_prompt(tokenizer, prompt: str, chat: Optional[bool]) -> list[int]:
    """Token ids for `prompt`: through the chat template when chat (default: if there is one)."""
    check_utf8(prompt)
    has_template = getattr(tokenizer, "chat_template", None) is not None
    if chat is None:
        chat = has_template
    if chat:
        if not has_template:
            raise ParameterError("chat", chat, "this target's tokenizer has no chat template")
        try:
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
            )
        # A template is the checkpoint's own program (jinja syntax, raise_exception, an
        # undefined name): whatever it raises is a fault of that file, not of dflash-tui.
        except Exception as error:
            raise InputError(
                f"{template_source(tokenizer)}: the chat template cannot render the prompt "
                f"({error.__class__.__name__}: {_first_line(error)}); fix the template, or "
                "pass --raw to tokenize the prompt as is"
            ) from None
        if not text.strip():
            raise InputError(
                f"{template_source(tokenizer)}: the chat template renders nothing for the "
                "prompt (expected the prompt in its user turn); fix the template, or pass "
                "--raw to tokenize the prompt as is"
            )
        return list(tokenizer.encode(text, add_special_tokens=False))
    return list(tokenizer.encode(prompt))


def template_source(tokenizer) -> str:
    """Where the tokenizer's chat template was read from, to name it in an error: a GGUF's
    tokenizer.chat_template, or the file of a model folder transformers reads it from
    (chat_template.jinja, then chat_template.json, then tokenizer_config.json)."""
    where = Path(getattr(tokenizer, "name_or_path", "") or "")
    if where.suffix.lower() == ".gguf":
        return f"{where} (tokenizer.chat_template)"
    if where.is_dir():
        for name in ("chat_template.jinja", "chat_template.json", "tokenizer_config.json"):
            if (where / name).is_file():
                return str(where / name)
    return "the target's tokenizer"
