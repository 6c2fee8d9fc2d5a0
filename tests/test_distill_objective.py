"""The training forward is the engine's forward: packed blocks, masks, losses, the walk."""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_map

from dflash_tui_distill.architecture import build_config, init_drafter, zlab_layer_ids
from dflash_tui_distill.dataset import Sequences
from dflash_tui_distill.evaluate import accepted_lengths, eval_blocks, walk_proposals
from dflash_tui_distill.objective import (draft_hidden, label_logits, losses, selector_loss,
                                          slot_weights, soft_cross_entropy, target_features,
                                          target_features_and_logits, target_parts)
from dflash_tui_distill.settings import TrainSettings
from dflash_tui.engine.drafter import block_masks
from dflash_tui.engine.selector import lattice_arrays, to_lattice, walk
from dflash_tui.engine.target import load_target

GAMMA = 5
ANCHORS = np.array([[5, 17, 30], [9, 22, 33]])


@pytest.fixture(scope="module")
def setup(make_pair):
    target_dir, _ = make_pair("llama")
    target = load_target(target_dir)
    config = build_config(target, TrainSettings(gamma=GAMMA, layers=2, rank=8, top_k=8), 3)
    drafter = init_drafter(config, 0)
    # Move every weight off its neat initial value so convs, codebooks and norms all matter.
    mx.random.seed(1)
    drafter.update(tree_map(lambda p: p + 0.05 * mx.random.normal(p.shape), drafter.parameters()))
    target.hook(config.target_layer_ids)
    ids = mx.array(np.random.default_rng(0).integers(4, 300, size=(2, 40)).astype(np.int32))
    capture = target_features(target, ids)
    mx.eval(capture)
    yield target, config, drafter, ids, capture
    target.unhook()


def blocks_for(ids, config, gamma=GAMMA):
    block = np.full((*ANCHORS.shape, gamma + 1), config.mask_token_id, dtype=np.int32)
    block[:, :, 0] = np.take_along_axis(np.array(ids), ANCHORS, axis=1)
    return mx.array(ANCHORS.reshape(-1).astype(np.int32)), mx.array(block.reshape(-1, gamma + 1))


def labelled_blocks(ids, config):
    """blocks_for's blocks with their labels, some short or empty lengths, and slot weights."""
    anchors, block = blocks_for(ids, config)
    offsets = ANCHORS[:, :, None] + np.arange(1, GAMMA + 1)
    labels = mx.array(np.take_along_axis(np.array(ids)[:, None, :], offsets, axis=2).reshape(6, GAMMA))
    return anchors, block, labels, mx.array([GAMMA, GAMMA, 2, 0, GAMMA, 1]), slot_weights(GAMMA, 7.0)


def packed_logits(drafter, target, config, capture, anchors, block, lengths):
    parts = target_parts(target, config)
    hidden = draft_hidden(drafter, parts, capture, anchors, block, lengths)
    return drafter.logits(hidden, parts.lm_head)


def test_packed_blocks_equal_the_engine_inference_forward(setup):
    target, config, drafter, ids, capture = setup
    anchors, block = blocks_for(ids, config)
    logits = packed_logits(drafter, target, config, capture, anchors, block, mx.array([GAMMA] * 6))
    parts = target_parts(target, config)
    for n, a in enumerate(ANCHORS.reshape(-1)):
        b = n // ANCHORS.shape[1]
        # Inference: context K/V of rows 0..a-1 only, one block, the engine's own masks.
        kv = drafter.context_kv(drafter.project_context(capture[b:b + 1, :a]), 0)
        x = target.embed_tokens(block[n:n + 1]) * parts.embed_scale
        masks = block_masks(config, [int(a)] * len(drafter.layers), GAMMA + 1)
        reference = drafter.logits(drafter.block_hidden(x, kv, int(a), masks)[0, 1:], parts.lm_head)
        assert mx.allclose(reference, logits[n], atol=1e-4).item(), f"block {n} at anchor {a}"


