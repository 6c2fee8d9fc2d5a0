"""Z Lab's checkpoint format: layouts the loader must accept, what it refuses (strictly, by
tensor and key), and what save writes."""

from __future__ import annotations

import json

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten

from fixtures import drafter_tensors, write_drafter

from dflash_tui.cli import main
from dflash_tui.engine.checkpoint import expected_shapes, load_drafter, save_drafter
from dflash_tui.engine.draft_config import parse_config, read_config
from dflash_tui.engine.errors import InputError


def _params(model):
    return {k: np.array(v) for k, v in tree_flatten(model.parameters())}


def test_dflash_prefix_loads_the_same_weights(make_pair, tmp_path):
    _, draft_dir = make_pair("llama", "DFlash2DraftModel")
    config = json.loads((draft_dir / "config.json").read_text())
    prefixed = write_drafter(tmp_path / "prefixed", config, seed=1, prefix="dflash.")
    keys = mx.load(str(prefixed / "model.safetensors")).keys()
    assert all(k.startswith("dflash.") for k in keys)
    a, b = _params(load_drafter(draft_dir)), _params(load_drafter(prefixed))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_top_level_block_and_rope_parameters(make_pair, tmp_path):
    _, draft_dir = make_pair("llama", "DFlashDraftModel")
    config = json.loads((draft_dir / "config.json").read_text())
    block = config["dflash_config"].pop("block_size")
    config["block_size"] = block
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": 5e5}
    del config["rope_theta"]
    parsed = parse_config(config)
    assert parsed.block_size == block and parsed.rope_theta == 5e5


def test_save_round_trips_config_and_weights(make_pair, tmp_path):
    _, draft_dir = make_pair("qwen35", "DFlash2DraftModel")
    model = load_drafter(draft_dir)
    out = save_drafter(model, tmp_path / "saved", dtype=mx.bfloat16,
                       metadata={"dflash_tui_training": {"steps": 3}})
    assert read_config(out / "config.json") == read_config(out / "config.json")
    again = load_drafter(out)
    assert again.config.extra == {"dflash_tui_training": {"steps": 3}}
    saved_cfg, orig_cfg = read_config(out / "config.json"), read_config(draft_dir / "config.json")
    orig_cfg.extra = saved_cfg.extra
    assert saved_cfg == orig_cfg
    a, b = _params(model), _params(again)
    assert all(np.allclose(a[k], b[k], atol=1e-2 * (1 + np.abs(a[k]).max())) for k in a)
    tensors = mx.load(str(out / "model.safetensors"))
    assert "candidate_selector.predecessor_codebook" in tensors  # no `.weight` suffix
    assert set(tensors) == set(drafter_tensors(json.loads((draft_dir / "config.json").read_text())))


def test_expected_shapes_are_the_models_own(make_pair):
    """Derived from the module tree, so they cannot drift from what load_weights wants."""
    for kind, count in (("DFlashDraftModel", 3 + 2 * 11), ("DFlash2DraftModel", 3 + 2 * 15 + 3)):
        _, draft_dir = make_pair("llama", kind)
        config = read_config(draft_dir / "config.json")
        shapes = expected_shapes(config)
        assert len(shapes) == count
        h, n_ctx = config.hidden_size, len(config.target_layer_ids)
        assert shapes["fc.weight"] == (h, n_ctx * h)
        assert shapes["layers.1.self_attn.o_proj.weight"] == (h, config.num_attention_heads * config.head_dim)


def _drafter_copy(make_pair, tmp_path, edit_config=None, edit_tensors=None):
    _, draft_dir = make_pair("llama", "DFlash2DraftModel")
    config = json.loads((draft_dir / "config.json").read_text())
    tensors = drafter_tensors(config)
    if edit_config:
        edit_config(config)
    if edit_tensors:
        edit_tensors(tensors)
    return write_drafter(tmp_path / "draft", config, tensors=tensors)


def _refused(directory, *needles):
    with pytest.raises(InputError) as caught:
        load_drafter(directory)
    for needle in needles:
        assert needle in str(caught.value), (needle, str(caught.value))


def test_an_unexpected_tensor_is_refused_by_name(make_pair, tmp_path):
    draft = _drafter_copy(make_pair, tmp_path, edit_tensors=lambda t: t.update(
        {"layers.0.mlp.extra_proj.weight": np.zeros((4, 4), np.float32)}))
    _refused(draft, str(draft / "model.safetensors"), "unexpected tensor 'layers.0.mlp.extra_proj.weight'")


def test_a_tensor_in_two_files_is_refused(make_pair, tmp_path):
    draft = _drafter_copy(make_pair, tmp_path)
    mx.save_safetensors(str(draft / "more.safetensors"), {"norm.weight": mx.ones((64,))})
    _refused(draft, "more.safetensors", "'norm.weight'", "model.safetensors")


@pytest.mark.parametrize("value", [8.5, "8", True])
def test_block_size_must_be_an_integer(make_pair, tmp_path, value):
    draft = _drafter_copy(make_pair, tmp_path,
                          edit_config=lambda c: c["dflash_config"].update(block_size=value))
    _refused(draft, "block_size", repr(value), "expected a whole number")


def test_a_block_beyond_the_drafters_positions_is_refused(make_pair, tmp_path):
    draft = _drafter_copy(make_pair, tmp_path,
                          edit_config=lambda c: c["dflash_config"].update(block_size=5000))
    _refused(draft, "block_size 5000", "max_position_embeddings 4096")


def test_an_unusually_large_block_runs_with_a_note(make_pair, tmp_path, capsys):
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    draft = _drafter_copy(make_pair, tmp_path,
                          edit_config=lambda c: c["dflash_config"].update(block_size=999))
    assert main(["probe", str(target_dir), "--draft", str(draft), "--prompt", "x",
                 "--block", "2", "--max-tokens", "2", "--no-probes"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert any("block_size 999" in line and "998" in line for line in notes), notes
