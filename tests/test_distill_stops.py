"""A distill command that is stopped keeps its work and can be run again: ctrl-c during
training saves the steps done, a run killed before its first save is continued, not
refused. Real processes and real signals on the tiny llama fixture."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import mlx.core as mx
import pytest

from distill_flags import DATA_FLAGS, TRAIN_FLAGS

from dflash_tui.cli import main

TRAIN_FLAGS = [*TRAIN_FLAGS, "--phase", "train", "--eval-every", "0"]


@pytest.fixture(scope="module")
def data_dir(make_pair, tmp_path_factory):
    target_dir, _ = make_pair("llama")
    data = tmp_path_factory.mktemp("distill-stops") / "data"
    assert main(["distill", str(target_dir), "--out", str(data.parent / "unused"), "--data", str(data),
                 "--phase", "data", *DATA_FLAGS]) == 0
    return target_dir, data


def _command(target_dir: Path, data: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "dflash_tui", "distill", str(target_dir), "--out", str(out),
            "--data", str(data), *DATA_FLAGS, *TRAIN_FLAGS, *extra]


def _stop_after(command: list[str], steps: int, sig: int) -> tuple[int, str]:
    """Run `command`, send `sig` once `steps` step lines are out; (exit code, stderr)."""
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen, lines = 0, []
    for line in child.stderr:
        lines.append(line)
        seen += line.startswith("step ")
        if seen == steps:
            child.send_signal(sig)
            break
    _, err = child.communicate(timeout=120)
    return child.returncode, "".join(lines) + err


def _logged_steps(out: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (out / "train.jsonl").read_text().splitlines()]


def test_ctrl_c_saves_the_steps_done_and_the_same_command_continues(data_dir, tmp_path):
    target_dir, data = data_dir
    out = tmp_path / "run"
    # --save-every far away: without the save on ctrl-c every step would be lost
    code, err = _stop_after(_command(target_dir, data, out, "--steps", "100000", "--save-every", "1000"),
                            3, signal.SIGINT)
    assert code == 130 and "Traceback" not in err, err
    saved = json.loads((out / "training" / "latest.json").read_text())["step"]
    assert saved >= 3 and _logged_steps(out) == list(range(1, saved + 1))
    assert f"train: interrupted at step {saved}/100000; saved" in err
    assert (out / "model.safetensors").is_file() and (out / "config.json").is_file()
    # the same command again goes on from the save, and the log holds each step once
    assert main(["distill", str(target_dir), "--out", str(out), "--data", str(data), *DATA_FLAGS,
                 *TRAIN_FLAGS, "--steps", "100000", "--save-every", "1000",
                 "--stop-at", str(saved + 2)]) == 0
    assert _logged_steps(out) == list(range(1, saved + 3))


def test_a_run_killed_before_its_first_save_is_started_again_not_refused(data_dir, tmp_path):
    target_dir, data = data_dir
    out = tmp_path / "run"
    command = _command(target_dir, data, out, "--steps", "100000", "--save-every", "1000")
    code, _ = _stop_after(command, 4, signal.SIGKILL)  # a kill leaves only the log lines
    assert code == -signal.SIGKILL and not (out / "training" / "latest.json").exists()
    assert len(_logged_steps(out)) >= 3
    # the same command starts the run again (its folder holds only this run's logs), and
    # the log holds the new run's steps alone
    assert main(["distill", str(target_dir), "--out", str(out), "--data", str(data), *DATA_FLAGS,
                 *TRAIN_FLAGS, "--steps", "100000", "--save-every", "1000", "--stop-at", "2"]) == 0
    assert _logged_steps(out) == [1, 2]


def test_a_folder_with_a_log_of_another_tool_is_still_refused(data_dir, tmp_path, capsys):
    target_dir, data = data_dir
    out = tmp_path / "other"
    out.mkdir()
    (out / "train.jsonl").write_text('{"epoch": 1, "loss": 2.5}\n')
    assert main(["distill", str(target_dir), "--out", str(out), "--data", str(data), *DATA_FLAGS,
                 *TRAIN_FLAGS, "--steps", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--out {out}: not empty (train.jsonl)" in err
    assert (out / "train.jsonl").read_text() == '{"epoch": 1, "loss": 2.5}\n'


def test_a_loss_gone_nan_stops_the_run_and_keeps_the_last_finite_save(data_dir, tmp_path, capsys):
    target_dir, data = data_dir
    out = tmp_path / "run"
    # a learning rate far too high: the weights go NaN within a few steps (saved every step,
    # so a save of the NaN weights would replace the last good one)
    code = main(["distill", str(target_dir), "--out", str(out), "--data", str(data), *DATA_FLAGS,
                 *TRAIN_FLAGS, "--steps", "40", "--save-every", "1", "--lr", "100", "--warmup", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    message = [line for line in err.splitlines() if line.startswith("dflash-tui: error: ")]
    assert len(message) == 1 and "stopped without saving it" in message[0] and "--lr" in message[0]
    saved = json.loads((out / "training" / "latest.json").read_text())["step"]
    assert f"keeps step {saved}'s weights" in message[0]
    params = mx.load(str(out / "training" / f"step-{saved:07d}" / "params.safetensors"))
    assert all(mx.isfinite(p).all().item() for p in params.values())
    weights = mx.load(str(out / "model.safetensors"))
    assert all(mx.isfinite(w).all().item() for w in weights.values())
