"""A target whose weights hold NaN (a porter's slip in a real checkpoint on disk): the note
naming its tensor at load, as a drafter's gets, and every summary of where the NaN came
from agreeing with the first non-finite buffer the probes found, in the round's order
(the target's context capture before any drafter buffer). They used to blame the drafter's
logits, with no note at all."""

from __future__ import annotations

import json

import mlx.core as mx
import numpy as np
import pytest

from dflash_tui.aggregates import buffer_stats, every_round
from dflash_tui.cli import main
from dflash_tui.engine.api import load_pair
from dflash_tui.engine.session import SessionOptions
from dflash_tui.engine.target import load_target
from dflash_tui.history import History
from dflash_tui.panels.aggregates import buffer_rows
from dflash_tui.panels.ranks import nonfinite_note

from fixtures import (gguf_of_llama_target, target_facts, write_llama_gguf,
                      write_quantized_llama_target)

LAYER_NORM = "model.layers.1.post_attention_layernorm.weight"


def _poison(target_dir, name, edit) -> None:
    """Rewrite the target's model.safetensors with `edit` applied to tensor `name`."""
    path = target_dir / "model.safetensors"
    weights = {n: np.array(w) for n, w in mx.load(str(path)).items()}
    edit(weights[name])
    mx.save_safetensors(str(path), {n: mx.array(w) for n, w in weights.items()},
                        metadata={"format": "mlx"})


def _one_nan(w):
    w.reshape(-1)[5] = np.nan


def _probe(capsys, target_dir, draft_dir, *flags):
    capsys.readouterr()
    assert main(["probe", str(target_dir), "--draft", str(draft_dir), "--prompt", "Hi",
                 "--block", "3", "--rounds", "3", *flags]) == 0
    said = capsys.readouterr()
    notes = [line for line in said.err.splitlines() if line.startswith("note:")]
    return notes, said.out.splitlines()


def test_a_nan_in_a_target_layer_is_noted_and_blamed_on_the_target(breakable_pair, capsys):
    target_dir, draft_dir = breakable_pair
    _poison(target_dir, LAYER_NORM, _one_nan)
    note = (f"the target's model.safetensors: tensor {LAYER_NORM!r} holds 1 NaN (of 64 values): "
            "the buffers computed from it will be non-finite")
    assert load_target(target_dir).weight_notes.notes == (note,)
    notes, out = _probe(capsys, target_dir, draft_dir)
    assert notes == [f"note: {note}"]
    rounds = [line for line in out if line.startswith("round ")]
    assert rounds and all("FIRST NON-FINITE: context capture" in line for line in rounds), rounds
    summary = [line for line in out if line.startswith("--- ") and "tokens in" not in line]
    # the first non-finite buffer leads; the drafter's logits follow from it, and say so
    assert summary == [
        "--- FIRST NON-FINITE: context capture (the target's layer outputs) in round 0; a "
        "buffer went non-finite in 3 of 3 rounds",
        "--- drafter logits NaN/Inf in 3 of 3 rounds, first in round 0, after context capture "
        "(the first non-finite buffer)"], summary


@pytest.mark.parametrize("tensor, edit, first", [
    # the final norm: only the target's logits go bad (the capture is read before it)
    ("model.norm.weight", _one_nan, "verify target_logits"),
    # lm_head, which the drafter borrows: its logits are the first buffer to go bad
    ("lm_head.weight", _one_nan, "draft logits"),
    # the embedding row of the mask token, which only the drafter's block embeds
    ("model.embed_tokens.weight", "mask", "draft layer 0 x"),
])
def test_the_summary_names_the_buffer_the_probes_found_first(breakable_pair, capsys, tensor,
                                                             edit, first):
    target_dir, draft_dir = breakable_pair
    if edit == "mask":
        mask = target_facts(target_dir)["mask"]
        edit = lambda w: w.__setitem__(mask, np.nan)  # noqa: E731
    _poison(target_dir, tensor, edit)
    notes, out = _probe(capsys, target_dir, draft_dir)
    assert len(notes) == 1, notes
    assert f"the target's model.safetensors: tensor {tensor!r} holds" in notes[0]
    rounds = [line for line in out if line.startswith("round ")]
    assert all(f"FIRST NON-FINITE: {first}" in line for line in rounds), rounds
    summary = [line for line in out if line.startswith("--- FIRST NON-FINITE")]
    assert len(summary) == 1 and summary[0].startswith(f"--- FIRST NON-FINITE: {first} "), out
    logits = [line for line in out if line.startswith("--- drafter logits")]
    assert all(line.endswith(f"after {first} (the first non-finite buffer)")
               for line in logits if first != "draft logits"), logits


def test_a_target_weight_beyond_float16_is_named_once_cast(breakable_pair, capsys):
    """Finite as stored, Inf once `--dtype float16` casts it, as a drafter's is said."""
    target_dir, draft_dir = breakable_pair
    name = "model.layers.0.mlp.down_proj.weight"
    _poison(target_dir, name, lambda w: w[0].__setitem__(slice(0, 3), [1e5, -2e5, 7e4]))
    notes, _ = _probe(capsys, target_dir, draft_dir, "--no-probes", "--dtype", "float16")
    assert notes == [f"note: the target's model.safetensors: tensor {name!r} holds 3 Infs (of "
                     "8,192 values) once cast to float16: its largest value, 2e+05, is beyond "
                     "float16's range"]
    assert load_target(target_dir).weight_notes.notes == ()  # float32 holds it


