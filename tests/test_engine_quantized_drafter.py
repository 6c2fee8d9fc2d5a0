"""Drafters quantized in mlx-lm's convention by someone else's code (Z Lab's model, mlx-lm's
quantize_model, tests/quantized_drafters.py) load through load_drafter, compute what their
dequantized weights compute, decode losslessly, and are refused by tensor when damaged."""

from __future__ import annotations

import json
import shutil

import mlx.core as mx
import numpy as np
import pytest

from conftest import TARGETS
from fixtures import write_drafter
from greedy import greedy_tokens, load_reference
from quantized_drafters import KEPT, RANK, dequantized_tensors, float_drafter, quantize_with_mlx_lm

from dflash_tui.engine import InputError, SessionOptions, load_drafter, load_pair
from dflash_tui.engine.checkpoint import expected_shapes
from dflash_tui.engine.draft_config import read_config

pytest.importorskip("dflash.model_mlx")

TOKENS = 40


@pytest.fixture(scope="module")
def quantized(make_pair, tmp_path_factory):
    """quantized(target_kind, drafter_kind) -> (target_dir, quantized dir, Z Lab's model)."""
    made = {}

    def get(target_kind="llama", drafter_kind="DFlash2DraftModel"):
        key = (target_kind, drafter_kind)
        if key not in made:
            target_dir, _ = make_pair(target_kind, "DFlash2DraftModel")
            root = tmp_path_factory.mktemp(f"q-{target_kind}-{drafter_kind}")
            source = float_drafter(target_dir, root / "float", drafter_kind)
            model = quantize_with_mlx_lm(source, root / "q4")
            made[key] = target_dir, root / "q4", model
        return made[key]

    return get


@pytest.mark.parametrize("target_kind", TARGETS)
def test_mlx_lm_quantized_drafter_decodes_losslessly(quantized, target_kind):
    target_dir, draft_dir, _ = quantized(target_kind)
    pair = load_pair(target_dir, draft_dir)
    session = pair.open("The quick brown fox",
                        options=SessionOptions(gamma=5, max_tokens=TOKENS))
    list(session.run())
    session.close()
    # one down projection in its own 8-bit, 64-group setting; the selector's projection float
    assert session.info.drafter_quantization == f"q4/g32+q8/g64, float: {KEPT}"
    model, _ = load_reference(str(target_dir))
    assert session.generated == greedy_tokens(model, session.prompt_ids, TOKENS, session.eos_ids)


@pytest.mark.parametrize("drafter_kind", ["DFlashDraftModel", "DFlash2DraftModel"])
def test_quantized_drafter_computes_what_its_dequantized_weights_do(quantized, tmp_path, drafter_kind):
    """Every module runs with the bits and group size it was packed with: the quantized
    drafter's logits and proposals equal those of a float drafter holding MLX's own
    dequantization of the same weights."""
    target_dir, draft_dir, model = quantized("llama", drafter_kind)
    config = json.loads((draft_dir / "config.json").read_text())
    del config["quantization"], config["quantization_config"]
    tensors = {name: np.array(value) for name, value in dequantized_tensors(model).items()}
    float_dir = write_drafter(tmp_path / "dequantized", config, tensors=tensors)

    def first_block(directory, keep_quantized=True):  # the quantized kernels, not the CPU's float
        pair = load_pair(target_dir, directory, keep_quantized=keep_quantized)
        session = pair.open("def add(a, b):",
                            options=SessionOptions(gamma=7, keep_raw=True))
        session.step_stage()  # context
        logits = session.step_stage().raw["draft/logits"]
        proposals = session.step_stage().proposals
        session.close()
        return logits, proposals

    (q_logits, q_props), (f_logits, f_props) = first_block(draft_dir), first_block(float_dir)
    assert np.abs(q_logits - f_logits).max() < 1e-4 * (1 + np.abs(f_logits).max())
    assert q_props == f_props
    # on the CPU the loader computes the quantized drafter in float (dequantize_for_cpu): the
    # same numbers as the quantized kernels, up to the order of the sums
    d_logits, d_props = first_block(draft_dir, keep_quantized=False)
    assert np.abs(d_logits - q_logits).max() < 1e-4 * (1 + np.abs(q_logits).max())
    assert d_props == q_props


def test_on_the_cpu_a_quantized_drafter_computes_in_float_and_keeps_its_label(quantized):
    """MLX's CPU quantized matmul is a plain loop, so the loader dequantizes the drafter
    there, as it does a small target: no quantized module is left, the label still names
    the packing, and the decode is the same, round by round, as with the kernels."""
    import mlx.nn as nn

    target_dir, draft_dir, _ = quantized("llama")

    def decode(keep_quantized):
        pair = load_pair(target_dir, draft_dir, keep_quantized=keep_quantized)
        session = pair.open("The quick brown fox", options=SessionOptions(gamma=5, max_tokens=TOKENS))
        accepted = [r.accepted for r in session.run()]
        session.close()
        packed = [p for p, m in pair.drafter.named_modules()
                  if isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding))]
        return packed, session.info.drafter_quantization, accepted, session.generated

    packed, label, accepted, text = decode(keep_quantized=False)
    kept_packed, kept_label, kept_accepted, kept_text = decode(keep_quantized=True)
    assert packed == [] and kept_packed
    assert label == kept_label == f"q4/g32+q8/g64, float: {KEPT}"
    assert (accepted, text) == (kept_accepted, kept_text)


