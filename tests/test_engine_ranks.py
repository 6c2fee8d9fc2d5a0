"""Ranks and top tokens (engine/ranks.py) against numpy on the same logits."""

import mlx.core as mx
import numpy as np
import pytest

from dflash_tui.engine.ranks import TOP_TOKENS, rank_arrays, rank_values, slot_ranks


def softmax(x: np.ndarray, temperature: float) -> np.ndarray:
    z = x / temperature if temperature > 0 else x
    z = np.exp(z - z.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("host_normalizer", [False, True])
@pytest.mark.parametrize("temperature", [0.0, 0.7])
@pytest.mark.parametrize("dtype", [mx.float32, mx.bfloat16])
def test_rank_arrays_match_numpy(temperature, dtype, host_normalizer):
    rng = np.random.default_rng(3)
    slots, vocab = 6, 300
    draft = rng.normal(0, 3, (slots, vocab)).astype(np.float32)
    target = rng.normal(0, 3, (slots, vocab)).astype(np.float32)
    tokens = rng.integers(0, vocab, slots)
    draft_mx, target_mx = mx.array(draft).astype(dtype), mx.array(target).astype(dtype)
    # numpy sees the values the device sees (bfloat16 rounds them)
    draft = np.array(draft_mx.astype(mx.float32))
    target = np.array(target_mx.astype(mx.float32))
    arrays = rank_arrays(draft_mx, target_mx, mx.array(tokens.astype(np.int32)), temperature,
                         host_normalizer)
    # the normalizer is the rows' logsumexp, or the rows themselves for the host to reduce
    assert arrays[-1].shape == ((2 * slots, vocab) if host_normalizer else (2 * slots,))
    rank, p_target, ids, logits, probs = rank_values(
        tuple(np.array(a) for a in arrays), temperature)

    at_target = draft[np.arange(slots), tokens]
    np.testing.assert_array_equal(rank, (draft > at_target[:, None]).sum(axis=-1))
    np.testing.assert_allclose(p_target, softmax(draft, temperature)[np.arange(slots), tokens],
                               rtol=1e-5, atol=1e-7)
    for rows, offset in ((draft, 0), (target, slots)):
        p = softmax(rows, temperature)
        for s in range(slots):
            best = np.argsort(-rows[s], kind="stable")[:TOP_TOKENS]
            got = ids[offset + s]
            # ties (bfloat16 rounds values together) may come in either order: compare values
            np.testing.assert_array_equal(rows[s][got], rows[s][best])
            np.testing.assert_array_equal(logits[offset + s], rows[s][got])
            np.testing.assert_allclose(probs[offset + s], p[s][got], rtol=1e-5, atol=1e-7)


def test_slot_ranks_read_the_drafter_rows_then_the_target_rows():
    rng = np.random.default_rng(4)
    slots, vocab = 4, 50
    draft = rng.normal(0, 3, (slots, vocab)).astype(np.float32)
    target = rng.normal(0, 3, (slots, vocab)).astype(np.float32)
    targets = target.argmax(axis=-1).tolist()
    proposals = draft.argmax(axis=-1).tolist()
    arrays = tuple(np.array(a) for a in rank_arrays(
        mx.array(draft), mx.array(target), mx.array(np.array(targets, dtype=np.int32)), 0.0))
    records = slot_ranks(proposals, targets, 1, None, rank_values(arrays, 0.0))
    assert [r.slot for r in records] == list(range(slots))
    for s, record in enumerate(records):
        assert record.drafter_top[0].token == proposals[s]
        assert record.target_top[0].token == targets[s]
        assert record.rank == int((draft[s] > draft[s, targets[s]]).sum())
        assert record.in_candidates is None
        assert record.accepted == (s < 1) and record.after_rejection == (s > 1)


@pytest.mark.parametrize("vocab", [300, 1024, 5000, 151936])
def test_top_ids_are_the_largest_values_in_order(vocab):
    from dflash_tui.engine.ranks import top_ids
    rng = np.random.default_rng(vocab)
    x = rng.normal(0, 2, (5, vocab)).astype(np.float32)
    x[1, :] = np.round(x[1, :])  # many ties
    x[2, vocab - 3:] = 50.0  # the largest in the last (padded) block
    x[3, :4] = -np.inf
    ids = np.array(top_ids(mx.array(x), 5))
    assert ids.shape == (5, 5) and (ids >= 0).all() and (ids < vocab).all()
    for row, got in zip(x, ids):
        assert len(set(got.tolist())) == 5
        np.testing.assert_array_equal(row[got], np.sort(row)[::-1][:5])


def test_a_nan_logit_counts_above_the_target_and_a_nan_target_ranks_last():
    # a drafter whose logits went NaN proposes garbage: its rank must not read 0 ("the
    # argmax was the target's token"), which made a collapsed drafter's argmax share 100%
    vocab = 8
    draft = np.zeros((3, vocab), dtype=np.float32)
    draft[0, :] = np.nan  # every logit NaN (a collapsed drafter)
    draft[1, 5] = np.nan  # one NaN beside a finite target logit
    draft[1, 2] = 1.0  # the target's token, above every finite logit
    draft[2, 3] = 1.0  # a healthy row: one logit above the target's
    tokens = np.array([2, 2, 2], dtype=np.int32)
    target = np.zeros((3, vocab), dtype=np.float32)
    arrays = rank_arrays(mx.array(draft), mx.array(target), mx.array(tokens), 0.0)
    assert np.array(arrays[0]).tolist() == [vocab - 1, 1, 1]
