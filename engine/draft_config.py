"""A drafter's config.json, parsed and checked (docs/DFLASH2.md, "Checkpoints").

Z Lab's format keeps some fields at the top level and some in `dflash_config`; either place
is accepted. Everything a user can get wrong becomes an InputError naming the file and key.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .config_fields import check_field_types, check_rope_scaling
from .errors import InputError
from .paths import check_drafter_dir

DFLASH = "DFlashDraftModel"
DFLASH2 = "DFlash2DraftModel"
LAYER_TYPES = ("full_attention", "sliding_attention")
# MLX's affine quantization as mlx-lm applies it to Linear and Embedding weights.
QUANT_BITS = (2, 3, 4, 6, 8)
QUANT_GROUP_SIZES = (32, 64, 128)
QUANT_GLOBAL_KEYS = ("group_size", "bits", "mode")  # the rest of "quantization" names modules
# Z Lab's drafters are trained with blocks of 16 or fewer; far larger ones are typos.
USUAL_BLOCK_LIMIT = 64


@dataclass
class DraftConfig:
    kind: str  # DFLASH or DFLASH2
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    num_target_layers: int
    block_size: int
    target_layer_ids: tuple[int, ...]
    mask_token_id: int
    rope_scaling: dict[str, Any] | None = None
    layer_types: tuple[str, ...] = ()
    sliding_window: int | None = None
    is_causal: bool | None = None
    input_embedding_scale: float = 1.0
    output_multiplier: float = 1.0
    final_logit_softcapping: float | None = None
    conv_kernel_size: int = 0
    conv_group_size: int = 0
    selector_rank: int = 0
    selector_top_k: int = 0
    # mlx-lm's "quantization" object (group_size, bits and per-module entries), or None for
    # a float drafter. Which modules are quantized is read from the weights (engine/quantize.py).
    quantization: dict[str, Any] | None = None
    # Anything else config.json carried (training recipe, notes); kept so a save round-trips.
    extra: dict[str, Any] = field(default_factory=dict)
    # Keys given both in dflash_config and at the top level with different values: the
    # nested one is used (as Z Lab's loader does), and `notes` says which was dropped.
    conflicts: tuple[str, ...] = ()

    @property
    def is_dflash2(self) -> bool:
        return self.kind == DFLASH2

    @property
    def kind_label(self) -> str:
        return "DFlash2" if self.is_dflash2 else "DFlash"

    @property
    def notes(self) -> tuple[str, ...]:
        """Values that run but are unusual enough to mention (the session shows them)."""
        notes = self.conflicts
        ids = list(self.target_layer_ids)
        if ids != sorted(set(ids)):
            # fc's column blocks follow the ids' order: a list reordered (or a layer repeated)
            # by hand reads the right layers into the wrong blocks
            notes += (
                f"dflash_config.target_layer_ids = {ids} are not in ascending order without "
                "repeats (Z Lab's drafters list them so); fc reads the captured layers in the "
                "order given",
            )
        if self.block_size > USUAL_BLOCK_LIMIT:
            notes += (
                f"drafter block_size {self.block_size} is unusually large (trained drafters "
                f"use {USUAL_BLOCK_LIMIT} or fewer); each round proposes {self.block_size - 1} "
                "tokens unless --block says otherwise",
            )
        return notes

    def to_json(self) -> dict[str, Any]:
        """The config.json Z Lab's loader reads (fields both at top level and in dflash_config)."""
        d = asdict(self)
        extra = d.pop("extra")
        d.pop("conflicts")  # the nested value is the one written, in both places
        dflash = {k: d.pop(k) for k in DFLASH_KEYS}
        dflash["target_layer_ids"] = list(dflash["target_layer_ids"])
        if not self.is_dflash2:
            for k in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"):
                dflash.pop(k)
        out = {"architectures": [d.pop("kind")], "model_type": "dflash", **d}
        out["layer_types"] = list(self.layer_types)
        out["block_size"] = self.block_size
        out["dflash_config"] = dflash
        for key in ("rope_scaling", "sliding_window", "is_causal", "quantization"):
            if out[key] is None:
                out.pop(key)
        out.update(extra)
        return out


# The fields config.json keeps under dflash_config (Z Lab's layout), in the order written
DFLASH_KEYS = (
    "target_layer_ids", "mask_token_id", "block_size", "input_embedding_scale",
    "output_multiplier", "final_logit_softcapping", "conv_kernel_size",
    "conv_group_size", "selector_rank", "selector_top_k",
)

_KNOWN = {
    "architectures", "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size", "rms_norm_eps",
    "rope_theta", "rope_parameters", "rope_scaling", "max_position_embeddings",
    "num_target_layers", "layer_types", "sliding_window", "block_size", "dflash_config",
    "is_causal", "final_logit_softcapping", "kind", "quantization",
}