def test_a_block_sees_only_the_context_before_its_anchor(setup):
    target, config, drafter, ids, capture = setup
    anchors, block = blocks_for(ids, config)
    lengths = mx.array([GAMMA] * 6)
    base = packed_logits(drafter, target, config, capture, anchors, block, lengths)
    # Change sequence 0's capture at row 17: the anchor of block 1 (never visible to it),
    # after block 0's anchor (5), before block 2's (30).
    changed = packed_logits(drafter, target, config, capture.at[0, 17].add(3.0), anchors, block, lengths)
    diff = mx.abs(changed - base).max(axis=(1, 2))
    assert diff[0].item() == 0.0 and diff[1].item() == 0.0, "a block saw its anchor's row or later"
    assert diff[2].item() > 1e-3, "a block did not see an earlier context row"
    assert (diff[3:] == 0).all().item(), "blocks of another sequence changed"


def test_a_short_block_computes_what_an_inference_block_of_that_length_computes(setup):
    target, config, drafter, ids, capture = setup
    g = 2
    anchors, block = blocks_for(ids, config)
    long = packed_logits(drafter, target, config, capture, anchors, block, mx.array([g] * 6))
    _, short_block = blocks_for(ids, config, gamma=g)
    short = packed_logits(drafter, target, config, capture, anchors, short_block, mx.array([g] * 6))
    assert mx.allclose(long[:, :g], short, atol=1e-4).item()
    full = packed_logits(drafter, target, config, capture, anchors, block, mx.array([GAMMA] * 6))
    assert not mx.allclose(full[:, :g], short, atol=1e-4).item(), "hidden rows made no difference"


def test_slot_weights_decay_as_exp_minus_k_minus_1_over_7():
    w = np.array(slot_weights(15, 7.0))
    assert w[0] == 1.0
    assert np.allclose(w, [math.exp(-(k - 1) / 7) for k in range(1, 16)])
    assert np.isclose(w[7], math.exp(-1.0))


def test_block_loss_is_the_weighted_mean_of_slot_cross_entropies(setup):
    target, config, drafter, ids, capture = setup
    anchors, block, labels, lengths, weights = labelled_blocks(ids, config)
    _, metrics = losses(drafter, target_parts(target, config), capture, anchors, block, labels,
                        lengths, weights, selector_weight=0.5)
    logits = np.array(packed_logits(drafter, target, config, capture, anchors, block, lengths), dtype=np.float64)
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(-1, keepdims=True)
    ce = -np.take_along_axis(logp, np.array(labels)[..., None], axis=-1)[..., 0]
    w = np.array(weights)[None] * (np.arange(GAMMA)[None] < np.array(lengths)[:, None])
    assert np.isclose(metrics["block_ce"].item(), (ce * w).sum() / w.sum(), rtol=1e-4)
    assert np.isclose(metrics["loss"].item(),
                      metrics["block_ce"].item() + 0.5 * metrics["selector_ce"].item(), rtol=1e-5)


def test_soft_labels_are_the_target_rows_that_chose_each_label(setup):
    target, config, drafter, ids, capture = setup
    anchors, _ = blocks_for(ids, config)
    _, logits = target_features_and_logits(target, ids)
    teacher = np.array(label_logits(logits, anchors, GAMMA))
    full = np.array(logits)
    for n, a in enumerate(ANCHORS.reshape(-1)):
        row = n // ANCHORS.shape[1]
        # slot k's label is token a + k; the row that predicted it is a + k - 1
        assert np.array_equal(teacher[n], full[row, a:a + GAMMA])


def test_soft_cross_entropy_is_minus_sum_p_log_q_and_its_kl_to_itself_is_zero():
    rng = np.random.default_rng(3)
    q, t = (rng.normal(size=(4, 3, 50)).astype(np.float32) * 3 for _ in range(2))
    ce, entropy = soft_cross_entropy(mx.array(q), mx.array(t))
    logsm = lambda x: x - np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)) - x.max(-1, keepdims=True)  # noqa: E731
    p = np.exp(logsm(t.astype(np.float64)))
    assert np.allclose(np.array(ce), -(p * logsm(q.astype(np.float64))).sum(-1), rtol=1e-5)
    assert np.allclose(np.array(entropy), -(p * np.log(p)).sum(-1), rtol=1e-5)
    same, h = soft_cross_entropy(mx.array(t), mx.array(t))
    assert np.allclose(np.array(same) - np.array(h), 0.0, atol=1e-5)