def test_expected_shapes_of_a_quantized_config_follow_its_weights(quantized):
    _, draft_dir, _ = quantized()
    weights = mx.load(str(draft_dir / "model.safetensors"))
    shapes = expected_shapes(read_config(draft_dir / "config.json"), weights)
    assert set(shapes) == set(weights)
    # packed 32 / bits values to a uint32 word; one scale and bias per group of inputs
    assert shapes["layers.1.mlp.up_proj.weight"] == (128, 64 * 4 // 32)
    assert shapes["layers.1.mlp.up_proj.scales"] == (128, 64 // 32)
    assert shapes["layers.0.mlp.down_proj.weight"] == (64, 128 * 8 // 32)
    assert shapes["layers.0.mlp.down_proj.biases"] == (64, 128 // 64)
    vocab = weights["candidate_selector.successor_codebook.scales"].shape[0]
    assert shapes["candidate_selector.successor_codebook.weight"] == (vocab, 32 * 4 // 32)
    assert shapes["fc.weight"] == (64, 2 * 64 * 4 // 32)
    assert shapes[f"{KEPT}.weight"] == (RANK, 64)  # left float


@pytest.fixture
def damaged(quantized, tmp_path):
    """damaged(edit) -> a copy of the llama quantized drafter, its tensors and config edited."""
    _, draft_dir, _ = quantized()

    def make(edit_tensors=None, edit_config=None):
        copy = tmp_path / f"copy-{len(list(tmp_path.iterdir()))}"
        shutil.copytree(draft_dir, copy)
        if edit_tensors:
            weights = dict(mx.load(str(copy / "model.safetensors")))
            edit_tensors(weights)
            mx.save_safetensors(str(copy / "model.safetensors"), weights)
        if edit_config:
            config = json.loads((copy / "config.json").read_text())
            edit_config(config["quantization"])
            (copy / "config.json").write_text(json.dumps(config))
        return copy

    return make


def _refused(directory, *needles):
    with pytest.raises(InputError) as caught:
        load_drafter(directory)
    message = str(caught.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, (needle, message)


def test_wrong_biases_shape_names_the_tensor_both_shapes_and_the_setting(damaged):
    def edit(w):
        w["layers.1.mlp.up_proj.biases"] = w["layers.1.mlp.up_proj.biases"][:, :1]

    _refused(damaged(edit), "'layers.1.mlp.up_proj.biases'", "[128, 1]", "expected [128, 2]",
             "4 bits in groups of 32")


def test_scales_that_imply_no_valid_group_size_are_refused(damaged):
    def edit(w):
        w["layers.0.self_attn.q_proj.scales"] = mx.zeros((64, 3))

    _refused(damaged(edit), "'layers.0.self_attn.q_proj.scales'", "[64, 3]", "groups of 21")


def test_float_weight_beside_scales_is_refused(damaged):
    def edit(w):
        w["layers.0.self_attn.k_proj.weight"] = w["layers.0.self_attn.k_proj.weight"].astype(mx.float32)

    _refused(damaged(edit), "'layers.0.self_attn.k_proj.weight'", "float32", "uint32")


def test_missing_biases_is_refused(damaged):
    _refused(damaged(lambda w: w.pop("candidate_selector.predecessor_codebook.biases")),
             "'candidate_selector.predecessor_codebook.biases'", "missing")


def test_a_module_entry_set_false_means_float(damaged):
    """mlx-lm's per-module entries decide before the weights do: `false` means float (the
    selector's projection is stored float here), so a packed module set false is refused."""
    kept = load_drafter(damaged(edit_config=lambda q: q.update({KEPT: False})))
    assert kept.candidate_selector.hidden_projection.weight.dtype == mx.float32
    _refused(damaged(edit_config=lambda q: q.update({"layers.0.mlp.up_proj": False})),
             "'layers.0.mlp.up_proj.weight'", "[128, 8]", "expected [128, 64]")


def test_a_module_entry_naming_no_module_is_refused(damaged):
    _refused(damaged(edit_config=lambda q: q.update({"layers.7.mlp.up_proj": False})),
             "quantization['layers.7.mlp.up_proj']", "names no module")


@pytest.mark.parametrize("key,value,needle", [
    ("bits", 5, "quantization.bits = 5"),
    ("group_size", 48, "quantization.group_size = 48"),
    ("mode", "mxfp4", "quantization.mode = 'mxfp4'"),
])
def test_unsupported_quantization_settings_are_refused(damaged, key, value, needle):
    _refused(damaged(edit_config=lambda q: q.update({key: value})), "config.json", needle)


def test_packed_weights_without_a_quantization_config_are_refused(damaged):
    directory = damaged()
    config = json.loads((directory / "config.json").read_text())
    del config["quantization"], config["quantization_config"]
    (directory / "config.json").write_text(json.dumps(config))
    _refused(directory, "model.safetensors", ".scales'", 'no "quantization"')
