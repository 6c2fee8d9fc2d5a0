"""Probes: the statistics are right, and a poisoned weight is localized to the first buffer
downstream of it, in the right layer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fixtures import drafter_tensors, write_drafter

from dflash_tui.engine import SessionOptions, load_pair
from dflash_tui.engine.probes import PIPELINE


def _poisoned_drafter(tmp_path, draft_dir, tensor, value, rows=None):
    config = json.loads((draft_dir / "config.json").read_text())
    tensors = drafter_tensors(config, seed=1)
    poisoned = tensors[tensor]
    if rows is None:
        poisoned.reshape(-1)[0] = value
    else:
        poisoned[rows] = value
    return write_drafter(tmp_path / "poisoned", config, tensors=tensors)


def _first_round(target_dir, draft_dir, dtype="float32"):
    session = load_pair(target_dir, draft_dir, dtype=dtype).open(
        "Hello there", options=SessionOptions(gamma=4, keep_raw=True))
    record = session.step_round()
    session.close()
    return record


@pytest.mark.parametrize("tensor, expected", [
    ("fc.weight", ("context", None, "ctx_combined")),
    ("layers.0.self_attn.k_proj.weight", ("context", 0, "ctx_k")),
    ("layers.0.self_attn.v_proj.weight", ("context", 0, "ctx_v")),
    ("layers.1.self_attn.q_proj.weight", ("draft", 1, "q")),
    ("layers.1.attention_conv.kernel_projection.weight", ("draft", 1, "coeffs")),
    ("layers.1.mlp.up_proj.weight", ("draft", 1, "ffn_up")),
    ("layers.0.mlp.down_proj.weight", ("draft", 0, "ffn_out")),
    ("candidate_selector.hidden_projection.weight", ("draft", None, "hproj")),
])
def test_nan_weight_is_localized(make_pair, tmp_path, tensor, expected):
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    bad = _poisoned_drafter(tmp_path, draft_dir, tensor, np.nan)
    first = _first_round(target_dir, bad).first_nonfinite
    assert first is not None
    assert (first.stage, first.layer, first.name) == expected


def test_float16_overflow_is_localized(make_pair, tmp_path):
    """A huge gate_proj row in float16 overflows to inf in that layer's ffn_gate."""
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    bad = _poisoned_drafter(tmp_path, draft_dir, "layers.1.mlp.gate_proj.weight", 60000.0, rows=3)
    record = _first_round(target_dir, bad, dtype="float16")
    first = record.first_nonfinite
    assert (first.stage, first.layer, first.name) == ("draft", 1, "ffn_gate")
    assert first.posinf + first.neginf > 0
    upstream = [p for p in record.probes if p.stage == "draft" and p.layer == 1 and p.name == "normed2"]
    assert upstream and not upstream[0].nonfinite


def test_healthy_drafter_has_no_nonfinite(make_pair):
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    assert _first_round(target_dir, draft_dir).first_nonfinite is None


def test_probe_statistics_match_the_raw_buffers(make_pair):
    target_dir, draft_dir = make_pair("qwen35", "DFlash2DraftModel")
    record = _first_round(target_dir, draft_dir)
    checked = 0
    for row in record.probes:
        key = f"{row.stage}/{row.name}" if row.layer is None else f"{row.stage}/L{row.layer}/{row.name}"
        raw = record.raw[key].astype(np.float64)
        assert tuple(raw.shape) == row.shape
        assert row.nan == 0 and row.posinf == 0 and row.neginf == 0
        assert row.min == pytest.approx(raw.min(), rel=1e-5, abs=1e-6)
        assert row.max == pytest.approx(raw.max(), rel=1e-5, abs=1e-6)
        assert row.absmax == pytest.approx(np.abs(raw).max(), rel=1e-5, abs=1e-6)
        assert row.mean == pytest.approx(raw.mean(), rel=1e-3, abs=1e-5)
        assert row.rms == pytest.approx(np.sqrt((raw ** 2).mean()), rel=1e-4, abs=1e-6)
        if row.absmax:
            assert row.fp16_headroom_bits == pytest.approx(np.log2(65504 / row.absmax))
        checked += 1
    assert checked > 40


def test_every_declared_buffer_is_probed_in_pipeline_order(make_pair):
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    record = _first_round(target_dir, draft_dir)
    seen = {(p.stage, p.layer, p.name) for p in record.probes}
    for stage, before, per_layer, after in PIPELINE:
        for name in before + after:
            assert (stage, None, name) in seen, (stage, name)
        for layer in (0, 1):
            for name in per_layer:
                assert (stage, layer, name) in seen, (stage, layer, name)


def test_nonfinite_counts(make_pair, tmp_path):
    """nan / +inf / -inf are counted separately and min/max describe the finite values only."""
    target_dir, draft_dir = make_pair("llama", "DFlashDraftModel")
    bad = _poisoned_drafter(tmp_path, draft_dir, "layers.0.mlp.down_proj.weight", np.inf, rows=0)
    record = _first_round(target_dir, bad)
    row = next(p for p in record.probes if (p.stage, p.layer, p.name) == ("draft", 0, "ffn_out"))
    raw = record.raw["draft/L0/ffn_out"]
    assert row.nan == int(np.isnan(raw).sum())
    assert row.posinf == int(np.isposinf(raw).sum())
    assert row.neginf == int(np.isneginf(raw).sum())
    finite = raw[np.isfinite(raw)]
    assert row.max == pytest.approx(float(finite.max()), rel=1e-5)