def test_kd_weight_mixes_the_soft_and_the_greedy_block_loss(setup):
    target, config, drafter, ids, capture = setup
    anchors, block, labels, lengths, weights = labelled_blocks(ids, config)
    parts = target_parts(target, config)
    _, logits = target_features_and_logits(target, ids)
    teacher = label_logits(logits, anchors, GAMMA)
    plain = losses(drafter, parts, capture, anchors, block, labels, lengths, weights, 0.0)[1]
    mixed = losses(drafter, parts, capture, anchors, block, labels, lengths, weights, 0.0,
                   teacher, kd_weight=0.25)[1]
    drafted = packed_logits(drafter, target, config, capture, anchors, block, lengths)
    soft, _ = soft_cross_entropy(drafted.astype(mx.float32), teacher)
    w = np.array(weights)[None] * (np.arange(GAMMA)[None] < np.array(lengths)[:, None])
    soft_mean = (np.array(soft) * w).sum() / w.sum()
    assert np.isclose(mixed["loss"].item(), 0.75 * plain["block_ce"].item() + 0.25 * soft_mean, rtol=1e-4)
    assert mixed["kd_kl"].item() > 0  # a random drafter is far from the target
    assert "kd_kl" not in plain and np.isclose(plain["loss"].item(), plain["block_ce"].item())


def test_selector_loss_swaps_a_missing_label_in_for_the_lowest_candidate():
    from fixtures import zlab_config  # tests/ is on pytest's pythonpath (pyproject.toml)

    from dflash_tui.engine.draft_config import parse_config
    from dflash_tui.engine.drafter import CandidateSelector

    config = parse_config(zlab_config("DFlash2DraftModel", vocab=10, target_layers=4,
                                      layer_ids=[1], mask_token_id=3))
    selector = CandidateSelector(config)
    selector.predecessor_codebook = mx.zeros((10, config.selector_rank))  # edges all 0
    logits = mx.array([[[9.0, 8, 7, 6, 5, 4, 3, 2, 1, 0]]])  # one block, one slot
    hidden = mx.zeros((1, 1, config.hidden_size))
    # K = 3: candidates 0, 1, 2. Label 1 is in; label 7 is not and replaces candidate 2.
    ce_in, in_top, _ = selector_loss(selector, hidden, logits, mx.array([0]), mx.array([[1]]), 3)
    ce_out, out_top, _ = selector_loss(selector, hidden, logits, mx.array([0]), mx.array([[7]]), 3)
    assert in_top.item() and not out_top.item()
    assert np.isclose(ce_in.item(), np.log(np.exp([9, 8, 7]).sum()) - 8, rtol=1e-5)
    assert np.isclose(ce_out.item(), np.log(np.exp([9, 8, 2]).sum()) - 2, rtol=1e-5)


def test_batched_walk_is_the_engine_selector_walk(setup):
    target, config, drafter, ids, capture = setup
    selector = drafter.candidate_selector
    saved = (selector.predecessor_codebook, selector.successor_codebook)
    # Large codebooks: edges big enough that the walk leaves the argmax path.
    selector.predecessor_codebook = saved[0] * 40
    selector.successor_codebook = saved[1] * 40
    try:
        _check_walk(target, config, drafter, ids, capture)
    finally:
        selector.predecessor_codebook, selector.successor_codebook = saved


def _check_walk(target, config, drafter, ids, capture):
    anchors, block = blocks_for(ids, config)
    parts = target_parts(target, config)
    hidden = draft_hidden(drafter, parts, capture, anchors, block, mx.array([GAMMA] * 6))
    logits = drafter.logits(hidden, parts.lm_head).astype(mx.float32)
    batched = np.array(walk_proposals(drafter.candidate_selector, hidden, logits, block[:, 0],
                                      config.selector_top_k))
    leaves = 0
    for n in range(6):
        hproj = drafter.candidate_selector.hidden_projection(hidden[n])
        arrays = lattice_arrays(drafter.candidate_selector, hproj, logits[n], int(block[n, 0]),
                                config.selector_top_k)
        lattice = to_lattice(*(np.array(a) for a in arrays))
        picks, _ = walk(lattice, 0.0, None)
        engine = [int(lattice.candidates[s, i]) for s, i in enumerate(picks)]
        assert batched[n].tolist() == engine
        leaves += sum(int(i) != 0 for i in picks)
    assert leaves > 0, "the walk never left the argmax path: the test cannot tell the two apart"


