"""Padded attention (engine/padded_attention.py), run here on the CPU although only a CUDA
GPU chooses it by default: the decode stays lossless, every round's drafter logits match the
unpadded engine's and Z Lab's drafter, the target's padded cache gives the unpadded
forward's logits, and a NaN in a row past the rows held (a rejected forward's, an earlier
longer block's) never leaks into attention."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.cache import KVCache

from conftest import DRAFTERS, TARGETS
from greedy import greedy_tokens, load_reference, noisy_oracle

from dflash_tui.engine import SessionOptions, load_pair
from dflash_tui.engine.context_cache import ContextCache
from dflash_tui.engine.padded_attention import STEP, PaddedKVCache

PROMPT = "Seven times eight is"
TOKENS = 40
# On the CPU padded and unpadded attention run the same kernel: equal to rounding. On a CUDA
# GPU the unpadded one is another kernel whose float32 sums differ by up to ~7e-3 on these
# logits (measured on an H200); the decode itself is still held equal.
LOGITS_TOL = 1e-4 if mx.default_device() == mx.cpu else 2e-2


def _decode(pair, padded: bool, gamma: int, proposer=None):
    options = SessionOptions(gamma=gamma, max_tokens=TOKENS, attention="padded" if padded else "mlx",
                             keep_raw=True, proposer=proposer)
    session = pair.open(PROMPT, options=options)
    rounds = list(session.run())
    session.close()
    return session, rounds


@pytest.mark.parametrize("target_kind", TARGETS)
@pytest.mark.parametrize("drafter_kind", DRAFTERS)
def test_a_padded_decode_is_the_unpadded_decode(make_pair, target_kind, drafter_kind):
    target_dir, draft_dir = make_pair(target_kind, drafter_kind)
    pair = load_pair(target_dir, draft_dir)
    model, _ = load_reference(str(target_dir))
    plain, plain_rounds = _decode(pair, False, 4)
    expected = greedy_tokens(model, plain.prompt_ids, TOKENS, plain.eos_ids)
    # a noisy oracle: rejections of every length, so stale rows past the cache's are met
    oracle = noisy_oracle(expected, len(plain.prompt_ids), 4)
    padded, rounds = _decode(pair, True, 4, proposer=oracle)
    assert padded.generated == expected
    assert len({r.accepted for r in rounds}) > 1
    padded, rounds = _decode(pair, True, 4)
    assert padded.generated == plain.generated == expected
    assert [r.accepted for r in rounds] == [r.accepted for r in plain_rounds]
    for ours, theirs in zip(rounds, plain_rounds):
        np.testing.assert_allclose(ours.raw["draft/logits"], theirs.raw["draft/logits"],
                                   rtol=LOGITS_TOL, atol=LOGITS_TOL)


@pytest.mark.parametrize("drafter_kind", DRAFTERS)
def test_a_padded_sliding_drafter_decodes_past_its_window(make_pair, drafter_kind):
    target_dir, draft_dir = make_pair("llama", drafter_kind, sliding=True)
    pair = load_pair(target_dir, draft_dir)
    plain, plain_rounds = _decode(pair, False, 7)
    padded, rounds = _decode(pair, True, 7)
    assert padded.generated == plain.generated
    assert rounds[-1].position > 2 * 24  # well past the window of 24
    for ours, theirs in zip(rounds, plain_rounds):
        np.testing.assert_allclose(ours.raw["draft/logits"], theirs.raw["draft/logits"],
                                   rtol=LOGITS_TOL, atol=LOGITS_TOL)


def _rows(rng, n, heads=2, dim=4):
    return mx.array(rng.normal(size=(1, heads, n, dim)).astype(np.float32))


def test_the_padded_kv_cache_gives_the_unpadded_logits(make_pair):
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    model, _ = load_reference(str(target_dir))
    plain, padded = [KVCache() for _ in model.layers], [PaddedKVCache() for _ in model.layers]
    # a forward of 6 rows trimmed to 1 (a rejection), then a 3-row forward, which leaves two
    # rejected rows past it, then a 1-row forward
    steps = [(list(range(1, 10)), 0), (list(range(10, 16)), 5), ([16, 17, 18], 0), ([19], 0)]
    for ids, rejected in steps:
        if len(ids) == 3:
            for c in padded:  # what a non-finite rejected row would leave behind
                c.keys[..., c.offset:c.written, :] = float("nan")
        ours = model(mx.array([ids]), cache=padded)
        theirs = model(mx.array([ids]), cache=plain)
        assert bool(mx.isfinite(ours).all())
        assert all(bool(mx.isfinite(c.keys).all()) for c in padded)  # zeroed, not only masked
        np.testing.assert_allclose(np.array(ours), np.array(theirs), rtol=LOGITS_TOL, atol=LOGITS_TOL)
        for c in (*plain, *padded):
            c.trim(rejected)
    assert padded[0].capacity == STEP and padded[0].offset == plain[0].offset == 14


def test_a_padded_context_cache_masks_what_it_does_not_hold():
    rng = np.random.default_rng(0)
    cache = ContextCache(padded=True)
    cache.append(_rows(rng, 10), _rows(rng, 10))
    cache.with_block(_rows(rng, 8), _rows(rng, 8))  # a long block, rows 10..17
    cache.append(_rows(rng, 2), _rows(rng, 2))  # two rows kept: the block's 12..17 are stale
    cache.keys[:, :, 12:18] = float("nan")
    keys, values, mask = cache.with_block(_rows(rng, 3), _rows(rng, 3))
    assert keys.shape[2] == cache.capacity == STEP and mask.shape == (1, STEP)
    assert np.array(mask)[0].tolist() == [True] * 15 + [False] * (STEP - 15)
    assert bool(mx.isfinite(keys).all())  # the stale row 15..17 was zeroed, not masked only
