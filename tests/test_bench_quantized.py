"""A bench of a quantized drafter says so: its JSON's `drafter` carries the packing the
session names (`probe` and the TUI header show it too), and bench-diff names it beside the
path. Without it a bench of the sample shipped in 8 bits and one of the float sample before
it read alike: the same path, the same kind, only the layer count apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quantized_drafters import float_drafter

from dflash_tui.cli import main
from dflash_tui.engine import load_pair

PROMPTS = {"code": ["def add(a, b):", "for i in range(10):"]}


@pytest.fixture(scope="module")
def benches(make_pair, tmp_path_factory) -> dict:
    """{"float": (drafter dir, bench JSON), "q8": ...}: one float drafter and its 8-bit copy,
    benched on the same prompts."""
    root = tmp_path_factory.mktemp("bench-quantized")
    prompts = root / "prompts"
    for workload, texts in PROMPTS.items():
        (prompts / workload).mkdir(parents=True)
        for k, text in enumerate(texts):
            (prompts / workload / f"0{k}.txt").write_text(text + "\n", encoding="utf-8")
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    drafters = {"float": float_drafter(target_dir, root / "float")}
    drafters["q8"] = root / "q8"
    assert main(["quantize", str(drafters["float"]), "--bits", "8", "--group-size", "32",
                 "--out", str(drafters["q8"])]) == 0
    out = {}
    for name, draft in drafters.items():
        path = root / f"{name}.json"
        assert main(["bench", str(target_dir), "--draft", str(draft), "--prompts", str(prompts),
                     "--blocks", "2", "--max-tokens", "6", "--json", str(path)]) == 0
        out[name] = (target_dir, draft, path)
    return out


def _label(target_dir: Path, draft: Path):
    """What the engine's session calls the drafter's packing (None: float)."""
    session = load_pair(target_dir, draft).open("def add(a, b):")
    try:
        return session.info.drafter_quantization
    finally:
        session.close()


def test_the_json_names_a_quantized_drafters_packing_and_null_for_a_float_one(benches):
    target_dir, draft, path = benches["q8"]
    label = _label(target_dir, draft)
    assert label is not None and label.startswith("q8/g32")
    assert json.loads(path.read_text())["drafter"]["quantization"] == label
    target_dir, draft, path = benches["float"]
    assert json.loads(path.read_text())["drafter"]["quantization"] is None


def test_bench_diff_names_each_drafter_with_its_packing(benches, capsys):
    (_, _, a), (target_dir, draft, b) = benches["float"], benches["q8"]
    label = _label(target_dir, draft)
    capsys.readouterr()
    assert main(["bench-diff", str(a), str(b)]) == 0
    said = " ".join(capsys.readouterr().out.split())  # rich wraps at the console's width
    assert f"A: {a} (drafter {benches['float'][1]})" in said
    assert f"B: {b} (drafter {draft}, {label})" in said


def test_the_bench_says_which_drafter_it_runs_before_its_first_prompt(benches, capsys, tmp_path):
    """Its terminal output named only the drafter's path: the sample in 8 bits and the float
    sample before it read alike there too."""
    target_dir, draft, _ = benches["q8"]
    label = _label(target_dir, draft)
    prompts = tmp_path / "prompts" / "code"
    prompts.mkdir(parents=True)
    (prompts / "00.txt").write_text("def add(a, b):\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["bench", str(target_dir), "--draft", str(draft), "--prompts", str(prompts.parent),
                 "--blocks", "2", "--max-tokens", "4"]) == 0
    lines = capsys.readouterr().err.splitlines()
    said = next(line for line in lines if " drafter (" in line)
    assert said.startswith(f"bench: DFlash2 drafter (2 layers, {label}) on llama target (")
    assert lines.index(said) < next(i for i, line in enumerate(lines) if "prompts (" in line)