def read_drafter_config(directory: Path) -> DraftConfig:
    """A drafter directory's config, checked in full without MLX: the CLI calls this before
    the target loads, so a wrong --draft or --compare folder is refused at once."""
    check_drafter_dir(directory)
    return read_config(directory / "config.json")


def read_config(path: Path) -> DraftConfig:
    """Parse `path` (a config.json). Raises InputError for anything missing or malformed."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: missing (a drafter directory needs config.json)") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: unreadable ({error.__class__.__name__}: {error})") from None
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(raw, dict):
        raise InputError(f"{path}: expected a JSON object at the top level")
    return parse_config(raw, str(path))


def parse_config(raw: dict[str, Any], where: str = "config.json") -> DraftConfig:
    check_field_types(raw, where)
    dflash = raw.get("dflash_config") or {}
    if not isinstance(dflash, dict):
        raise InputError(f"{where}: dflash_config must be an object")

    conflicts = []

    def get(key, *, nested=False, default=..., kind=int):
        if nested and key in dflash:
            value = dflash[key]
            if key in raw and raw[key] != value:
                conflicts.append(
                    f"{where}: dflash_config.{key} = {value!r} but {key} = {raw[key]!r} at the "
                    f"top level; the drafter runs with dflash_config's {value!r} (as Z Lab's "
                    "loader reads it)"
                )
        elif key in raw:
            value = raw[key]
        elif default is not ...:
            return default
        else:
            place = f"dflash_config.{key}" if nested else key
            raise InputError(f"{where}: missing required key {place!r}")
        # check_field_types has refused every present value of the wrong JSON kind.
        return value if value is None else kind(value)

    architectures = raw.get("architectures") or []
    if DFLASH2 in architectures:
        kind = DFLASH2
    elif DFLASH in architectures:
        kind = DFLASH
    elif "dflash_config" not in raw and (raw.get("model_type") or architectures):
        # the target's folder, an easy slip (a drafter has a dflash_config: its model_type is
        # a target's, "qwen3" in Z Lab's, so only that tells a misspelt architecture apart)
        raise InputError(
            f"{where}: looks like a target model (model_type = {raw.get('model_type')!r}, "
            f"architectures = {architectures!r}), not a DFlash drafter (expected architectures "
            f"{[DFLASH2]!r} or {[DFLASH]!r})"
        )
    else:
        raise InputError(
            f"{where}: architectures = {architectures!r}; expected {DFLASH!r} or {DFLASH2!r}"
        )

    rope_key = "rope_parameters" if raw.get("rope_parameters") else "rope_scaling"
    rope = raw.get(rope_key)
    if rope:  # mlx-lm's initialize_rope builds the drafter's rope from it
        check_rope_scaling(rope, rope_key, where, known_types=True)
    rope_theta = raw.get("rope_theta", (rope or {}).get("rope_theta", 10000.0))
    layers = get("num_hidden_layers")
    layer_types = tuple(raw.get("layer_types") or ("full_attention",) * layers)
    if len(layer_types) != layers:
        raise InputError(
            f"{where}: layer_types has {len(layer_types)} entries; expected {layers} "
            "(num_hidden_layers)"
        )
    unknown = sorted(set(layer_types) - set(LAYER_TYPES))
    if unknown:
        raise InputError(f"{where}: unsupported layer_types {unknown}; expected {LAYER_TYPES}")
    sliding_window = get("sliding_window", default=None)
    if "sliding_attention" in layer_types and not sliding_window:
        raise InputError(f"{where}: sliding_attention layers need a sliding_window")
    # A window wider than max_position_embeddings is full attention (real configs ship
    # them): its caches grow with what they hold, never with the window (context_cache.py).
    max_positions = get("max_position_embeddings")

    if "target_layer_ids" not in dflash:
        raise InputError(f"{where}: missing required key 'dflash_config.target_layer_ids'")
    target_layer_ids = tuple(dflash["target_layer_ids"])
    if not target_layer_ids:
        raise InputError(f"{where}: dflash_config.target_layer_ids is empty")
    if "mask_token_id" not in dflash:
        raise InputError(f"{where}: missing required key 'dflash_config.mask_token_id'")

    config = DraftConfig(
        kind=kind,
        hidden_size=get("hidden_size"),
        num_hidden_layers=layers,
        num_attention_heads=get("num_attention_heads"),
        num_key_value_heads=get("num_key_value_heads"),
        head_dim=get("head_dim"),
        intermediate_size=get("intermediate_size"),
        vocab_size=get("vocab_size"),
        rms_norm_eps=get("rms_norm_eps", kind=float),
        rope_theta=float(rope_theta),
        max_position_embeddings=max_positions,
        num_target_layers=get("num_target_layers"),
        block_size=get("block_size", nested=True, default=16),
        target_layer_ids=target_layer_ids,
        mask_token_id=get("mask_token_id", nested=True),
        rope_scaling=rope,
        layer_types=layer_types,
        sliding_window=sliding_window,
        is_causal=raw.get("is_causal"),
        input_embedding_scale=get("input_embedding_scale", nested=True, default=1.0, kind=float),
        output_multiplier=get("output_multiplier", nested=True, default=1.0, kind=float),
        final_logit_softcapping=get(
            "final_logit_softcapping", nested=True, default=None, kind=float
        ),
        conv_kernel_size=get("conv_kernel_size", nested=True, default=0),
        conv_group_size=get("conv_group_size", nested=True, default=0),
        selector_rank=get("selector_rank", nested=True, default=0),
        selector_top_k=get("selector_top_k", nested=True, default=0),
        quantization=parse_quantization(raw.get("quantization"), where),
        extra={k: v for k, v in raw.items() if k not in _KNOWN},
        conflicts=tuple(conflicts),
    )
    if config.is_dflash2:
        for key in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"):
            if getattr(config, key) <= 0:
                raise InputError(
                    f"{where}: DFlash2DraftModel needs dflash_config.{key} > 0 "
                    f"(got {getattr(config, key)})"
                )
        if config.hidden_size % config.conv_group_size:
            raise InputError(
                f"{where}: hidden_size {config.hidden_size} is not a multiple of "
                f"conv_group_size {config.conv_group_size}"
            )
    if config.is_dflash2 and config.selector_top_k > config.vocab_size:
        raise InputError(
            f"{where}: dflash_config.selector_top_k = {config.selector_top_k}; expected at most "
            f"vocab_size ({config.vocab_size}) candidates"
        )
    softcap = config.final_logit_softcapping
    if softcap is not None and not 0 < softcap < float("inf"):  # tanh(x / 0): NaN logits
        raise InputError(f"{where}: dflash_config.final_logit_softcapping = {softcap}; expected "
                         "a number above 0, or null for none")
    if not 0 < abs(config.input_embedding_scale) < float("inf"):
        # every block row 0: the anchor and the masks alike, so no proposal depends on them
        raise InputError(f"{where}: dflash_config.input_embedding_scale = "
                         f"{config.input_embedding_scale}; expected a finite number other than 0")
    if not 0 < abs(config.output_multiplier) < float("inf"):  # every logit 0: a tie everywhere
        raise InputError(f"{where}: dflash_config.output_multiplier = {config.output_multiplier}; "
                         "expected a finite number other than 0")
    if config.num_attention_heads % config.num_key_value_heads:
        raise InputError(
            f"{where}: num_attention_heads {config.num_attention_heads} is not a multiple of "
            f"num_key_value_heads {config.num_key_value_heads}"
        )
    if config.block_size < 2:
        raise InputError(
            f"{where}: block_size = {config.block_size}; expected at least 2 (the anchor and "
            "one proposal)"
        )
    if config.block_size > config.max_position_embeddings:
        raise InputError(
            f"{where}: block_size {config.block_size} exceeds max_position_embeddings "
            f"{config.max_position_embeddings}; a block must fit in the drafter's positions"
        )
    return config


def parse_quantization(raw: Any, where: str) -> dict[str, Any] | None:
    """mlx-lm's "quantization" object, checked: global group_size and bits, and per-module
    entries that are false (left in float) or their own {group_size, bits}. Whether each
    module path exists is checked against the model when the weights load."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InputError(f"{where}: quantization = {raw!r}; expected an object with group_size and bits")
    _quant_params(raw, "quantization", where)
    for path, entry in raw.items():
        if path in QUANT_GLOBAL_KEYS:
            continue
        if isinstance(entry, dict):
            _quant_params(entry, f"quantization[{path!r}]", where)
        elif not isinstance(entry, bool):
            raise InputError(
                f"{where}: quantization[{path!r}] = {entry!r}; expected false or an object "
                "with group_size and bits"
            )
    return raw


def _quant_params(entry: dict, name: str, where: str) -> None:
    mode = entry.get("mode", "affine")
    if mode != "affine":
        raise InputError(f"{where}: {name}.mode = {mode!r}; only MLX's 'affine' quantization is supported")
    for key, allowed in (("group_size", QUANT_GROUP_SIZES), ("bits", QUANT_BITS)):
        if key not in entry:
            raise InputError(f"{where}: {name} has no {key!r}")
        value = entry[key]
        if type(value) is not int or value not in allowed:
            raise InputError(
                f"{where}: {name}.{key} = {value!r}; expected one of "
                f"{', '.join(map(str, allowed))}"
            )