@pytest.mark.parametrize("keep", [False, True])
def test_a_nan_in_a_quantized_targets_scales_is_named(tmp_path, keep):
    """On the CPU a small quantized target is dequantized as it loads; its weights are then
    checked in their scales and biases (an eighth of the values), and the note names the
    tensor the file holds, kept quantized or not."""
    target_dir = write_quantized_llama_target(tmp_path / "q4")
    name = "model.layers.1.mlp.down_proj.scales"
    _poison(target_dir, name, _one_nan)
    size = mx.load(str(target_dir / "model.safetensors"))[name].size
    target = load_target(target_dir, keep_quantized=keep)
    assert target.spec.config["dequantized_for_cpu"] is (not keep)
    assert target.weight_notes.notes == (
        f"the target's model.safetensors: tensor {name!r} holds 1 NaN (of {size:,} values): "
        "the buffers computed from it will be non-finite",)
    healthy = write_quantized_llama_target(tmp_path / "healthy")
    assert load_target(healthy, keep_quantized=keep).weight_notes.notes == ()


def test_a_nan_in_a_gguf_target_is_named_by_its_gguf_tensor(breakable_pair, tmp_path):
    target_dir, _ = breakable_pair
    tensors, _ = gguf_of_llama_target(target_dir)
    norm = np.array(tensors["blk.1.ffn_norm.weight"])
    norm[3] = np.nan
    tensors["blk.1.ffn_norm.weight"] = mx.array(norm)
    gguf = write_llama_gguf(tmp_path / "nan.gguf", target_dir, tensors=tensors)
    assert load_target(gguf).weight_notes.notes == (
        "the target's nan.gguf: tensor 'blk.1.ffn_norm.weight' holds 1 NaN (of 64 values): the "
        "buffers computed from it will be non-finite",)


def test_a_gguf_weight_beyond_float16_is_not_said_to_be_inf_in_the_file(breakable_pair,
                                                                         tmp_path):
    """A GGUF's tensor is not read back as stored to tell the cast from the file, so a value
    `--dtype float16` made Inf was said to be held by the file (`holds 1 Inf`), which holds
    1e6; the note says in what dtype it holds it, and why that may be."""
    target_dir, _ = breakable_pair
    tensors, _ = gguf_of_llama_target(target_dir)
    down = np.array(tensors["blk.1.ffn_down.weight"])
    down[0, 0] = 1e6
    tensors["blk.1.ffn_down.weight"] = mx.array(down)
    gguf = write_llama_gguf(tmp_path / "big.gguf", target_dir, tensors=tensors)
    assert load_target(gguf).weight_notes.notes == ()
    assert load_target(gguf, dtype="float16").weight_notes.notes == (
        "the target's big.gguf: tensor 'blk.1.ffn_down.weight' holds 1 Inf (of 8,192 values) "
        "as loaded in float16, whose range ends at 65504 (the file's values may be finite "
        "beyond it): the buffers computed from it will be non-finite",)


def test_a_nan_in_a_gguf_targets_block_scales_names_the_tensor_the_file_holds(breakable_pair,
                                                                              tmp_path):
    """A GGUF's Q4_0 / Q4_1 / Q8_0 tensor is one tensor of blocks in the file; mx.load reads
    it as packed weights, scales and biases, and the CPU checks a layer it dequantized in
    those. The note named `blk.3.ffn_down.scales`, which no GGUF holds (the sample with a
    NaN block scale said so): it names the tensor the file holds, and what of it is NaN."""
    from dflash_tui.engine.target import _weight_notes

    target_dir, _ = breakable_pair
    gguf = write_llama_gguf(tmp_path / "q.gguf", target_dir)
    target = load_target(gguf)
    scales = mx.array([1.0, float("nan"), 2.0])
    notes = _weight_notes(target.model, gguf, {}, "float32",
                          {"model.layers.1.mlp.down_proj.scales": scales,
                           "model.layers.1.mlp.down_proj.biases": mx.zeros(3)})
    assert notes.notes == (
        "the target's q.gguf: tensor 'blk.1.ffn_down.weight' (the scales of its quantized "
        "blocks) holds 1 NaN (of 3 values): the buffers computed from it will be non-finite",)


def test_the_tabs_agree_with_the_first_nonfinite_buffer(breakable_pair):
    """The aggregates' buffer table ranked non-finite buffers by fp16 headroom, so a buffer
    with finite values left (draft L0 conv_p) topped the one where the NaN began (draft L0
    x); the ranks tab's note named the drafter's logits alone."""
    target_dir, draft_dir = breakable_pair
    mask = target_facts(target_dir)["mask"]
    _poison(target_dir, "model.embed_tokens.weight", lambda w: w.__setitem__(mask, np.nan))
    session = load_pair(target_dir, draft_dir).open("Hi", options=SessionOptions(
        gamma=4, max_tokens=100))
    history = History(keep=10)
    records = list(session.run(3))
    for record in records:
        history.add(record)
    session.close()
    first = records[0].first_nonfinite
    assert first.where == "draft layer 0 x"
    top = [str(getattr(cell, "plain", cell)) for cell in
           buffer_rows(buffer_stats(history, every_round(history)))[0]]
    assert top[:3] == ["draft", "0", "x"], top
    assert nonfinite_note(records[0]) == ("✗ drafter logits NaN/Inf: slots 0–3, "
                                          "after draft layer 0 x")


