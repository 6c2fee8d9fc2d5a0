"""Temperature > 0: rejection sampling keeps the target's distribution, and a seeded session
is reproducible."""

from __future__ import annotations

import numpy as np
import pytest

from dflash_tui.engine import SessionOptions, load_pair
from dflash_tui.engine.acceptance import greedy_accept, rejection_sample, softmax_rows


def _simulate(p, q, n, seed):
    """Draw proposals from q, verify against p; return the first and second emitted tokens."""
    rng = np.random.default_rng(seed)
    first, second = [], []
    for _ in range(n):
        proposals = [int(rng.choice(q.shape[1], p=q[i])) for i in range(q.shape[0])]
        accepted, bonus = rejection_sample(proposals, p, q, rng)
        emitted = proposals[:accepted] + [bonus]
        first.append(emitted[0])
        if len(emitted) > 1:
            second.append(emitted[1])
    return np.bincount(first, minlength=p.shape[1]) / n, np.bincount(second, minlength=p.shape[1]) / max(len(second), 1)


@pytest.mark.parametrize("sparse_q", [False, True])
def test_rejection_sampling_preserves_the_target_distribution(sparse_q):
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(6), size=3)  # target rows for gamma = 2 (+ bonus row)
    q = rng.dirichlet(np.ones(6), size=2)
    if sparse_q:  # DFlash2: q lives on K candidates only
        q[:, 4:] = 0
        q /= q.sum(axis=1, keepdims=True)
    first, second = _simulate(p, q, 10000, seed=1)
    assert np.abs(first - p[0]).max() < 0.02
    assert np.abs(second - p[1]).max() < 0.03


def test_greedy_accept():
    assert greedy_accept([5, 6, 7], [5, 6, 9, 1]) == (2, 9)
    assert greedy_accept([5, 6, 7], [5, 6, 7, 1]) == (3, 1)
    assert greedy_accept([4], [5, 2]) == (0, 5)


@pytest.mark.parametrize("drafter_kind", ["DFlashDraftModel", "DFlash2DraftModel"])
def test_seeded_sampling_is_reproducible(make_pair, drafter_kind):
    target_dir, draft_dir = make_pair("llama", drafter_kind)
    pair = load_pair(target_dir, draft_dir)

    def run(seed):
        session = pair.open("Once upon a time",
                            options=SessionOptions(gamma=4, max_tokens=24, temperature=1.0, seed=seed))
        rounds = list(session.run())
        session.close()
        return session.generated, rounds

    a, rounds = run(7)
    b, _ = run(7)
    c, _ = run(8)
    assert a == b and a != c
    if drafter_kind == "DFlash2DraftModel":
        q = rounds[0].selector.slots[0].q
        assert q is not None and abs(sum(q) - 1) < 1e-6


def test_a_row_of_nan_or_inf_logits_samples_as_greedy_and_the_others_are_untouched():
    """An overflowed model's logits have no distribution; numpy's sampler refused the NaN
    probabilities with a traceback mid-session. Such a row becomes the greedy pick's one-hot
    (numpy's argmax: the first NaN, else the +Inf); -Inf alone is a masked token, not a fault."""
    logits = np.array([[1.0, 2.0, 0.5, -np.inf],
                       [1.0, np.nan, 3.0, 0.0],
                       [1.0, np.inf, 3.0, 0.0],
                       [np.nan, np.nan, np.nan, np.nan]], dtype=np.float32)
    p = softmax_rows(logits, 0.8)
    z = np.exp((logits[0, :3].astype(np.float64) - 2.0) / 0.8)
    np.testing.assert_allclose(p[0], [*(z / z.sum()), 0.0])
    assert p[1].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert p[2].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert p[3].tolist() == [1.0, 0.0, 0.0, 0.0]
    rng = np.random.default_rng(0)
    assert [int(rng.choice(4, p=row)) for row in p[1:]] == [1, 1, 0]
