"""An mlx-community style quantized target (mlx-lm's own 4-bit format) loads and decodes
losslessly, kept quantized or dequantized for the CPU."""

from __future__ import annotations

import json

import pytest

from fixtures import target_facts, write_drafter, write_quantized_llama_target, zlab_config
from greedy import greedy_tokens, load_reference

from dflash_tui.engine import SessionOptions, load_pair


@pytest.fixture(scope="module")
def quantized_pair(tmp_path_factory):
    target_dir = write_quantized_llama_target(tmp_path_factory.mktemp("q4") / "target")
    facts = target_facts(target_dir)
    config = zlab_config("DFlash2DraftModel", vocab=facts["vocab"], target_layers=facts["layers"],
                         layer_ids=[1, 2], mask_token_id=facts["mask"])
    write_drafter(target_dir / "draft", config)
    assert "quantization" in json.loads((target_dir / "config.json").read_text())
    return target_dir


@pytest.mark.parametrize("keep_quantized", [True, False])
def test_quantized_target_is_lossless(quantized_pair, keep_quantized):
    pair = load_pair(quantized_pair, keep_quantized=keep_quantized)
    target = pair.target
    assert target.spec.config["dequantized_for_cpu"] is (not keep_quantized)
    session = pair.open("def add(a, b):", options=SessionOptions(gamma=5, max_tokens=32))
    list(session.run())
    session.close()
    if keep_quantized:  # the very model mlx-lm would run
        model, _ = load_reference(str(quantized_pair))
    else:  # the dequantized weights, decoded one token at a time
        target.unhook()
        model = target.model
    assert session.generated == greedy_tokens(model, session.prompt_ids, 32, session.eos_ids)


@pytest.mark.parametrize("keep_quantized", [True, False])
def test_the_pair_says_when_its_target_is_kept_quantized(quantized_pair, keep_quantized):
    """`float32 on cpu` alone read the same for a target decoded from its 4-bit weights and
    for its dequantized float copy, whose logits differ."""
    said = load_pair(quantized_pair, keep_quantized=keep_quantized).describe()
    if keep_quantized:
        assert ", kept q4/g32), float32 on cpu" in said
    else:
        assert "kept" not in said and " layers), float32 on cpu" in said
