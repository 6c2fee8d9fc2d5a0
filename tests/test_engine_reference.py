"""Our drafter against Z Lab's reference implementation (dflash==0.1.0, dflash/model_mlx.py)
on the same weights: logits, DFlash2 proposals, and the accepted length of every round."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from conftest import DRAFTERS, TARGETS
from greedy import load_reference

from dflash_tui.engine import SessionOptions, load_pair

ref = pytest.importorskip("dflash.model_mlx")


@pytest.fixture
def reference_drafter(monkeypatch):
    """Z Lab's own loader reading our fixture directory (its hub download pointed at it)."""

    def load(draft_dir):
        monkeypatch.setattr(ref, "snapshot_download", lambda *a, **k: str(draft_dir))
        return ref.load_draft("local")

    return load


def _fresh_reference_target(target_dir):
    """A separate mlx-lm instance, so the reference's layer patching never touches ours."""
    load_reference.cache_clear()
    model, tokenizer = load_reference(str(target_dir))
    load_reference.cache_clear()
    return model, tokenizer


@pytest.mark.parametrize("target_kind", TARGETS)
@pytest.mark.parametrize("drafter_kind", DRAFTERS)
def test_first_block_logits_and_proposals_match(make_pair, reference_drafter, target_kind, drafter_kind):
    target_dir, draft_dir = make_pair(target_kind, drafter_kind)
    gamma = 7
    session = load_pair(target_dir, draft_dir).open(
        "The rain in Spain", options=SessionOptions(gamma=gamma, keep_raw=True))
    session.step_stage()  # context
    ours = session.step_stage().raw["draft/logits"]
    proposals = session.step_stage().proposals
    session.close()

    model, _ = _fresh_reference_target(target_dir)
    rdraft = reference_drafter(draft_dir)
    ref._patch_model(model, rdraft.config.target_layer_ids)
    rdraft.bind(model)
    from mlx_lm.models.cache import make_prompt_cache

    logits = model(mx.array([session.prompt_ids]), make_prompt_cache(model))
    hidden = mx.concatenate(model._hidden_states, axis=-1)
    anchor = int(mx.argmax(logits[0, -1]))
    assert anchor == session.tokens[len(session.prompt_ids)]
    block = mx.array([[anchor] + [rdraft.config.mask_token_id] * gamma])
    theirs = rdraft(block, hidden, rdraft.make_cache(), logits_start=1)[0]
    assert np.abs(np.array(theirs) - ours).max() < 1e-4
    if drafter_kind == "DFlash2DraftModel":
        ref_tokens, _, _ = rdraft.propose(block, hidden, rdraft.make_cache(), 0.0, logits_start=1)
        assert tuple(np.array(ref_tokens[0]).tolist()) == proposals
    else:
        assert tuple(np.array(mx.argmax(theirs, axis=-1)).tolist()) == proposals


@pytest.mark.parametrize("target_kind", TARGETS)
@pytest.mark.parametrize("drafter_kind", DRAFTERS)
@pytest.mark.parametrize("gamma", [3, 7])
def test_accepted_lengths_match_reference_loop(make_pair, reference_drafter, target_kind, drafter_kind, gamma):
    target_dir, draft_dir = make_pair(target_kind, drafter_kind)
    session = load_pair(target_dir, draft_dir).open(
        "def add(a, b):", options=SessionOptions(gamma=gamma, max_tokens=40))
    ours = [len(r.committed_tokens) for r in session.run()]
    session.close()

    model, tokenizer = _fresh_reference_target(target_dir)
    rdraft = reference_drafter(draft_dir)
    responses = list(ref.stream_generate(model, rdraft, tokenizer, mx.array(session.prompt_ids),
                                         block_size=gamma + 1, max_tokens=40))
    theirs = [r.accepted for r in responses if r.accepted is not None]
    ref_tokens = [t for r in responses for t in r.tokens]
    assert ref_tokens == session.generated
    assert ours == theirs


@pytest.mark.parametrize("drafter_kind", DRAFTERS)
def test_sliding_drafter_matches_reference_round_by_round(make_pair, reference_drafter, drafter_kind):
    """A drafter whose first layer slides (window 24), over 60 tokens, well past the window:
    every round's block logits (and DFlash2 proposals) from the engine's incremental context
    buffers equal Z Lab's drafter given the whole context so far.

    Z Lab's drafter gets a fresh cache each round: its own loop keeps the sliding layer in a
    RotatingKVCache, which after one-row writes holds the rows rotated while its mask assumes
    them in order, so rows 1.. of a block would see a different window than the anchor's."""
    target_dir, draft_dir = make_pair("llama", drafter_kind, sliding=True)
    session = load_pair(target_dir, draft_dir).open(
        "for i in range(10):", options=SessionOptions(gamma=7, max_tokens=60, keep_raw=True))
    rounds = list(session.run())
    session.close()
    assert session.state().ring_occupancy == 23 and rounds[-1].position > 2 * 24

    rdraft = reference_drafter(draft_dir)
    model, _ = _fresh_reference_target(target_dir)
    rdraft.bind(model)
    context = []
    for record in rounds:
        context.append(record.raw["context/capture"])  # the rows this round's context wrote
        block = mx.array([[record.anchor] + [rdraft.config.mask_token_id] * record.gamma])
        hidden = rdraft.hidden_states(block, mx.array(np.concatenate(context, axis=1)),
                                      rdraft.make_cache(), logits_start=1)
        logits = rdraft.compute_logits(hidden)
        assert np.abs(np.array(logits[0]) - record.raw["draft/logits"]).max() < 1e-4
        if drafter_kind == "DFlash2DraftModel":
            tokens, _, _ = rdraft.candidate_selector.select(hidden, logits, block[:, 0], 0.0)
            assert tuple(np.array(tokens[0]).tolist()) == record.proposals


@pytest.mark.slow
def test_shipped_drafter_on_the_sample_matches_reference_loop(sample_gguf, sample_pair_for,
                                                              reference_drafter, tmp_path):
    """The real pair, where the drafter is right often: every round's accepted length (and
    the text) equals Z Lab's loop on the same target weights and drafter weights (for a
    drafter shipped quantized, the float values its packed weights hold, which are what the
    engine computes with on the CPU)."""
    from quantized_drafters import float_copy

    from dflash_tui.engine.target import load_target
    from dflash_tui.sample import sample_drafter

    draft_dir = sample_drafter()
    prompt = "Write a Python function that checks whether a number is prime."
    session = sample_pair_for(draft_dir).open(
        prompt, options=SessionOptions(gamma=7, max_tokens=40, probes=False, ranks=False))
    ours = [len(r.committed_tokens) for r in session.run()]
    session.close()
    assert 1 + sum(ours) == len(session.generated) == 40  # the first token comes from prefill
    assert max(ours) > 3  # the drafter gets whole runs accepted

    theirs_target = load_target(sample_gguf)  # a second instance for the reference to patch
    rdraft = reference_drafter(float_copy(draft_dir, tmp_path / "float"))
    rdraft.set_dtype(mx.float32)  # the shipped weights are bfloat16; both sides run float32
    responses = list(ref.stream_generate(theirs_target.model, rdraft, theirs_target.tokenizer,
                                         mx.array(session.prompt_ids), block_size=8, max_tokens=40))
    assert [t for r in responses for t in r.tokens] == session.generated
    assert ours == [r.accepted for r in responses if r.accepted is not None]
