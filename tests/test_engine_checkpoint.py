"""Z Lab's checkpoint format: layouts the loader must accept, and what save writes."""

from __future__ import annotations

import json

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

from fixtures import drafter_tensors, write_drafter

from dflash_tui.engine.checkpoint import load_drafter, save_drafter
from dflash_tui.engine.draft_config import parse_config, read_config


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
