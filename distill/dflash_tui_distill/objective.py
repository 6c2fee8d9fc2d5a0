"""The packed-block forward and the training objective (docs/DFLASH2.md has the block and
the selector it trains; docs/DISTILL.md, "The objective", the choices).

The forward is the engine's own drafter (engine/drafter.py), run on a batch of blocks:

    capture [B, S, n*H]  the target's layer outputs for B whole sequences (frozen)
    ctx  = hidden_norm(fc(capture))                   drafter.project_context
    K/V  = each layer's k_proj/k_norm/rope of ctx at positions 0..S-1   drafter.context_kv
    x    = embed([anchor, mask x gamma]) * scales     the target's embedding, frozen
    h    = drafter.block_hidden(x, K/V, anchors, masks)

with a mask per block that shows context rows 0..a-1 (never the anchor's own row: the
target has not seen the anchor yet at inference) and the block's own rows 0..g
(bidirectional, as full-attention layers run at inference). Logits are
drafter.logits(h[rows 1..gamma], the target's lm_head).

Objective, per block and slot k = 1..gamma with weight exp(-(k-1)/decay):
  block CE     -log softmax(logits_k)[label_k]; with --kd-weight W > 0,
               (1 - W) x that + W x the CE against the target's whole distribution at the
               label's position, -sum_v p_target(v) log softmax(logits_k)(v) (soft labels:
               where the target hesitates between tokens, the drafter learns how much, not
               just which one won)
  selector CE  over the slot's top-K candidates (the selector's lattice), score(c) =
               unary(c) + sum_r pred[prev, r] * h[k, r] * succ[c, r], where prev is the TRUE
               predecessor (the anchor for slot 1, else label_{k-1}): the walk is only worth
               anything while every earlier proposal was accepted, i.e. equal to the labels.
               When the label is not among the top-K, it replaces the lowest candidate (so
               every slot teaches the edges something); the unary scores are the logits
               under stop_gradient (the block CE trains them; the selector loss trains the
               codebooks, the hidden projection and, through h, the drafter body).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import mlx.core as mx

from dflash_tui.engine.drafter import DraftModel


@dataclass
class TargetParts:
    """What the drafter borrows from the target; never trained."""

    embed_tokens: Callable[[mx.array], mx.array]
    lm_head: Callable[[mx.array], mx.array]
    embed_scale: float  # target embed scale x config.input_embedding_scale


def target_parts(target, config) -> TargetParts:
    return TargetParts(target.embed_tokens, target.lm_head,
                       target.embed_scale * config.input_embedding_scale)


def target_features(target, ids: mx.array) -> mx.array:
    """The target's captured layer outputs for whole sequences [B, S] (hooked beforehand).

    Right padding needs no mask: the target is causal, so padded rows never reach a real
    row, and no block sees a context row at or past its anchor.
    """
    return target_features_and_logits(target, ids)[0]


def target_features_and_logits(target, ids: mx.array) -> tuple[mx.array, mx.array]:
    """The capture [B, S, n*H] and the target's logits [B, S, V], both frozen."""
    target.reset()
    logits, capture = target.forward(ids)
    return mx.stop_gradient(capture), mx.stop_gradient(logits)


