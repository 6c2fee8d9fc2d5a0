"""How distill loads its target: dequantized by default, or quantized as is."""

from __future__ import annotations

import mlx.core as mx
import pytest

from dflash_tui_distill.target_setup import load_for_distill, retype, target_dtype_name

from fixtures import write_quantized_llama_target


@pytest.mark.parametrize("dequantize", [True, False])
def test_the_target_type_named_is_the_float_type_it_computes_in(tmp_path, dequantize):
    """With --keep-quantized the embedding's weight is packed uint32; the training record and
    the train line name the type the target computes in (they read `mlx.core.uint32`), and
    the type is what decides whether the eval phase loads the target again."""
    target = load_for_distill(write_quantized_llama_target(tmp_path / "q4"), "float32", dequantize)
    assert target_dtype_name(target) == "float32"


def test_a_retyped_target_computes_in_its_new_type_with_its_projections_fused(make_pair):
    """On a GPU the target's q/k/v and gate/up projections are fused (a copy of their weights
    concatenated): `distill --phase all` loads it in float32 for the data, then retypes it to
    bfloat16 for training. The cast must reach the fused copy, or training's forwards (all of
    more than one row) computed those projections in float32 and held both copies."""
    from dflash_tui.engine.target import load_target

    target_dir, _ = make_pair("llama")
    retyped = retype(load_target(target_dir, "float32", fuse=True), "bfloat16")
    loaded = load_target(target_dir, "bfloat16", fuse=True)
    assert retyped.fusion.groups == loaded.fusion.groups > 0
    ids = mx.array([[5, 6, 7, 8, 9, 10]])
    for target in (retyped, loaded):
        target.hook((1, 2))
    (got, got_capture), (want, want_capture) = retyped.forward(ids), loaded.forward(ids)
    assert got.dtype == got_capture.dtype == mx.bfloat16
    assert mx.array_equal(got, want).item() and mx.array_equal(got_capture, want_capture).item()


def test_the_eval_judges_with_a_dequantized_float32_target_even_after_keep_quantized_training(tmp_path):
    """The eval phase's numbers are the bench's, which dequantizes the target by default: a
    target kept quantized for training (and now named float32, its compute type) is loaded
    again for it; a float32 one is reused."""
    from dflash_tui_distill.target_setup import eval_target, is_quantized

    path = write_quantized_llama_target(tmp_path / "q4")
    kept = load_for_distill(path, "float32", dequantize=False)
    judged = eval_target(kept, path)
    assert is_quantized(kept.model) and not is_quantized(judged.model)
    assert target_dtype_name(judged) == "float32"
    assert eval_target(judged, path) is judged