def test_accepted_length_is_the_longest_matching_prefix():
    proposals = np.array([[1, 2, 3], [1, 9, 3], [0, 2, 3], [1, 2, 3]])
    labels = np.array([[1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 4]])
    assert accepted_lengths(proposals, labels).tolist() == [3, 1, 0, 2]


def test_eval_anchors_cover_whole_continuations_not_just_their_openings():
    # 200 held-out sequences: prompt 10 tokens, continuation 100; one anchor each, then four
    n, prompt, length, gamma = 200, 10, 110, 7
    seqs = Sequences([np.arange(length)] * n, np.full(n, prompt), ["code"] * n,
                     np.arange(n), [""] * n)
    first, last = prompt, length - 1 - gamma
    for per in (1, 4):
        blocks = eval_blocks(seqs, per * n, seq_len=512, max_gamma=gamma)
        anchors = blocks.anchors[blocks.anchors >= 0]
        assert blocks.per_sequence == per and len(anchors) == per * n
        assert anchors.min() >= first and anchors.max() <= last
        relative = (anchors - first) / (last - first)
        assert abs(relative.mean() - 0.5) < 0.05  # uniform over the continuation
        assert (anchors == first).mean() < 0.05  # not the opening of every answer
        again = eval_blocks(seqs, per * n, seq_len=512, max_gamma=gamma)
        assert np.array_equal(again.anchors, blocks.anchors)  # fixed: steps compare


def test_target_layer_ids_follow_zlab():
    assert zlab_layer_ids(30, 5) == [1, 8, 14, 20, 27]  # SmolLM2-135M
    assert zlab_layer_ids(36, 5) == [1, 9, 17, 25, 33]
    assert zlab_layer_ids(30, 1) == [15]
    assert zlab_layer_ids(4, 5) == [0, 1, 2, 3]  # too shallow for the rule: distinct layers


def test_compiled_step_matches_the_plain_step(setup):
    from dflash_tui_distill.batches import make_batch
    from dflash_tui_distill.dataset import Sequences
    from dflash_tui_distill.trainer import Trainer

    target, config, drafter, ids, capture = setup
    rows = np.array(ids)
    sequences = Sequences([r for r in rows], np.array([4, 4]), ["math"] * 2, np.arange(2), ["t"] * 2)
    batch = make_batch(sequences, np.arange(2), 4, 40, GAMMA, config.mask_token_id,
                       np.random.default_rng(0), 0.5)
    for kd_weight in (0.0, 0.5):
        settings = TrainSettings(gamma=GAMMA, layers=2, rank=8, top_k=8, steps=4, kd_weight=kd_weight)
        results = []
        for compiled in (False, True):
            trainer = Trainer(init_drafter(config, 3), target_parts(target, config), target, settings,
                              mx.float32, compile_step=compiled)
            results.append([trainer.train_step(batch).metrics["loss"] for _ in range(2)])
        assert np.allclose(results[0], results[1], rtol=1e-4)
        assert results[0][1] < results[0][0]


def test_a_quantized_drafter_computes_in_its_float_type_not_its_packed_one(setup):
    """distill's eval judges the 8-bit copy that ships. Its projections' weights are packed
    uint32: the packed forward must cast the features to the drafter's float type (casting
    them to fc.weight's dtype zeroed them, and stage 20's copy was judged at 0.2 per round).
    The quantized kernels must give what the same values in float give."""
    from dflash_tui.engine.quantize import dequantize_drafter, quantize_drafter

    target, config, drafter, ids, capture = setup
    packed = init_drafter(config, 0)
    packed.update(drafter.parameters())
    quantize_drafter(packed, bits=8, group_size=32)
    unpacked = init_drafter(config, 0)
    unpacked.update(drafter.parameters())
    quantize_drafter(unpacked, bits=8, group_size=32)
    dequantize_drafter(unpacked)
    assert packed.fc.weight.dtype == mx.uint32 and unpacked.fc.weight.dtype == mx.float32
    anchors, block = blocks_for(ids, config)
    lengths = mx.array([GAMMA] * 6)
    got = packed_logits(packed, target, config, capture, anchors, block, lengths)
    want = packed_logits(unpacked, target, config, capture, anchors, block, lengths)
    assert got.dtype == mx.float32
    assert mx.allclose(got, want, atol=1e-3, rtol=1e-3).item(), float(mx.abs(got - want).max())