def test_the_bench_says_the_target_weights_hold_nan(breakable_pair, tmp_path, capsys):
    """The bench runs without probes: its line on the drafter's NaN logits points at the
    target's weights, whose note it prints."""
    target_dir, draft_dir = breakable_pair
    _poison(target_dir, LAYER_NORM, _one_nan)
    prompts = tmp_path / "prompts" / "prose"
    prompts.mkdir(parents=True)
    (prompts / "01.txt").write_text("The quick brown fox\n")
    capsys.readouterr()
    assert main(["bench", str(target_dir), "--draft", str(draft_dir), "--prompts",
                 str(prompts.parent), "--blocks", "2", "--max-tokens", "6"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps at the console's width
    assert (f"note (block 2): the target's model.safetensors: tensor {LAYER_NORM!r} holds 1 "
            "NaN") in out
    assert ("DRAFTER LOGITS NaN/Inf in 5 of 5 rounds (prose block 2: 5 of 5): the target's own "
            "weights hold NaN or Inf (the note above names them)") in out, out
    # both decodes compute from those weights: equal tokens say nothing of the drafter's math
    assert ("lossless: all 1 speculative decodes equal the target's own greedy decode, which "
            "computes from weights that hold NaN or Inf (the note above): equal, but not a "
            "check") in out, out


def _overflow_in_float16(w):
    """Layer 0's MLP output reaches ~1e6: float32 holds it, float16 (65504) does not."""
    w *= 300_000.0


def _bench(capsys, target_dir, draft_dir, tmp_path, *flags):
    prompts = tmp_path / "prompts" / "prose"
    prompts.mkdir(parents=True, exist_ok=True)
    (prompts / "01.txt").write_text("The quick brown fox\n")
    capsys.readouterr()
    report = tmp_path / "bench.json"
    assert main(["bench", str(target_dir), "--draft", str(draft_dir), "--prompts",
                 str(prompts.parent), "--blocks", "2", "--max-tokens", "6",
                 "--json", str(report), *flags]) == 0
    said = capsys.readouterr()
    alone = json.loads(report.read_text())["target_alone"]
    return " ".join(said.out.split()), said.err, alone


def test_the_bench_says_when_the_target_overflows_at_run_time(breakable_pair, tmp_path, capsys):
    """Finite weights, an activation past float16's range: the target's own greedy decode is
    the argmax of NaN logits, which the speculative decode matches. The bench used to blame
    the drafter's logits and call that lossless, in green."""
    target_dir, draft_dir = breakable_pair
    _poison(target_dir, "model.layers.0.mlp.down_proj.weight", _overflow_in_float16)
    out, err, alone = _bench(capsys, target_dir, draft_dir, tmp_path, "--dtype", "float16")
    assert "note (block 2)" not in out, "the weights are finite: no weight note"
    assert ("TARGET LOGITS NaN/Inf in the target's own decode of 1 of 1 prompts (first: "
            "prose/01, from generated token 0): float16 holds at most 65504, so --dtype "
            "bfloat16 or float32 may hold it") in out, out
    assert "the target's own logits went NaN or Inf as well (the line above)" in out, out
    assert ("lossless: all 1 speculative decodes equal the target's own greedy decode, which "
            "picked tokens from its own NaN or Inf logits (the line above): equal, but not a "
            "check") in out, out
    assert "its logits NaN/Inf from generated token 0" in err
    assert alone[0]["nonfinite_at"] == 0

    # the same weights in float32: nothing overflows, and the check is a check again
    out, err, alone = _bench(capsys, target_dir, draft_dir, tmp_path, "--dtype", "float32")
    assert "TARGET LOGITS" not in out and "NaN" not in out, out
    assert "lossless: all 1 speculative decodes equal the target's own greedy decode" in out
    assert alone[0]["nonfinite_at"] is None


def test_a_sampled_bench_on_an_overflowing_target_reports_instead_of_failing(breakable_pair,
                                                                             tmp_path, capsys):
    """At a temperature the target alone samples from its softmax: NaN logits gave NaN
    probabilities, which numpy's sampler refuses with a traceback."""
    target_dir, draft_dir = breakable_pair
    _poison(target_dir, "model.layers.0.mlp.down_proj.weight", _overflow_in_float16)
    out, err, alone = _bench(capsys, target_dir, draft_dir, tmp_path, "--dtype", "float16",
                             "--temperature", "0.8")
    assert "TARGET LOGITS NaN/Inf in the target's own decode of 1 of 1 prompts" in out, out
    assert alone[0]["nonfinite_at"] == 0
