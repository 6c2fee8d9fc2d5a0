"""The committed text kept by window (engine/committed_text.py) equals a whole decode."""

import numpy as np
import pytest

from dflash_tui.engine import committed_text
from dflash_tui.engine.committed_text import CommittedText


def test_window_follows_a_byte_level_tokenizer_past_the_checks(sample_target, monkeypatch):
    # small thresholds so the window itself (not the whole decode) is what is compared
    monkeypatch.setattr(committed_text, "CHECKED_TOKENS", 16)
    monkeypatch.setattr(committed_text, "CHECK_EVERY", 64)
    tokenizer = sample_target.tokenizer
    text = "Grüße, 世界! naïve café — 🙂 emoji, code: def f(x):\n    return x ** 2  # ok\n" * 12
    ids = tokenizer.encode(text)
    rng = np.random.default_rng(0)
    steps = np.cumsum(rng.integers(1, 9, len(ids)))  # rounds of 1-8 tokens
    steps = [int(n) for n in steps if n <= len(ids)]
    kept = CommittedText(tokenizer.decode)
    for n in steps:
        assert kept.text(ids[:n]) == tokenizer.decode(ids[:n])
    assert kept.follows and len(ids) > 4 * 64


def test_a_tokenizer_the_window_cannot_follow_falls_back_to_whole_decodes(monkeypatch):
    # a rule that shows from the sixth token: inside the tokens checked every round
    monkeypatch.setattr(committed_text, "CHECKED_TOKENS", 8)
    monkeypatch.setattr(committed_text, "CHECK_EVERY", 8)

    def decode(ids):  # every fifth character of the whole text upper-cased: no window can know
        return "".join(chr(97 + i % 26).upper() if p % 5 == 0 else chr(97 + i % 26)
                       for p, i in enumerate(ids))

    ids, kept = list(range(40)), CommittedText(decode)
    for n in range(1, 41):
        # exact throughout: the first window is checked while every round decodes whole
        assert kept.text(ids[:n]) == decode(ids[:n])
    assert not kept.follows


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_the_seam_never_splits_a_character(sample_target, monkeypatch, cut):
    monkeypatch.setattr(committed_text, "CHECKED_TOKENS", 2)
    monkeypatch.setattr(committed_text, "CHECK_EVERY", 1000)
    tokenizer = sample_target.tokenizer
    ids = tokenizer.encode("🙂🙂🙂 a 世界世界 b 🙂")
    kept = CommittedText(tokenizer.decode)
    for n in range(1, len(ids) + 1, cut):
        assert kept.text(ids[:n]) == tokenizer.decode(ids[:n])
    assert kept.text(ids) == tokenizer.decode(ids)
