"""The drafter's config for a given target, and how its weights start.

The drafter shares the target's hidden size and attention shape (heads, KV heads, head
dim), rope theta and vocabulary; it borrows the target's embedding and lm_head at run
time. What is chosen here:

  target_layer_ids  Z Lab's rule, round(1 + i*(T-4)/(L-1)) for i in 0..L-1 (T target
                    layers, L = --target-layers, default 5; L = 1 takes T // 2). On a
                    target so shallow that the rule repeats a layer, L distinct layers
                    evenly spaced over 0..T-1 instead.
  mask_token_id     an unused special token of the target: the tokenizer's mask token if
                    it has one, else a special/control token whose name says "mask", else
                    the highest-id special token that is not BOS/EOS/PAD/UNK and not in the
                    chat template's output, preferring one the training data never uses.
                    --mask-token-id overrides.
"""

from __future__ import annotations

import math
from typing import Iterable, Optional

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten

from dflash_tui.engine.draft_config import DFLASH, DFLASH2, DraftConfig
from dflash_tui.engine.drafter import DraftModel
from dflash_tui.engine.errors import InputError

from .generate import stop_token_ids
from .settings import TrainSettings


def zlab_layer_ids(num_target_layers: int, count: int) -> list[int]:
    """Z Lab's build_target_layer_ids (dflash/model.py), with a fallback for tiny targets."""
    t = num_target_layers
    if count == 1:
        return [t // 2]
    ids = [round(1 + i * (t - 4) / (count - 1)) for i in range(count)]
    if len(set(ids)) == count and all(0 <= i < t for i in ids):
        return ids
    count = min(count, t)
    if count == 1:
        return [t // 2]
    return sorted({round(i * (t - 1) / (count - 1)) for i in range(count)})


def _hf(tokenizer):
    """The Hugging Face tokenizer inside mlx-lm's TokenizerWrapper (or the one given)."""
    from mlx_lm.tokenizer_utils import TokenizerWrapper

    return tokenizer._tokenizer if isinstance(tokenizer, TokenizerWrapper) else tokenizer


def _special_ids(tokenizer) -> dict[int, str]:
    """id -> text of every special / added control token the tokenizer knows."""
    inner = _hf(tokenizer)
    out: dict[int, str] = {}
    for token_id in getattr(inner, "all_special_ids", []) or []:
        out[int(token_id)] = inner.convert_ids_to_tokens(int(token_id))
    decoder = getattr(inner, "added_tokens_decoder", None) or {}
    for token_id, added in decoder.items():
        if getattr(added, "special", True):
            out[int(token_id)] = str(getattr(added, "content", added))
    return out


def choose_mask_token(tokenizer, vocab_size: int, used: Iterable[int] = ()) -> int:
    """`used`: token ids that occur in the training data (avoided when there is a choice)."""
    inner = _hf(tokenizer)
    mask_id = getattr(inner, "mask_token_id", None)
    if mask_id is not None and 0 <= int(mask_id) < vocab_size:
        return int(mask_id)
    specials = {i: t for i, t in _special_ids(tokenizer).items() if 0 <= i < vocab_size}
    seen = set(int(u) for u in used)
    taken: set[int] = set()
    for attr in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id"):
        value = getattr(inner, attr, None)
        if value is not None:
            taken.add(int(value))
    taken.update(stop_token_ids(tokenizer))
    if getattr(inner, "chat_template", None):
        try:
            text = inner.apply_chat_template(
                [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
            taken.update(int(i) for i in inner.encode(text, add_special_tokens=False))
        except Exception:  # a template that needs more than one message: nothing learnt
            pass
    free = {i: t for i, t in specials.items() if i not in taken}
    named = [i for i, t in free.items() if "mask" in t.lower()]
    if named:
        return min(named)
    unseen = [i for i in free if i not in seen]
    if unseen or free:
        return max(unseen or free)
    raise InputError(
        "the target's tokenizer has no unused special token to serve as the drafter's mask "
        "token (give one with --mask-token-id ID)")


def _target_config(target) -> dict:
    config = dict(target.spec.config)
    text = config.get("text_config")
    if isinstance(text, dict):  # multimodal-style configs keep the text model's shape here
        config = {**config, **text}
    return config


def target_shape(target) -> dict[str, int]:
    """What the target fixes in any drafter made for it, by DraftConfig field name."""
    tc = _target_config(target)
    hidden = target.hidden_size
    heads = int(tc.get("num_attention_heads", max(1, hidden // 64)))
    return {
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": int(tc.get("num_key_value_heads", heads)),
        "head_dim": int(tc.get("head_dim") or hidden // heads),
        "vocab_size": target.vocab_size,
        "num_target_layers": target.num_layers,
    }


def check_against_target(target, settings: TrainSettings, mask_token_id: Optional[int]) -> None:
    """The settings that must fit the target: checked as soon as it loads, before any data
    is generated, and again when the drafter is built."""
    ids = settings.target_layer_ids or zlab_layer_ids(target.num_layers, settings.target_layers)
    for i in ids:
        if not 0 <= i < target.num_layers:
            raise InputError(
                f"--target-layer-ids {','.join(map(str, ids))}: {i} is out of range for a target "
                f"with {target.num_layers} layers (expected 0..{target.num_layers - 1})")
    if mask_token_id is not None and not 0 <= mask_token_id < target.vocab_size:
        raise InputError(
            f"--mask-token-id {mask_token_id}: out of range for a vocabulary of {target.vocab_size}")
    group = settings.conv_group or math.gcd(target.hidden_size, 16)
    if target.hidden_size % group:
        raise InputError(f"--conv-group {group}: must divide the target's hidden size {target.hidden_size}")


def build_config(target, settings: TrainSettings, mask_token_id: int) -> DraftConfig:
    check_against_target(target, settings, mask_token_id)
    tc = _target_config(target)
    hidden = target.hidden_size
    rope = tc.get("rope_parameters") or {}
    rope_theta = float(tc.get("rope_theta", rope.get("rope_theta", 10000.0)))
    ids = settings.target_layer_ids or zlab_layer_ids(target.num_layers, settings.target_layers)
    group = settings.conv_group or math.gcd(hidden, 16)
    dflash2 = settings.kind == "dflash2"
    return DraftConfig(
        kind=DFLASH2 if dflash2 else DFLASH,
        **target_shape(target),
        num_hidden_layers=settings.layers,
        intermediate_size=settings.intermediate_size or int(tc.get("intermediate_size", 4 * hidden)),
        rms_norm_eps=float(tc.get("rms_norm_eps", 1e-6)),
        rope_theta=rope_theta,
        max_position_embeddings=int(tc.get("max_position_embeddings", 4096)),
        block_size=settings.block_size,
        target_layer_ids=tuple(int(i) for i in ids),
        mask_token_id=int(mask_token_id),
        layer_types=("full_attention",) * settings.layers,
        conv_kernel_size=settings.conv_kernel if dflash2 else 0,
        conv_group_size=group if dflash2 else 0,
        selector_rank=settings.rank if dflash2 else 0,
        selector_top_k=settings.top_k if dflash2 else 0,
    )


CODEBOOK_STD = 0.1


def init_drafter(config: DraftConfig, seed: int) -> DraftModel:
    """A fresh drafter in float32, started the way a trained one is shaped.

    Linear layers keep MLX's default uniform init and norms start at 1. The convs start as
    the identity: base_kernel tap 0 = 1, other taps 0, kernel_projection = 0 (its gradient
    is not zero, so the dynamic part still learns). The codebooks start small and random
    (std 0.1): the edge score is a product of both codebooks, so neither may start at zero,
    and small values leave the unary (logit) ranking in charge at first.
    """
    mx.random.seed(seed)
    model = DraftModel(config)
    if config.is_dflash2:
        for layer in model.layers:
            for conv in (layer.attention_conv, layer.mlp_conv):
                kernel = mx.zeros(conv.base_kernel.shape)
                conv.base_kernel = kernel.at[:, 0, :].add(1.0)
                conv.kernel_projection.weight = mx.zeros(conv.kernel_projection.weight.shape)
        selector = model.candidate_selector
        shape = selector.predecessor_codebook.shape
        selector.predecessor_codebook = CODEBOOK_STD * mx.random.normal(shape)
        selector.successor_codebook = CODEBOOK_STD * mx.random.normal(shape)
    mx.eval(model.parameters())
    return model


def parameter_bytes(model: nn.Module, bytes_per_value: int = 2) -> int:
    return sum(int(np.prod(v.shape)) for _, v in tree_flatten(model.parameters())) * bytes_per_value
