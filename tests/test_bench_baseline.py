"""engine/baseline.py: the target decoding alone, and the losslessness comparison."""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm import load as mlx_lm_load
from mlx_lm.generate import generate_step

from dflash_tui.bench.prompts import Prompt, Workload
from dflash_tui.bench.runner import BenchRunner, Settings
from dflash_tui.engine.api import load_pair
from dflash_tui.engine.baseline import compare, first_divergence, target_decode
from dflash_tui.engine.session import SessionOptions
from dflash_tui.engine.target import encode_prompt

PROMPT = "The quick brown fox"


def mlx_lm_logits(target_dir, ids: list[int]) -> np.ndarray:
    """Last-row logits from mlx-lm's own model instance (independent of the engine)."""
    model, _ = mlx_lm_load(str(target_dir))
    return np.array(model(mx.array([ids]))[0, -1].astype(mx.float32))


def mlx_lm_greedy(target_dir, ids: list[int], n: int) -> list[int]:
    model, _ = mlx_lm_load(str(target_dir))
    steps = generate_step(mx.array(ids), model, max_tokens=n,
                          sampler=lambda logits: mx.argmax(logits, axis=-1))
    return [int(token) for token, _ in steps]


def load(make_pair, kind: str):
    target_dir, draft_dir = make_pair(kind, "DFlash2DraftModel")
    pair = load_pair(target_dir, draft_dir)
    ids = encode_prompt(pair.target.tokenizer, PROMPT, None)
    return target_dir, pair, ids


@pytest.fixture(scope="module", params=["llama", "qwen35"])
def loaded(request, make_pair):
    return load(make_pair, request.param)


@pytest.fixture(scope="module")
def llama(make_pair):
    """The llama fixture's greedy text varies (the qwen3_5 one repeats a single token)."""
    return load(make_pair, "llama")


def test_target_decode_is_the_targets_greedy_text(loaded):
    target_dir, pair, ids = loaded
    target = pair.target
    run = target_decode(target, ids, 20)
    assert list(run.tokens) == mlx_lm_greedy(target_dir, ids, 20)
    assert run.finish_reason == "length"
    assert run.decode_tokens == 19
    assert target.capture_ids == ()  # ran without the drafter's capture hooks


def test_target_decode_stops_at_eos_where_a_session_does(llama):
    target_dir, pair, ids = llama
    target = pair.target
    greedy = list(target_decode(target, ids, 30).tokens)
    stop_at = next(i for i in range(3, 30) if greedy[i] not in greedy[:i])
    saved = set(target.tokenizer.eos_token_ids)
    target.tokenizer.eos_token_ids = saved | {greedy[stop_at]}
    try:
        run = target_decode(target, ids, 30)
        assert list(run.tokens) == greedy[:stop_at + 1]
        assert run.finish_reason == "eos"
        session = pair.open(PROMPT, options=SessionOptions(gamma=4, max_tokens=30, probes=False))
        list(session.run())
        session.close()
        assert session.generated == list(run.tokens) and session.finished == "eos"
        assert session.finish_message == "the target emitted end-of-sequence"  # "finished: ..."
        # And through the bench, with proposals running past EOS (the oracle pads there).
        workload = Workload("prose", (Prompt("prose", "fox", PROMPT, target_dir),))
        result = BenchRunner(pair, [workload], Settings(blocks=(2, 4), max_tokens=30, oracle=True)).run()
        assert result.lossless is True
        assert [r.tokens for r in result.spec_runs] == [run.tokens, run.tokens]
    finally:
        target.tokenizer.eos_token_ids = saved


def test_a_round_past_eos_counts_the_verdict_and_commits_up_to_eos(llama):
    """The target goes on matching past EOS: the round's accepted count is its verdict on
    every proposal (as a reference loop counts it), its committed tokens end at EOS, and the
    decode is the target's own (proposals are the target's stream run on past the EOS)."""
    target_dir, pair, ids = llama
    target = pair.target
    stream = list(target_decode(target, ids, 30).tokens)
    stop_at = next(i for i in range(5, 30) if stream[i] not in stream[:i])
    saved = set(target.tokenizer.eos_token_ids)
    target.tokenizer.eos_token_ids = saved | {stream[stop_at]}

    def proposer(tokens: list[int], gamma: int) -> list[int]:
        done = len(tokens) - len(ids)
        return (stream[done:] + [0] * gamma)[:gamma]

    try:
        session = pair.open(PROMPT, options=SessionOptions(gamma=8, max_tokens=30, probes=False,
                                                           proposer=proposer))
        records = list(session.run())
        session.close()
    finally:
        target.tokenizer.eos_token_ids = saved
    assert session.generated == stream[:stop_at + 1] and session.finished == "eos"
    last = records[-1]
    eos_slot = last.proposals.index(stream[stop_at])
    assert last.target_tokens[eos_slot + 1] == last.proposals[eos_slot + 1]  # matched past EOS
    assert last.accepted > eos_slot + 1 and len(last.committed_tokens) == eos_slot + 1


def test_first_divergence():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert first_divergence([1, 2, 3], [1, 2]) == 2  # stopped early
    assert first_divergence([1, 2], [1, 2, 3]) == 2  # ran on
    assert first_divergence([], []) is None


def test_compare_names_the_position_and_the_targets_margin(loaded):
    target_dir, pair, ids = loaded
    target = pair.target
    reference = list(target_decode(target, ids, 12).tokens)
    assert compare(target, ids, reference, reference) is None

    at = 5
    logits = mlx_lm_logits(target_dir, ids + reference[:at])
    order = np.argsort(-logits)
    assert order[0] == reference[at]
    runner_up = int(order[1])
    candidate = reference[:at] + [runner_up] + reference[at + 1:]
    d = compare(target, ids, reference, candidate)
    assert (d.index, d.position) == (at, len(ids) + at)
    assert (d.reference, d.candidate) == (reference[at], runner_up)
    assert (d.target.top1, d.target.top2) == (reference[at], runner_up)
    expected = float(logits[order[0]] - logits[order[1]])
    assert d.margin > 0 and math.isclose(d.margin, expected, rel_tol=1e-3, abs_tol=1e-3)
    assert math.isclose(d.candidate_logit, d.target.top2_logit, abs_tol=1e-6)

    short = compare(target, ids, reference, reference[:7])
    assert (short.index, short.reference, short.candidate) == (7, reference[7], None)
    assert short.target.top1 == reference[7]
