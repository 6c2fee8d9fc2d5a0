"""The shipped sample drafter: its format, its size, and that it actually drafts."""

from __future__ import annotations

import json

import pytest

from fixtures import drafter_tensors, write_drafter

from dflash_tui.engine import SessionOptions
from dflash_tui.sample import sample_drafter

PROMPT = "Write a Python function that returns the factorial of n."


def test_shipped_drafter_is_a_zlab_dflash2_checkpoint_under_40_mb():
    directory = sample_drafter()
    config = json.loads((directory / "config.json").read_text())
    assert config["architectures"] == ["DFlash2DraftModel"]
    assert sum(f.stat().st_size for f in directory.iterdir() if f.is_file()) <= 40_000_000
    training = config["dflash_tui_training"]
    assert training["tool"] == "dflash-tui distill" and "seed" in training["train"]


@pytest.fixture(scope="module")
def accepted_by(sample_pair_for):
    def run(draft_dir):
        session = sample_pair_for(draft_dir).open(
            PROMPT, options=SessionOptions(gamma=7, max_tokens=24, probes=False, ranks=False))
        rounds = list(session.run())
        session.close()
        return sum(r.accepted for r in rounds) / len(rounds), session.generated

    return run


@pytest.mark.slow
def test_shipped_drafter_beats_a_random_one_of_the_same_shape(accepted_by, tmp_path):
    shipped = sample_drafter()
    config = json.loads((shipped / "config.json").read_text())
    config.pop("quantization", None)  # the random one is float, whatever the shipped one's storage
    random_dir = write_drafter(tmp_path / "random", config, tensors=drafter_tensors(config, seed=3))
    trained_mean, trained_text = accepted_by(shipped)
    random_mean, random_text = accepted_by(random_dir)
    assert trained_text == random_text  # lossless either way: the target decides the text
    assert trained_mean > 1.0 and random_mean < 0.2 and trained_mean > 5 * random_mean
