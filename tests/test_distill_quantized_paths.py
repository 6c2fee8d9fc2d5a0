"""distill's paths with a quantized model in them give what the same values in float give:
growing from a `dflash-tui quantize`d drafter, and training against a target kept quantized
(--keep-quantized). Each runs on the quantized model and on its float copy (MLX's own
dequantization), and the two must agree to what quantized kernels allow."""

from __future__ import annotations

from dataclasses import replace

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten

from dflash_tui.cli import main
from dflash_tui.engine.checkpoint import load_drafter
from dflash_tui_distill.architecture import build_config, init_drafter
from dflash_tui_distill.batches import Batch
from dflash_tui_distill.init_from import start_weights
from dflash_tui_distill.objective import target_parts
from dflash_tui_distill.settings import TrainSettings
from dflash_tui_distill.target_setup import load_for_distill
from dflash_tui_distill.trainer import Trainer

from fixtures import write_quantized_llama_target
from quantized_drafters import float_copy, float_drafter

GAMMA = 5


def test_growing_a_quantized_drafter_grows_its_float_values(make_pair, tmp_path):
    """--init-from Q --grow (more layers, a lower rank): the start is what growing the float
    copy gives, codebooks quantized too (rank 32 in groups of 32)."""
    target_dir, _ = make_pair("llama")
    packed = tmp_path / "q8"
    assert main(["quantize", str(float_drafter(target_dir, tmp_path / "float")), "--bits", "8",
                 "--group-size", "32", "--out", str(packed)]) == 0
    unpacked = float_copy(packed, tmp_path / "q8-float")
    config = load_drafter(unpacked).config
    deeper = replace(config, num_hidden_layers=config.num_hidden_layers + 1,
                     layer_types=config.layer_types + ("full_attention",), selector_rank=16)
    for grown_to in (None, deeper):
        got = dict(tree_flatten(start_weights(packed, {}, grown_to)))
        want = dict(tree_flatten(start_weights(unpacked, {}, grown_to)))
        assert sorted(got) == sorted(want)
        for name, value in want.items():
            assert got[name].dtype == value.dtype and mx.array_equal(got[name], value).item(), name


@pytest.fixture(scope="module")
def quantized_target(tmp_path_factory):
    return write_quantized_llama_target(tmp_path_factory.mktemp("q4-target") / "q4")


def test_training_against_a_kept_quantized_target_is_training_against_its_values(quantized_target):
    """--keep-quantized: the target's embedding and lm_head are a QuantizedEmbedding and a
    QuantizedLinear that the drafter borrows, with the soft labels (--kd-weight) from its
    logits. Three compiled steps give the losses and gradient norms the dequantized target's do."""
    rng = np.random.default_rng(0)
    ids = rng.integers(4, 300, size=(2, 40)).astype(np.int32)
    anchors = np.array([5, 17, 30, 9, 22, 33], np.int32)
    rows = np.repeat([0, 1], 3)
    labels = ids[rows[:, None], anchors[:, None] + np.arange(1, GAMMA + 1)].astype(np.int32)
    settings = TrainSettings(gamma=GAMMA, layers=1, rank=32, top_k=8, kd_weight=0.5, batch=2,
                             seq_len=40, steps=3)
    runs = {}
    for dequantize in (False, True):
        target = load_for_distill(quantized_target, "float32", dequantize)
        quantized = type(target.lm_head).__name__ == "QuantizedLinear"
        assert quantized is not dequantize
        config = build_config(target, settings, 3)
        block = np.full((6, GAMMA + 1), config.mask_token_id, np.int32)
        block[:, 0] = ids[rows, anchors]
        batch = Batch(ids=ids, anchors=anchors, block=block, labels=labels,
                      lengths=np.array([GAMMA, GAMMA, 2, 0, GAMMA, 1], np.int32))
        target.hook(config.target_layer_ids)
        trainer = Trainer(init_drafter(config, 0), target_parts(target, config), target,
                          settings, mx.float32)
        steps = [trainer.train_step(batch) for _ in range(3)]
        target.unhook()
        runs[dequantize] = [(s.metrics["loss"], s.metrics["kd_kl"], s.grad_norm) for s in steps]
    assert np.allclose(runs[False], runs[True], rtol=1e-3, atol=1e-5), runs
