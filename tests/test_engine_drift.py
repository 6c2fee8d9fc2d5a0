"""The drift of a buffer pair (engine/drift.py) against numpy, and its rms relative error,
which a few huge values do not swamp as they swamp `rel_err` (max |Δ| over the absmax)."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from dflash_tui.engine.drift import Drift

KEY = ("context", None, "capture")


def _drift(primary: np.ndarray, reference: np.ndarray):
    drift = Drift([KEY], [mx.array(primary)], [mx.array(reference)])
    mx.eval(drift.pending())
    return drift.rows()[0]


def _capture_like(seed: int = 0) -> np.ndarray:
    """SmolLM2's capture in miniature: values near 100, and three near 25,000 (the massive
    activations of the first row)."""
    rows = np.random.default_rng(seed).normal(0, 100, (48, 576)).astype(np.float32)
    rows[0, [7, 300, 500]] = 25_000.0
    return rows


def test_a_change_of_every_typical_value_reads_in_the_rms_and_hardly_in_the_absmax():
    reference = _capture_like()
    shifted = reference + np.random.default_rng(1).normal(0, 60, reference.shape).astype(np.float32)
    shifted[0, [7, 300, 500]] = 25_000.0  # the huge values as they were
    b = _drift(shifted, reference)
    diff = shifted.astype(np.float64) - reference
    assert b.max_abs_diff == pytest.approx(np.abs(diff).max(), rel=1e-6)
    assert b.rel_err == pytest.approx(np.abs(diff).max() / 25_000.0, rel=1e-6)
    assert b.rel_err < 0.015  # reads as noise ...
    expected = np.sqrt((diff ** 2).sum() / (reference.astype(np.float64) ** 2).sum())
    assert b.rms_rel_err == pytest.approx(expected, rel=1e-4)
    assert b.rms_rel_err > 0.15  # ... which it is not (60 of ~280)


def test_rounding_noise_stays_small_in_the_rms_too():
    reference = _capture_like()
    rounded = reference.astype(np.float16).astype(np.float32)  # float16's rounding, relative
    b = _drift(rounded, reference)
    assert b.rel_err < 1e-3 and b.rms_rel_err < 1e-3


def test_a_pair_with_a_nan_is_measured_over_the_values_finite_on_both_sides():
    reference = _capture_like()
    primary = reference * 1.01
    primary[3, 4] = np.nan  # the exact pass: one side non-finite
    b = _drift(primary, reference)
    assert b.nonfinite == "primary" and b.rel_err is None and b.rms_rel_err is None
    reference_nan = reference.copy()
    reference_nan[3, 4] = np.nan
    both = _drift(primary, reference_nan)  # the same value non-finite on both sides
    assert both.nonfinite is None
    finite = np.isfinite(primary) & np.isfinite(reference_nan)
    d, r = (primary - reference_nan)[finite].astype(np.float64), reference_nan[finite].astype(np.float64)
    assert both.rms_rel_err == pytest.approx(np.sqrt((d ** 2).sum() / (r ** 2).sum()), rel=1e-4)


def test_an_all_zero_reference_has_no_ratio_unless_equal():
    zero = np.zeros((4, 8), np.float32)
    assert _drift(zero, zero).rms_rel_err == 0.0
    assert _drift(zero + 1, zero).rms_rel_err is None


def test_the_side_holding_a_nan_reads_in_the_drafters_words():
    """The ▶ line's and the diverge stop's `why` named the side `primary` (`non-finite on
    the primary side only`) where probe's NON-FINITE note said `on the drafter side only`
    and the bench `on the drafter side`: one vocabulary now (records.nonfinite_side)."""
    from dflash_tui.engine.records import first_divergent

    reference = _capture_like()
    primary, reference_nan = reference.copy(), reference.copy()
    primary[3, 4] = np.nan
    reference_nan[5, 6] = np.inf
    words = {}
    for p, r in ((primary, reference), (reference, reference_nan), (primary, reference_nan)):
        b = _drift(p, r)
        words[b.nonfinite] = first_divergent((b,), 0.01).why
    assert words == {"primary": "non-finite on the drafter side only",
                     "reference": "non-finite on the reference side only",
                     "both": "non-finite on each side, where the other is finite"}
