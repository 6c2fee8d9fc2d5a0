"""A distill run whose files were damaged (a copy cut short, a disk error, an edit by hand):
its data manifest, shards, training state and logs. Bad files are refused in one line that
names the file (exit 2, no traceback); damaged log lines, which a kill mid-append leaves,
are skipped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from distill_flags import DATA_FLAGS, TRAIN_FLAGS

from dflash_tui.cli import main

TRAIN_FLAGS = [*TRAIN_FLAGS, "--eval-every", "0", "--steps", "4"]


@pytest.fixture(scope="module")
def saved_run(make_pair, tmp_path_factory):
    """ROOT/data (a finished data phase) and ROOT/run (trained to step 2 of 4, saved)."""
    target_dir, _ = make_pair("llama")
    root = tmp_path_factory.mktemp("distill-damage")
    assert main(["distill", str(target_dir), "--out", str(root / "run"), "--data", str(root / "data"),
                 *DATA_FLAGS, *TRAIN_FLAGS, "--stop-at", "2"]) == 0
    return target_dir, root


def _copy(saved_run, tmp_path: Path) -> tuple[Path, Path]:
    target_dir, root = saved_run
    shutil.copytree(root, tmp_path / "copy")
    return target_dir, tmp_path / "copy"


def _train(target_dir: Path, root: Path, *extra: str) -> int:
    return main(["distill", str(target_dir), "--out", str(root / "run"), "--data", str(root / "data"),
                 *DATA_FLAGS, *TRAIN_FLAGS, "--phase", "train", *extra])


def _state(root: Path) -> Path:
    return root / "run" / "training" / "step-0000002" / "state.json"


def _edit_state(root: Path, **fields) -> None:
    state = json.loads(_state(root).read_text())
    state.update(fields)
    _state(root).write_text(json.dumps(state))


DAMAGE = {
    "manifest is a list": (lambda r: (r / "data" / "manifest.json").write_text("[]"),
                           "data/manifest.json: expected a JSON object"),
    "manifest not UTF-8": (lambda r: (r / "data" / "manifest.json").write_bytes(b"\xff\xfe{}"),
                           "data/manifest.json: unreadable data manifest"),
    "shard cut short": (lambda r: (r / "data" / "shard-00000.npz").write_bytes(
                            (r / "data" / "shard-00000.npz").read_bytes()[:300]),
                        "data/shard-00000.npz: unreadable data shard"),
    "prompt line a list": (lambda r: (r / "data" / "prompts.jsonl").write_text("[1]\n"),
                           "data/prompts.jsonl line 1: expected a JSON object"),
    "latest.json a list": (lambda r: (r / "run" / "training" / "latest.json").write_text("[]"),
                           "training/latest.json: expected a JSON object"),
    "latest.json not UTF-8": (lambda r: (r / "run" / "training" / "latest.json").write_bytes(b"\xff"),
                              "training/latest.json: unreadable"),
    "latest.json dir a number": (lambda r: (r / "run" / "training" / "latest.json").write_text('{"dir": 5}'),
                                 "training/latest.json: \"dir\" = 5; expected the name of a step folder"),
    "state.json a list": (lambda r: _state(r).write_text("[]"),
                          "step-0000002/state.json: expected a JSON object"),
    "state.json cut short": (lambda r: _state(r).write_text(_state(r).read_text()[:100]),
                             "step-0000002/state.json: unreadable training state"),
    "sampler state emptied": (lambda r: _edit_state(r, sampler={}),
                              "step-0000002/state.json: unreadable training state"),
}


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_file_of_the_run_is_one_line_naming_it(saved_run, tmp_path, capsys, how):
    target_dir, root = _copy(saved_run, tmp_path)
    damage, expected = DAMAGE[how]
    damage(root)
    capsys.readouterr()
    assert _train(target_dir, root) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if not line.startswith("train: ")]
    assert len(lines) == 1 and lines[0].startswith("dflash-tui: error: ") and expected in lines[0], err


def test_damaged_log_lines_are_dropped_when_the_run_goes_on(saved_run, tmp_path):
    target_dir, root = _copy(saved_run, tmp_path)
    log = root / "run" / "train.jsonl"
    with open(log, "ab") as f:  # what a kill mid-write, or a disk error, leaves
        f.write(b'[1]\n"text"\n{"step": "3"}\n\xff\xfe\n{"step": 3, "lo')
    assert _train(target_dir, root, "--stop-at", "3") == 0
    steps = [json.loads(line)["step"] for line in log.read_text().splitlines()]
    assert steps == [1, 2, 3]