@pytest.fixture(scope="module")
def quantized_selector(setup):
    """A DFlash2 drafter quantized as `dflash-tui quantize --bits 8 --group-size 32` makes it,
    its rank (32) splitting into groups so that the codebooks are QuantizedEmbeddings, beside
    the same values in float (dequantize_drafter)."""
    from dflash_tui.engine.quantize import dequantize_drafter, quantize_drafter

    target, _, _, ids, capture = setup
    config = build_config(target, TrainSettings(gamma=GAMMA, layers=1, rank=32, top_k=8), 3)
    mx.random.seed(2)
    weights = tree_map(lambda p: p + 0.05 * mx.random.normal(p.shape), init_drafter(config, 0).parameters())
    pair = []
    for dequantize in (False, True):
        drafter = init_drafter(config, 0)
        drafter.update(weights)
        quantize_drafter(drafter, bits=8, group_size=32)
        if dequantize:
            dequantize_drafter(drafter)
        pair.append(drafter)
    packed, unpacked = pair
    assert type(packed.candidate_selector.successor_codebook).__name__ == "QuantizedEmbedding"
    assert isinstance(unpacked.candidate_selector.successor_codebook, mx.array)
    held = Sequences(tokens=[np.array(row) for row in np.array(ids)], prompt_lens=np.array([4, 6]),
                     kinds=["prose", "code"], prompt_index=np.arange(2), texts=["a", "b"])
    return target, config, packed, unpacked, held


def test_the_eval_walks_a_quantized_selector_as_its_float_values(quantized_selector):
    """distill's eval (final, periodic and as decoded) of a `dflash-tui quantize`d DFlash2
    drafter: its codebooks are QuantizedEmbeddings, which the edge score indexed like arrays
    (a KeyError traceback where the eval should have judged the copy that ships). The walk
    must be what the same values in float walk."""
    from dflash_tui_distill.decode_eval import decode_acceptance
    from dflash_tui_distill.evaluate import evaluate

    target, config, packed, unpacked, held = quantized_selector
    parts = target_parts(target, config)
    blocks = eval_blocks(held, 12, 40, GAMMA)
    got, want = (evaluate(d, parts, target, held, blocks, [2, GAMMA], 40, batch=2)
                 for d in (packed, unpacked))
    assert got["blocks"] == want["blocks"] > 0
    assert got["gamma"] == want["gamma"]
    got, want = (decode_acceptance(d, parts, target, held, [GAMMA], 40, batch=2)
                 for d in (packed, unpacked))
    assert got == want and want["gamma"][str(GAMMA)]["rounds"] > 0


def test_a_quantized_selector_scores_edges_as_its_float_values(quantized_selector):
    """The edge scores themselves, within what quantized kernels allow against float."""
    from dflash_tui_distill.objective import edge_scores

    target, config, packed, unpacked, held = quantized_selector
    rng = np.random.default_rng(4)
    previous = mx.array(rng.integers(0, config.vocab_size, size=(6, GAMMA)).astype(np.int32))
    candidates = mx.array(rng.integers(0, config.vocab_size, size=(6, GAMMA, 8)).astype(np.int32))
    hproj = mx.array(rng.normal(size=(6, GAMMA, 32)).astype(np.float32))
    got = edge_scores(packed.candidate_selector, previous, hproj, candidates)
    want = edge_scores(unpacked.candidate_selector, previous, hproj, candidates)
    assert mx.allclose(got, want, atol=1e-4, rtol=1e-3).item(), float(mx.abs(got - want).max())
