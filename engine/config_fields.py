"""The JSON type of every field a drafter's config.json may hold, checked before any is read.

A hand-edited or corrupted config can hold null, a string or a list where a count belongs;
read as it is, that ends in a TypeError deep in the model (a property-based test over
config fields found a dozen such paths). Each present field is checked against its kind
here, and refused in one line naming the field, its value and what was expected. Missing
fields and the relations between fields are draft_config's business.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from .errors import InputError

# Far above any drafter (Z Lab's have 1 to 8 layers): a corrupted count must not make the
# loader build per-layer tables billions long before the weights show it wrong.
MAX_LAYERS = 1024
MAX_DIM = 2**31 - 1  # MLX array dimensions are int32


@dataclass(frozen=True)
class Kind:
    holds: Callable[[Any], bool]
    expected: str


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _or_null(kind: Kind) -> Kind:
    return Kind(lambda v: v is None or kind.holds(v), kind.expected + " or null")


DIM = Kind(lambda v: _int(v) and 1 <= v <= MAX_DIM, f"a whole number from 1 to {MAX_DIM}")
LAYERS = Kind(lambda v: _int(v) and 1 <= v <= MAX_LAYERS, f"a whole number from 1 to {MAX_LAYERS}")
INT = Kind(_int, "a whole number")  # ranges that depend on the target: pair_check.check_pair
NUMBER = Kind(_number, "a finite number")
# An epsilon or a rope base of 0 or below: RMSNorm refuses it when the model is built, and a
# base of 0 puts NaN in every rotary angle.
POSITIVE = Kind(lambda v: _number(v) and v > 0, "a number above 0")
OBJECT = Kind(lambda v: isinstance(v, dict), "an object")
STRINGS = Kind(lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v),
               "a list of strings")
INTS = Kind(lambda v: isinstance(v, list) and all(_int(i) for i in v), "a list of whole numbers")
FLAG = Kind(lambda v: isinstance(v, bool), "true or false")

TOP_LEVEL = {
    "architectures": STRINGS,
    "hidden_size": DIM,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": DIM,
    "num_key_value_heads": DIM,
    "head_dim": DIM,
    "intermediate_size": DIM,
    "vocab_size": DIM,
    "rms_norm_eps": POSITIVE,
    "rope_theta": POSITIVE,
    "rope_parameters": _or_null(OBJECT),
    "rope_scaling": _or_null(OBJECT),
    "max_position_embeddings": DIM,
    "num_target_layers": LAYERS,
    "layer_types": _or_null(STRINGS),
    "sliding_window": _or_null(DIM),
    "block_size": DIM,
    "is_causal": _or_null(FLAG),
    "final_logit_softcapping": _or_null(NUMBER),
    "dflash_config": _or_null(OBJECT),
}
DFLASH_CONFIG = {
    "target_layer_ids": INTS,
    "mask_token_id": INT,
    "block_size": DIM,
    "conv_kernel_size": DIM,
    "conv_group_size": DIM,
    "selector_rank": DIM,
    "selector_top_k": DIM,
    "input_embedding_scale": NUMBER,
    "output_multiplier": NUMBER,
    "final_logit_softcapping": _or_null(NUMBER),
}


# A target's config.json goes to mlx-lm, whose ModelArgs take any value and fail later in
# arithmetic ("unsupported operand type(s) for /: 'int' and 'str'"). Only the counts and
# constants every decoder config shares are checked, each may be null (mlx-lm's default).
TARGET_FIELDS = {name: _or_null(kind) for name, kind in {
    "hidden_size": DIM,
    "num_hidden_layers": DIM,
    "num_attention_heads": DIM,
    "num_key_value_heads": DIM,
    "head_dim": DIM,
    "intermediate_size": DIM,
    "vocab_size": DIM,
    "max_position_embeddings": DIM,
    "rms_norm_eps": POSITIVE,
    "rope_theta": POSITIVE,
    "rope_scaling": OBJECT,
    "rope_parameters": OBJECT,
    # transformers' strict config check refuses anything else, inside the tokenizer's load,
    # which then read as a tokenizer problem
    "tie_word_embeddings": FLAG,
}.items()}


# The rope types mlx-lm's initialize_rope builds (mlx_lm/models/rope_utils.py); it raises
# "Unsupported RoPE type" for any other, after the weights are read.
ROPE_TYPES = ("default", "linear", "dynamic", "llama3", "yarn", "deepseek_yarn",
              "telechat3-yarn", "longrope", "proportional", "mrope")
# Those that read `factor` unguarded (a KeyError when it is missing).
ROPE_TYPES_WITH_FACTOR = ("linear", "dynamic", "llama3", "yarn", "deepseek_yarn", "telechat3-yarn")
# Numbers a rope scaling may hold: those divided by or logged must be above 0, the yarn
# mscales only finite (mscale_all_dim defaults to 0). Null is taken as unset, as mlx-lm's
# .get() defaults do for most; a null factor is refused where the type needs one.
ROPE_POSITIVE = ("factor", "low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow",
                 "partial_rotary_factor", "rope_theta")
ROPE_FINITE = ("mscale", "mscale_all_dim")


def rope_type(scaling: dict) -> Any:
    """The rope type as mlx-lm reads it: `type`, else `rope_type`, else "default"."""
    return scaling.get("type") or scaling.get("rope_type", "default")


def check_rope_scaling(scaling: dict, name: str, where: str, known_types: bool) -> None:
    """Refuse a rope scaling object (`name`: rope_scaling or rope_parameters) whose numbers
    would divide by zero or fail in arithmetic. `known_types`: also refuse a type mlx-lm's
    initialize_rope does not build (the drafter's rope is built by it; a target's
    architecture may build its own)."""
    kind = rope_type(scaling)
    if known_types and kind not in ROPE_TYPES:
        key = "type" if scaling.get("type") else "rope_type"
        raise InputError(f"{where}: {name}.{key} = {short(kind)}; expected one of "
                         f"{', '.join(ROPE_TYPES)} (the rope types mlx-lm builds)")
    if kind in ROPE_TYPES_WITH_FACTOR and scaling.get("factor") is None:
        raise InputError(f"{where}: {name} has no factor; a {kind!r} rope scaling needs one "
                         f"({POSITIVE.expected})")
    for keys, number in ((ROPE_POSITIVE, POSITIVE), (ROPE_FINITE, NUMBER)):
        for key in keys:
            unset = scaling.get(key) is None and key != "rope_theta"  # a base is read as is
            if key in scaling and not unset and not number.holds(scaling[key]):
                raise InputError(f"{where}: {name}.{key} = {short(scaling[key])}; expected "
                                 f"{number.expected}")
    original = scaling.get("original_max_position_embeddings")
    if original is not None and not DIM.holds(original):
        raise InputError(f"{where}: {name}.original_max_position_embeddings = "
                         f"{short(original)}; expected {DIM.expected}")


def check_target_field_types(raw: dict, where: str) -> None:
    """Refuse the first present shared field of a target's config whose value is not of its
    kind, and a rope scaling whose numbers would fail in arithmetic."""
    _check(raw, TARGET_FIELDS, "", where)
    for name in ("rope_scaling", "rope_parameters"):
        if isinstance(raw.get(name), dict):
            check_rope_scaling(raw[name], name, where, known_types=False)


def check_field_types(raw: dict, where: str) -> None:
    """Refuse the first present field whose value is not of its kind."""
    _check(raw, TOP_LEVEL, "", where)
    dflash = raw.get("dflash_config")
    if isinstance(dflash, dict):
        _check(dflash, DFLASH_CONFIG, "dflash_config.", where)


def _check(fields: dict, kinds: dict[str, Kind], prefix: str, where: str) -> None:
    for name, kind in kinds.items():
        if name in fields and not kind.holds(fields[name]):
            raise InputError(f"{where}: {prefix}{name} = {short(fields[name])}; expected "
                             f"{kind.expected}")


def short(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
