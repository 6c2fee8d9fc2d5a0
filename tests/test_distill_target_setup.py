"""How distill loads its target: dequantized by default, or quantized as is."""

from __future__ import annotations

import pytest

from dflash_tui_distill.target_setup import load_for_distill, target_dtype_name

from fixtures import write_quantized_llama_target


@pytest.mark.parametrize("dequantize", [True, False])
def test_the_target_type_named_is_the_float_type_it_computes_in(tmp_path, dequantize):
    """With --keep-quantized the embedding's weight is packed uint32; the training record and
    the train line name the type the target computes in (they read `mlx.core.uint32`), and
    the type is what decides whether the eval phase loads the target again."""
    target = load_for_distill(write_quantized_llama_target(tmp_path / "q4"), "float32", dequantize)
    assert target_dtype_name(target) == "float32"
