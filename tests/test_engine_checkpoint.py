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


def _probe_notes(capsys, target_dir, draft, *flags):
    assert main(["probe", str(target_dir), "--draft", str(draft), "--prompt", "x",
                 "--rounds", "1", *flags]) == 0
    said = capsys.readouterr()
    return [line for line in said.err.splitlines() if line.startswith("note:")], said.out + said.err


def test_a_nan_in_a_weight_is_named_by_file_and_tensor(make_pair, tmp_path, capsys):
    """A porter's NaN in one norm weight: the probes can only say where the NaN starts (the
    norm's output); the note names the tensor and its file before the first round."""
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")

    def poison(tensors):
        tensors["layers.1.post_attention_layernorm.weight"][5] = np.nan

    draft = _drafter_copy(make_pair, tmp_path, edit_tensors=poison)
    notes, said = _probe_notes(capsys, target_dir, draft)
    assert notes == ["note: model.safetensors: tensor 'layers.1.post_attention_layernorm.weight' "
                     "holds 1 NaN (of 64 values): the buffers computed from it will be non-finite"]
    assert "FIRST NON-FINITE: draft layer 1 normed2" in said, said
    assert load_drafter(draft).weight_notes.notes == tuple(n.removeprefix("note: ") for n in notes)


def test_a_weight_beyond_float16_is_named_when_float16_casts_it(make_pair, tmp_path, capsys):
    """Finite as stored, Inf once `--dtype float16` casts it: said only in float16, with the
    stored absmax; a weight that was fine says nothing."""
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")

    def enlarge(tensors):
        tensors["layers.0.mlp.down_proj.weight"][0, :3] = [1e5, -2e5, 7e4]

    draft = _drafter_copy(make_pair, tmp_path, edit_tensors=enlarge)
    notes, _ = _probe_notes(capsys, target_dir, draft, "--dtype", "float16")
    assert notes == ["note: model.safetensors: tensor 'layers.0.mlp.down_proj.weight' holds 3 "
                     "Infs (of 8,192 values) once cast to float16: its largest value, 2e+05, is "
                     "beyond float16's range"]
    notes, _ = _probe_notes(capsys, target_dir, draft)
    assert notes == []


def test_many_nonfinite_tensors_are_named_three_and_counted(make_pair, tmp_path):
    def poison(tensors):
        for i in range(2):
            for name in ("input_layernorm", "post_attention_layernorm"):
                tensors[f"layers.{i}.{name}.weight"][0] = np.inf
    notes = load_drafter(_drafter_copy(make_pair, tmp_path, edit_tensors=poison)).weight_notes.notes
    assert len(notes) == 4 and notes[-1] == "1 more drafter tensors hold NaN or Inf"
    assert all("holds 1 Inf (of 64 values)" in note for note in notes[:3])


def test_a_block_size_given_twice_differently_is_noted(make_pair, tmp_path, capsys):
    """block_size at the top level and in dflash_config, disagreeing: the nested one runs (as
    Z Lab's loader reads it), and a note names both, where it used to pass in silence."""
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    draft = _drafter_copy(make_pair, tmp_path, edit_config=lambda c: (
        c["dflash_config"].update(block_size=4), c.update(block_size=16)))
    notes, said = _probe_notes(capsys, target_dir, draft, "--no-probes")
    assert notes == [f"note: {draft / 'config.json'}: dflash_config.block_size = 4 but block_size "
                     "= 16 at the top level; the drafter runs with dflash_config's 4 (as Z Lab's "
                     "loader reads it)"]
    assert "3 proposals per round" in said, said
    agreeing = _drafter_copy(make_pair, tmp_path / "agreeing", edit_config=lambda c: c.update(
        block_size=c["dflash_config"]["block_size"]))
    assert read_config(agreeing / "config.json").notes == ()
    saved = save_drafter(load_drafter(draft), tmp_path / "saved")  # one value, in both places
    assert read_config(saved / "config.json").notes == ()


@pytest.mark.parametrize("ids", [[3, 2, 1], [1, 1, 3]])
def test_target_layer_ids_out_of_order_or_repeated_are_noted(make_pair, tmp_path, capsys, ids):
    """fc's column blocks follow the ids' order, so ids reordered by hand (or a layer given
    twice) feed the right layers into the wrong blocks and accept little, with every buffer
    finite: it runs, with a note naming the field."""
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    draft = _drafter_copy(make_pair, tmp_path,
                          edit_config=lambda c: c["dflash_config"].update(target_layer_ids=ids))
    notes, _ = _probe_notes(capsys, target_dir, draft, "--no-probes")
    assert notes == [f"note: dflash_config.target_layer_ids = {ids} are not in ascending order "
                     "without repeats (Z Lab's drafters list them so); fc reads the captured "
                     "layers in the order given"]