def label_logits(target_logits: mx.array, anchors: mx.array, gamma: int) -> mx.array:
    """The target's logits that chose each block's labels: slot k's label sits at a + k, so
    the row that predicted it is a + k - 1. target_logits [B, S, V], anchors [n] (blocks
    grouped by sequence, sequence-major) -> [n, gamma, V]."""
    b, s, v = target_logits.shape
    per_sequence = anchors.shape[0] // b
    rows = (mx.arange(anchors.shape[0]) // per_sequence) * s
    positions = rows[:, None] + anchors[:, None] + mx.arange(gamma)[None, :]
    return target_logits.reshape(b * s, v)[positions]


def soft_cross_entropy(logits: mx.array, teacher_logits: mx.array) -> tuple[mx.array, mx.array]:
    """Per-row CE against the teacher's softmax, -sum p log q, and the teacher's entropy
    (their difference is KL(p || q)). [..., V] -> ([...], [...]), float32."""
    teacher = teacher_logits.astype(mx.float32)
    p = mx.softmax(teacher, axis=-1)
    log_q = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    entropy = mx.logsumexp(teacher, axis=-1) - (p * teacher).sum(axis=-1)
    return -(p * log_q).sum(axis=-1), entropy


def slot_weights(gamma: int, decay: float) -> mx.array:
    """exp(-(k-1)/decay) for slots k = 1..gamma."""
    return mx.array([math.exp(-(k - 1) / decay) for k in range(1, gamma + 1)], dtype=mx.float32)


def packed_masks(anchors: mx.array, lengths: mx.array, seq_len: int, rows: int,
                 layers: int) -> list[mx.array]:
    """Per-layer attention masks [n, 1, 1, S + rows] (True = attend) for packed blocks."""
    context = mx.arange(seq_len)[None, :] < anchors[:, None]
    own = mx.arange(rows)[None, :] <= lengths[:, None]
    mask = mx.concatenate([context, own], axis=1)[:, None, None, :]
    return [mask] * layers


def context_kv(drafter: DraftModel, capture: mx.array) -> list[tuple[mx.array, mx.array]]:
    """Each drafter layer's keys/values of every context row of capture [B, S, n*H]."""
    # drafter.dtype, not fc.weight's: a quantized fc's weight is packed uint32, and casting
    # to it zeroed every feature (stage 20's 8-bit copy judged at 0.2 accepted per round)
    ctx = drafter.project_context(capture.astype(drafter.dtype))
    return drafter.context_kv(ctx, 0)


def block_hidden_on(drafter: DraftModel, parts: TargetParts, kv, seq_len: int, anchors: mx.array,
                    block: mx.array, lengths: mx.array) -> mx.array:
    """Final-normed hidden of rows 1..gamma of blocks [n, rows] over context K/V that
    already has one entry per block: [n, gamma, H]."""
    x = (parts.embed_tokens(block) * parts.embed_scale).astype(drafter.dtype)
    masks = packed_masks(anchors, lengths, seq_len, block.shape[1], len(drafter.layers))
    return drafter.block_hidden(x, kv, anchors, masks)[:, 1:]


def draft_hidden(drafter: DraftModel, parts: TargetParts, capture: mx.array, anchors: mx.array,
                 block: mx.array, lengths: mx.array) -> mx.array:
    """Final-normed hidden of rows 1..gamma of every block: [n, gamma, H].

    capture [B, S, n*H]; anchors/lengths [n]; block [n, rows]; blocks are grouped by
    sequence (n = B * blocks per sequence, sequence-major).
    """
    per_sequence = block.shape[0] // capture.shape[0]
    kv = context_kv(drafter, capture)
    if per_sequence > 1:
        kv = [(mx.repeat(k, per_sequence, axis=0), mx.repeat(v, per_sequence, axis=0)) for k, v in kv]
    return block_hidden_on(drafter, parts, kv, capture.shape[1], anchors, block, lengths)


def top_candidates(logits: mx.array, k: int) -> tuple[mx.array, mx.array]:
    """The top-k candidates per slot, best unary first (selector.py's order), and their
    float32 logits. logits [..., V]."""
    k = min(k, logits.shape[-1])
    candidates = mx.argpartition(-logits, kth=k - 1, axis=-1)[..., :k]
    unary = mx.take_along_axis(logits, candidates, axis=-1)
    order = mx.argsort(-unary, axis=-1)
    candidates = mx.take_along_axis(candidates, order, axis=-1)
    return candidates, mx.take_along_axis(unary, order, axis=-1).astype(mx.float32)


def edge_scores(selector, predecessors: mx.array, hproj: mx.array, candidates: mx.array) -> mx.array:
    """sum_r pred[prev, r] * h[r] * succ[c, r]; predecessors [...], hproj [..., r],
    candidates [..., K] -> [..., K]."""
    # rows(), not indexing: a quantized drafter's codebooks are QuantizedEmbeddings (the eval
    # of a `dflash-tui quantize`d copy), and indexing a module looks the ids up as a key
    pred = selector.rows("predecessor_codebook", predecessors).astype(mx.float32)
    succ = selector.rows("successor_codebook", candidates).astype(mx.float32)
    query = (pred * hproj.astype(mx.float32))[..., None, :]
    return (query @ mx.swapaxes(succ, -1, -2))[..., 0, :]


def selector_loss(selector, hidden: mx.array, logits: mx.array, anchor_tokens: mx.array,
                  labels: mx.array, top_k: int) -> tuple[mx.array, mx.array, mx.array]:
    """Per-slot selector CE [n, gamma], whether the label was in the top-K, and whether the
    selector's argmax (given the true predecessor) is the label."""
    frozen = mx.stop_gradient(logits)
    candidates, _ = top_candidates(frozen, top_k)
    k = candidates.shape[-1]
    hit = candidates == labels[..., None]
    in_top = hit.any(axis=-1)
    # Not among the top-K: the label replaces the lowest candidate (the last one).
    last = mx.arange(k) == k - 1
    candidates = mx.where(in_top[..., None] | ~last, candidates, labels[..., None])
    target_index = mx.argmax(candidates == labels[..., None], axis=-1)
    unary = mx.take_along_axis(frozen, candidates, axis=-1).astype(mx.float32)
    predecessors = mx.concatenate([anchor_tokens[:, None], labels[:, :-1]], axis=1)
    hproj = selector.hidden_projection(hidden)
    score = unary + edge_scores(selector, predecessors, hproj, candidates)
    picked = mx.take_along_axis(score, target_index[..., None], axis=-1)[..., 0]
    ce = mx.logsumexp(score, axis=-1) - picked
    correct = mx.argmax(score, axis=-1) == target_index
    return ce, in_top, correct


def losses(drafter: DraftModel, parts: TargetParts, capture: mx.array, anchors: mx.array,
           block: mx.array, labels: mx.array, lengths: mx.array, weights: mx.array,
           selector_weight: float, teacher: mx.array | None = None,
           kd_weight: float = 0.0) -> tuple[mx.array, dict[str, mx.array]]:
    """The total loss and its parts; weights = slot_weights(gamma, decay); teacher: the
    target's logits at the labels' positions [n, gamma, V] (label_logits), needed when
    kd_weight > 0."""
    config = drafter.config
    gamma = labels.shape[1]
    hidden = draft_hidden(drafter, parts, capture, anchors, block, lengths)
    logits = drafter.logits(hidden, parts.lm_head).astype(mx.float32)
    label_logit = mx.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    ce = mx.logsumexp(logits, axis=-1) - label_logit  # [n, gamma]
    counts = (mx.arange(gamma)[None, :] < lengths[:, None]).astype(mx.float32)
    w = weights[None, :] * counts
    total_w = mx.maximum(w.sum(), 1e-6)
    block_ce = (ce * w).sum() / total_w
    blocks = mx.maximum((lengths > 0).sum(), 1)
    first_right = (mx.argmax(mx.stop_gradient(logits[:, 0]), axis=-1) == labels[:, 0]) & (lengths > 0)
    metrics = {"block_ce": block_ce, "acc1": first_right.sum() / blocks}
    total = block_ce
    if kd_weight > 0:
        soft_ce, entropy = soft_cross_entropy(logits, teacher)
        soft = (soft_ce * w).sum() / total_w
        total = (1 - kd_weight) * block_ce + kd_weight * soft
        metrics["kd_kl"] = ((soft_ce - entropy) * w).sum() / total_w
    if config.is_dflash2:
        sel_ce, in_top, correct = selector_loss(
            drafter.candidate_selector, hidden, logits, block[:, 0], labels, config.selector_top_k)
        sel = (sel_ce * w).sum() / total_w
        total = total + selector_weight * sel
        metrics["selector_ce"] = sel
        metrics["in_top_k"] = (in_top.astype(mx.float32) * counts).sum() / mx.maximum(counts.sum(), 1)
        metrics["selector_acc"] = ((correct & in_top).astype(mx.float32) * counts).sum() / mx.maximum(counts.sum(), 1)
    metrics["loss"] = total
    return total, metrics
