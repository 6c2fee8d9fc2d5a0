"""A target and a DFlash2 drafter of real shapes with random weights, made on the device.

Nothing is downloaded or read: the target is mlx-lm's own llama model class and the drafter
the engine's own DraftModel, built lazily (their default initializers never run) and given
random weights created directly in the requested dtype, one layer at a time so the peak
memory stays near the model's size. `REAL` is an 8B-class target (Qwen3-8B's shape under a
llama architecture) with a drafter of the shape Z Lab publishes for such targets; `TINY`
is the same structure small enough for a 2-core CPU and a test.

The tokenizer knows no text: a token id reads as `<id>`. Random weights make random text,
which is all a timing needs (proposals are forced where acceptance matters).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_unflatten
from mlx_lm.models import llama

from dflash_tui.engine.api import Pair
from dflash_tui.engine.draft_config import DFLASH2, DraftConfig
from dflash_tui.engine.drafter import DraftModel
from dflash_tui.engine.target import DTYPES, Target, TargetSpec


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    draft_layers: int = 5
    block: int = 16  # the drafter's block_size (anchor + 15 proposals)
    top_k: int = 16
    rank: int = 256
    conv_kernel: int = 4
    conv_group: int = 16
    sliding_window: Optional[int] = None  # drafter layers but the last slide over this window

    def describe(self) -> str:
        draft = f"DFlash2 {self.draft_layers} layers, block {self.block}, top-{self.top_k}, rank {self.rank}"
        if self.sliding_window:
            draft += f", sliding window {self.sliding_window} (last layer full)"
        return (f"llama target: hidden {self.hidden}, {self.layers} layers, {self.heads}/"
                f"{self.kv_heads} heads, intermediate {self.intermediate}, vocabulary "
                f"{self.vocab:,}; {draft}")


REAL = Shape(hidden=4096, layers=36, heads=32, kv_heads=8, head_dim=128, intermediate=12288,
             vocab=151_936)
TINY = Shape(hidden=64, layers=6, heads=4, kv_heads=2, head_dim=16, intermediate=128,
             vocab=512, draft_layers=2, rank=16, top_k=8)


class IdsTokenizer:
    """What a Session asks of a tokenizer, for a vocabulary of bare ids."""

    eos_token_ids: set[int] = set()  # random text never stops early
    chat_template = None

    def decode(self, ids) -> str:
        return "".join(f"<{int(i)}>" for i in ids)

    def convert_ids_to_tokens(self, token: int) -> str:
        return f"<{int(token)}>"


def _target_layer_ids(layers: int, count: int) -> list[int]:
    """Z Lab's rule (dflash/model.py build_target_layer_ids): 1 .. layers-3, evenly."""
    if count == 1:
        return [layers // 2]
    return [round(1 + i * (layers - 4) / (count - 1)) for i in range(count)]


def _randomize(module: nn.Module, dtype: mx.Dtype, key: mx.array) -> None:
    """Random weights in `dtype`, layer by layer: norms 1, matrices N(0, 1/fan_in) (rows
    keep unit scale), embeddings and codebooks N(0, 1)."""
    params = tree_flatten(module.parameters())
    keys = mx.random.split(key, len(params))
    for i, (name, p) in enumerate(params):
        if name.endswith("norm.weight"):
            value = mx.ones(p.shape, dtype=dtype)
        elif p.ndim == 2 and not any(s in name for s in ("embed", "codebook")):
            value = mx.random.normal(p.shape, dtype=dtype, scale=p.shape[1] ** -0.5,
                                     key=keys[i])
        else:
            value = mx.random.normal(p.shape, dtype=dtype, scale=0.5 if p.ndim == 3 else 1.0,
                                     key=keys[i])
        module.update(tree_unflatten([(name, value)]))
        mx.eval(value)


def synthetic_target(shape: Shape, dtype: str, seed: int = 0) -> Target:
    config = {
        "model_type": "llama", "hidden_size": shape.hidden, "num_hidden_layers": shape.layers,
        "intermediate_size": shape.intermediate, "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.kv_heads, "head_dim": shape.head_dim,
        "rms_norm_eps": 1e-6, "vocab_size": shape.vocab, "rope_theta": 1_000_000.0,
        "tie_word_embeddings": False, "max_position_embeddings": 40_960,
    }
    model = llama.Model(llama.ModelArgs.from_dict(config))
    _randomize(model, DTYPES[dtype], mx.random.key(seed))
    return Target(model, IdsTokenizer(), TargetSpec(Path(f"synthetic-llama-{shape.hidden}x{shape.layers}"),
                                                    "llama", config))


def draft_config(shape: Shape) -> DraftConfig:
    layer_types = ("full_attention",) * shape.draft_layers
    if shape.sliding_window:
        layer_types = ("sliding_attention",) * (shape.draft_layers - 1) + ("full_attention",)
    return DraftConfig(
        kind=DFLASH2, hidden_size=shape.hidden, num_hidden_layers=shape.draft_layers,
        num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim, intermediate_size=shape.intermediate, vocab_size=shape.vocab,
        rms_norm_eps=1e-6, rope_theta=1_000_000.0, max_position_embeddings=40_960,
        num_target_layers=shape.layers, block_size=shape.block,
        target_layer_ids=tuple(_target_layer_ids(shape.layers, shape.draft_layers)),
        mask_token_id=shape.vocab - 1, layer_types=layer_types,
        sliding_window=shape.sliding_window, conv_kernel_size=shape.conv_kernel,
        conv_group_size=shape.conv_group, selector_rank=shape.rank, selector_top_k=shape.top_k,
    )


def synthetic_pair(shape: Shape, dtype: str = "bfloat16", seed: int = 0) -> Pair:
    target = synthetic_target(shape, dtype, seed)
    drafter = DraftModel(draft_config(shape))
    _randomize(drafter, DTYPES[dtype], mx.random.key(seed + 1))
    return Pair(target, drafter, Path("synthetic-dflash2"))


def with_shape(shape: Shape, **changes) -> Shape:
    return replace(shape, **{k: v for k, v in changes.items() if v is not None})
