"""The DFlash / DFlash2 drafter as MLX modules (docs/DFLASH2.md).

Parameter names are exactly Z Lab's checkpoint names, so a checkpoint loads with no
renaming. The same modules serve inference (one block, batch 1) and training (many blocks
of one sequence as a batch, with a mask that limits each block to its context prefix).

Every forward takes a `probe(name, layer, tensor)` callable and hands it each buffer in
pipeline order (docs/ARCHITECTURE.md, "Probes"); the default does nothing.

Residual scale (`DraftModel.scale_residual`): a float16 pass can keep its activations in
range by dividing everything written to the residual stream by S, and the epsilon of every
RMSNorm that reads the stream by S^2: rms_norm(x / S, eps / S^2) = rms_norm(x, eps), so each
norm, and everything computed from a norm's output, is what the unscaled pass computes. The
writes are divided before the projection that makes them (o_proj, down_proj, fc: a linear
map of x / S is the map of x, divided by S), so no unscaled value is ever stored; the block's
input and the context rows are divided as they come in. A scaled pass hands its probes the
residual-stream buffers multiplied back by S in float32, so probes, and the compare lab's
drift table, see the same units whatever S is.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx_lm.models.rope_utils import initialize_rope

from . import block_attention
from .draft_config import DraftConfig
from .weight_check import WeightNotes

Probe = Callable[[str, Optional[int], mx.array], None]


def no_probe(name: str, layer: Optional[int], tensor: mx.array) -> None:
    return None


def unscaled(probe: Probe, scale: float) -> Probe:
    """The probe for buffers of a residual stream divided by `scale`: it sees them multiplied
    back, in float32 (which a float16 pass's values cannot overflow)."""
    if scale == 1.0:
        return probe
    return lambda name, layer, tensor: probe(name, layer, tensor.astype(mx.float32) * scale)


def divided(x: mx.array, scale: float) -> mx.array:
    return x if scale == 1.0 else x / scale


class BlockConv(nn.Module):
    """DFlash2's grouped dynamic causal convolution, confined to the block.

    One projection of the sublayer input gives coefficients [rows, 2 sides, K taps, G
    groups]; side 0 convolves the sublayer input, side 1 its output. Row t of the output is
    sum_j (base_kernel[side, j, c] + coeff[t, side, j, group(c)]) * x[t - j, c], with zeros
    before the block's first row (the anchor reads nothing before it).
    """

    def __init__(self, hidden_size: int, kernel_size: int, group_size: int):
        super().__init__()
        self.kernel_size = kernel_size
        self.group_size = group_size
        self.groups = hidden_size // group_size
        self.base_kernel = mx.zeros((2, kernel_size, hidden_size))
        self.kernel_projection = nn.Linear(hidden_size, 2 * kernel_size * self.groups, bias=False)

    def coefficients(self, x: mx.array) -> mx.array:
        return self.kernel_projection(x).reshape(*x.shape[:-1], 2, self.kernel_size, self.groups)

    def convolve(self, x: mx.array, coeffs: mx.array, side: int) -> mx.array:
        """The convolution as one gather and one weighted sum over the taps, whatever K: a
        GPU pays for every op dispatched (a tap-by-tap loop is ~25 ops per call, this ~7),
        and a convolution runs four times per layer every round."""
        n, rows, hidden = x.shape
        k = self.kernel_size
        grouped = x.reshape(n, rows, self.groups, self.group_size)
        padded = mx.pad(grouped, [(0, 0), (k - 1, 0), (0, 0), (0, 0)])  # k - 1 zero rows first
        shifted = padded[:, _tap_rows(rows, k)]  # [n, rows, K, G, group]: x[t - j] at [t, j]
        # Slices and squeezes, not integer indexing (which MLX builds as a gather).
        base = self.base_kernel[side:side + 1].reshape(k, self.groups, self.group_size)
        dynamic = coeffs[:, :, side:side + 1].squeeze(2)[..., None]  # [n, rows, K, G, 1]
        weights = base.astype(x.dtype) + dynamic  # [n, rows, K, G, group]
        return (weights * shifted).sum(axis=2).reshape(n, rows, hidden)


@functools.lru_cache(maxsize=64)
def _tap_rows(rows: int, kernel_size: int) -> mx.array:
    """[rows, K] index into the input padded by K - 1 rows: row t, tap j reads x[t - j]."""
    t = np.arange(rows)[:, None]
    return mx.array(kernel_size - 1 + t - np.arange(kernel_size)[None, :])


class Attention(nn.Module):
    def __init__(self, config: DraftConfig, layer: int):
        super().__init__()
        h, d = config.hidden_size, config.head_dim
        self.n_heads = config.num_attention_heads
        self.n_kv_heads = config.num_key_value_heads
        self.head_dim = d
        self.scale = d**-0.5
        self.q_proj = nn.Linear(h, self.n_heads * d, bias=False)
        self.k_proj = nn.Linear(h, self.n_kv_heads * d, bias=False)
        self.v_proj = nn.Linear(h, self.n_kv_heads * d, bias=False)
        self.o_proj = nn.Linear(self.n_heads * d, h, bias=False)
        self.q_norm = nn.RMSNorm(d, eps=config.rms_norm_eps)
        self.k_norm = nn.RMSNorm(d, eps=config.rms_norm_eps)
        # What a block row sees, as block_masks builds it, for block_attention's kernel
        self.causal, self.window = layer_visibility(config, layer)

    def _heads(self, x: mx.array, n_heads: int) -> mx.array:
        n, rows, _ = x.shape
        return x.reshape(n, rows, n_heads, self.head_dim).transpose(0, 2, 1, 3)

    def keys_values(self, x: mx.array, rope: nn.Module, offset) -> tuple[mx.array, mx.array]:
        """K/V of rows at absolute positions offset.. : k_norm on keys only, rope on keys."""
        k = rope(self.k_norm(self._heads(self.k_proj(x), self.n_kv_heads)), offset=offset)
        v = self._heads(self.v_proj(x), self.n_kv_heads)
        return k, v

    def __call__(self, x, context, rope, offset, mask, probe: Probe, layer: int,
                 scale: float = 1.0):
        """`scale`: the residual scale; the output (a residual write) comes out divided by it."""
        n, rows, _ = x.shape
        q = rope(self.q_norm(self._heads(self.q_proj(x), self.n_heads)), offset=offset)
        k, v = self.keys_values(x, rope, offset)
        probe("q", layer, q)
        probe("k", layer, k)
        probe("v", layer, v)
        keys, values, mask = with_block(context, k, v, mask)
        if getattr(context, "kernel", False) and block_attention.supports(q, keys, values, self.window):
            out = block_attention.attend(q, keys, values, self.scale, self.causal, self.window)
        else:
            out = mx.fast.scaled_dot_product_attention(q, keys, values, scale=self.scale, mask=mask)
        out = out.transpose(0, 2, 1, 3).reshape(n, rows, -1)
        probe("attn_out", layer, out)
        out = self.o_proj(divided(out, scale))
        unscaled(probe, scale)("sub_out", layer, out)
        return out


def with_block(context, k: mx.array, v: mx.array, mask):
    """The keys and values a block attends over (its context's rows, then its own) and the
    mask to attend with.

    `context` is a (keys, values) pair, one sequence's context shared by its blocks in
    training (concatenated here), or at inference the layer's ContextCache, which writes the
    block into spare rows after the context instead of copying the context, and may attend
    over its whole buffer under a wider mask (engine/context_cache.py)."""
    if not isinstance(context, tuple):
        return context.with_block(k, v, mask)
    ctx_k, ctx_v = context
    n = k.shape[0]
    if ctx_k.shape[0] != n:
        ctx_k = mx.broadcast_to(ctx_k, (n, *ctx_k.shape[1:]))
        ctx_v = mx.broadcast_to(ctx_v, (n, *ctx_v.shape[1:]))
    return (mx.concatenate([ctx_k.astype(k.dtype), k], axis=2),
            mx.concatenate([ctx_v.astype(v.dtype), v], axis=2), mask)


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def __call__(self, x, probe: Probe, layer: int, scale: float = 1.0):
        """`scale`: the residual scale; the output (a residual write) comes out divided by it."""
        gate = self.gate_proj(x)
        probe("ffn_gate", layer, gate)
        up = self.up_proj(x)
        probe("ffn_up", layer, up)
        act = nn.silu(gate) * up
        probe("ffn_act", layer, act)
        out = self.down_proj(divided(act, scale))
        unscaled(probe, scale)("ffn_out", layer, out)
        return out


class DecoderLayer(nn.Module):
    """A DFlash layer; with `conv_kernel_size` set, a DFlash2 layer (convs around each sublayer)."""

    residual_scale = 1.0  # DraftModel.scale_residual sets it

    def __init__(self, config: DraftConfig, layer: int):
        super().__init__()
        self.layer = layer
        self.is_sliding = config.layer_types[layer] == "sliding_attention"
        self.self_attn = Attention(config, layer)
        self.mlp = MLP(config.hidden_size, config.intermediate_size)
        self.input_layernorm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = nn.RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        if config.is_dflash2:
            args = (config.hidden_size, config.conv_kernel_size, config.conv_group_size)
            self.attention_conv = BlockConv(*args)
            self.mlp_conv = BlockConv(*args)

    def __call__(self, x, context, rope, offset, mask, probe: Probe = no_probe):
        i, s = self.layer, self.residual_scale
        dflash2 = "attention_conv" in self
        residual = unscaled(probe, s)  # x, the writes to it and x_mid are divided by s
        residual("x", i, x)
        h = self.input_layernorm(x)
        probe("normed", i, h)
        if dflash2:
            coeffs = self.attention_conv.coefficients(h)
            probe("coeffs", i, coeffs)
            h = self.attention_conv.convolve(h, coeffs, side=0)
            probe("conv_p", i, h)
        h = self.self_attn(h, context, rope, offset, mask, probe, i, s)
        if dflash2:  # linear in h: its output is divided by s as h is
            h = self.attention_conv.convolve(h, coeffs, side=1)
            residual("conv_f", i, h)
        x = x + h
        residual("x_mid", i, x)
        h = self.post_attention_layernorm(x)
        probe("normed2", i, h)
        if dflash2:
            coeffs = self.mlp_conv.coefficients(h)
            probe("coeffs2", i, coeffs)
            h = self.mlp_conv.convolve(h, coeffs, side=0)
            probe("conv_p2", i, h)
        h = self.mlp(h, probe, i, s)
        if dflash2:
            h = self.mlp_conv.convolve(h, coeffs, side=1)
            residual("conv_f2", i, h)
        return x + h


class CandidateSelector(nn.Module):
    """DFlash2's selector parameters; the walk itself lives in selector.py."""

    def __init__(self, config: DraftConfig):
        super().__init__()
        v, r = config.vocab_size, config.selector_rank
        # Stored without a `.weight` suffix in Z Lab's checkpoints: plain arrays, not Embeddings
        # (until quantized: engine/quantize.py).
        self.predecessor_codebook = mx.zeros((v, r))
        self.successor_codebook = mx.zeros((v, r))
        self.hidden_projection = nn.Linear(config.hidden_size, r, bias=False)

    def rows(self, codebook: str, ids: mx.array) -> mx.array:
        """Rows `ids` of a codebook, a plain array or a QuantizedEmbedding."""
        table = self[codebook]
        return table[ids] if isinstance(table, mx.array) else table(ids)


class DraftModel(nn.Module):
    """The drafter's own weights. The token embedding and lm_head are the target's (bound at
    run time by the caller, never stored here, so training and saving never touch them)."""

    def __init__(self, config: DraftConfig):
        super().__init__()
        self.config = config
        h = config.hidden_size
        self.fc = nn.Linear(len(config.target_layer_ids) * h, h, bias=False)
        self.hidden_norm = nn.RMSNorm(h, eps=config.rms_norm_eps)
        # Before the layers: the parameter order lists the top-level tensors first, and the
        # test fixtures draw their seeded random weights in that order (expected_shapes).
        self.norm = nn.RMSNorm(h, eps=config.rms_norm_eps)
        self.layers = [DecoderLayer(config, i) for i in range(config.num_hidden_layers)]
        if config.is_dflash2:
            self.candidate_selector = CandidateSelector(config)
        # The drafter ropes with the plain (non-interleaved) layout, as Z Lab's does.
        self.rope = initialize_rope(
            config.head_dim, config.rope_theta, False, config.rope_scaling,
            config.max_position_embeddings,
        )

    residual_scale = 1.0  # scale_residual sets it
    # NaN / Inf found in the weights as loaded (engine/weight_check.py; load_drafter sets it):
    # the session shows them as notes.
    weight_notes = WeightNotes()

    def scale_residual(self, scale: float) -> None:
        """From now on, run with the residual stream divided by `scale` (module docstring):
        every RMSNorm that reads the stream gets epsilon / scale^2, every layer the scale."""
        eps = self.config.rms_norm_eps / scale**2
        for norm in (self.hidden_norm, self.norm, *(n for layer in self.layers for n in (
                layer.input_layernorm, layer.post_attention_layernorm))):
            norm.eps = eps
        self.residual_scale = scale
        for layer in self.layers:
            layer.residual_scale = scale

    @property
    def dtype(self) -> mx.Dtype:
        """The type the drafter computes in: its float weights' (a quantized Linear's weight
        is packed uint32, so no projection's weight can say it)."""
        return self.hidden_norm.weight.dtype

    def project_context(self, capture: mx.array, probe: Probe = no_probe) -> mx.array:
        """ctx = hidden_norm(fc(concat of the target's captured layer outputs)), computed in
        the drafter's float type (the capture comes in the target's)."""
        s = self.residual_scale
        capture = divided(capture, s).astype(self.dtype)
        residual = unscaled(probe, s)  # the capture is the target's residual stream
        residual("capture", None, capture)
        combined = self.fc(capture)
        residual("ctx_combined", None, combined)
        ctx = self.hidden_norm(combined)
        probe("ctx_normed", None, ctx)
        return ctx

    def context_kv(self, ctx: mx.array, offset, probe: Probe = no_probe) -> list[tuple[mx.array, mx.array]]:
        """Each layer's keys/values of the context rows at positions offset.. ."""
        out = []
        for layer in self.layers:
            k, v = layer.self_attn.keys_values(ctx, self.rope, offset)
            probe("ctx_k", layer.layer, k)
            probe("ctx_v", layer.layer, v)
            out.append((k, v))
        return out

    def block_hidden(self, x, kv, offset, masks, probe: Probe = no_probe) -> mx.array:
        """Run the block through every layer; returns the final-normed hidden of every row.

        x: embedded block [n, rows, H]; kv: per layer its context, a (ctx_k, ctx_v) pair or
        a ContextCache (`with_block`); offset: the anchor's absolute position (int, or [n]
        array in training); masks: per layer mask or None.
        """
        x = divided(x, self.residual_scale)
        for layer, context, mask in zip(self.layers, kv, masks):
            x = layer(x, context, self.rope, offset, mask, probe)
        return self.norm(x)

    def logits(self, hidden: mx.array, lm_head: Callable[[mx.array], mx.array]) -> mx.array:
        logits = lm_head(hidden)
        if self.config.output_multiplier != 1.0:
            logits = logits * self.config.output_multiplier
        cap = self.config.final_logit_softcapping
        if cap:
            logits = mx.tanh(logits / cap) * cap
        return logits


def layer_visibility(config: DraftConfig, layer: int) -> tuple[bool, int]:
    """(causal inside the block, the window over the context or 0) of one drafter layer:
    sliding layers are causal unless the config says is_causal, full layers are not."""
    sliding = config.layer_types[layer] == "sliding_attention"
    causal = sliding if config.is_causal is None else config.is_causal
    return bool(causal), (config.sliding_window if sliding else 0)


def block_masks(config: DraftConfig, ctx_lengths: list[int], rows: int, dtype=mx.bool_):
    """Per-layer inference masks for one block of `rows` after `ctx_lengths[i]` context rows.

    Full-attention layers see every context row and the whole block (no mask), unless the
    config says is_causal. Sliding layers are causal inside the block and see context rows
    within the window of each query's absolute position.
    """
    masks = []
    for layer, ctx_len in enumerate(ctx_lengths):
        causal, window = layer_visibility(config, layer)
        sliding = window > 0
        if not sliding and not causal:
            masks.append(None)
            continue
        query = ctx_len + mx.arange(rows)[:, None]
        key = mx.arange(ctx_len + rows)[None]
        in_block = key >= ctx_len
        visible = in_block & (key <= query) if causal else in_block
        context = key < ctx_len
        if sliding:
            context = context & (query - key < config.sliding_window)
        masks.append(visible | context)
    return masks
