"""The residual scale (engine/drafter.py, DraftModel.scale_residual): dividing the residual
stream by S and the RMSNorm epsilon by S^2 computes, in float32, what the unscaled pass
computes: hidden rows, logits and every probed buffer (which a scaled pass hands over in the
unscaled units); for a power of two, bit for bit."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from conftest import DRAFTERS

from dflash_tui.engine.checkpoint import load_drafter
from dflash_tui.engine.drafter import block_masks


def _forward(drafter, capture, x, lm_head):
    """The context path and one block, as a session runs them; returns logits and probes."""
    seen = {}

    def probe(name, layer, tensor):
        seen[(name, layer)] = np.array(tensor.astype(mx.float32))

    ctx = drafter.project_context(capture, probe)
    kv = drafter.context_kv(ctx, 0, probe)
    masks = block_masks(drafter.config, [capture.shape[1]] * len(kv), x.shape[1])
    hidden = drafter.block_hidden(x, kv, capture.shape[1], masks, probe)
    return np.array(drafter.logits(hidden, lm_head)), seen


@pytest.mark.parametrize("drafter_kind", DRAFTERS)
@pytest.mark.parametrize("scale", [8.0, 10.0, 0.25])
def test_a_scaled_float32_pass_computes_what_the_unscaled_one_does(make_pair, drafter_kind, scale):
    _, draft_dir = make_pair("llama", drafter_kind)
    plain, scaled = load_drafter(draft_dir), load_drafter(draft_dir)
    scaled.scale_residual(scale)
    config = plain.config
    rng = np.random.default_rng(0)
    capture = mx.array(3 * rng.standard_normal((1, 9, len(config.target_layer_ids) * config.hidden_size)),
                       dtype=mx.float32)
    x = mx.array(rng.standard_normal((1, 5, config.hidden_size)), dtype=mx.float32)
    head = mx.array(rng.standard_normal((config.vocab_size, config.hidden_size)), dtype=mx.float32)
    lm_head = lambda h: h @ head.T  # noqa: E731
    want, want_probes = _forward(plain, capture, x, lm_head)
    got, got_probes = _forward(scaled, capture, x, lm_head)
    assert scaled.norm.eps == pytest.approx(config.rms_norm_eps / scale**2)
    assert got_probes.keys() == want_probes.keys()
    if np.log2(scale).is_integer():
        # dividing by a power of two is exact, and so is every norm of it: the same bits
        np.testing.assert_array_equal(got, want)
        for key, value in want_probes.items():
            np.testing.assert_array_equal(got_probes[key], value, err_msg=str(key))
        return
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    for key, value in want_probes.items():
        np.testing.assert_allclose(got_probes[key], value, rtol=1e-4, atol=1e-4 * np.abs(value).max(),
                                   err_msg=str(key))


def test_the_unscaled_pass_is_untouched_by_default(make_pair):
    _, draft_dir = make_pair("llama", "DFlash2DraftModel")
    drafter = load_drafter(draft_dir)
    assert drafter.residual_scale == 1.0 and all(l.residual_scale == 1.0 for l in drafter.layers)
    assert drafter.norm.eps == drafter.config.rms_norm_eps
