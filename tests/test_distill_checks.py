"""What distill checks before any work, and the trainer as an optional part of dflash-tui."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from dflash_tui.cli import main

ROOT = Path(__file__).resolve().parent.parent
DATA_FLAGS = ["--num-prompts", "12", "--max-new-tokens", "16", "--seed", "2"]


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    lines = [line for line in err.splitlines() if not line.startswith("data: target ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_out_under_a_regular_file_is_refused_before_any_work(make_pair, tmp_path, capsys):
    target_dir, _ = make_pair("llama")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code = main(["distill", str(target_dir), "--out", str(blocker / "run"), *DATA_FLAGS])
    assert code == 2 and f"--out {blocker / 'run'}: cannot write there" in one_line_error(capsys)
    assert blocker.read_text() == "not a folder"


def test_out_that_holds_other_files_is_refused_and_left_alone(make_pair, tmp_path, capsys):
    target_dir, _ = make_pair("llama")
    out = tmp_path / "notes"
    out.mkdir()
    (out / "todo.txt").write_text("mine")
    code = main(["distill", str(target_dir), "--out", str(out), "--phase", "data", *DATA_FLAGS])
    message = one_line_error(capsys)
    assert code == 2 and f"--out {out}: not empty (todo.txt)" in message
    assert sorted(p.name for p in out.iterdir()) == ["todo.txt"], "nothing is written into it"


def test_a_stopped_data_phase_in_out_is_continued_not_refused(make_pair, tmp_path):
    target_dir, _ = make_pair("llama")
    out = tmp_path / "run"
    assert main(["distill", str(target_dir), "--out", str(out), "--phase", "data", *DATA_FLAGS]) == 0
    assert (out / "data" / "manifest.json").is_file()
    assert main(["distill", str(target_dir), "--out", str(out), "--phase", "data", *DATA_FLAGS]) == 0


def test_target_layer_ids_out_of_range_are_refused_before_the_data_phase(make_pair, tmp_path, capsys):
    target_dir, _ = make_pair("llama")  # 4 layers
    data = tmp_path / "data"
    code = main(["distill", str(target_dir), "--out", str(tmp_path / "out"), "--data", str(data),
                 *DATA_FLAGS, "--target-layer-ids", "1,99"])
    message = one_line_error(capsys)
    assert code == 2 and "--target-layer-ids 1,99: 99 is out of range for a target with 4 layers" in message
    assert not (data / "manifest.json").exists(), "no prompt or continuation is made for a run that cannot train"



def test_a_count_of_target_layers_that_is_not_the_lists_is_refused_before_any_work(make_pair, tmp_path, capsys):
    """The list wins over the count, and the training record would keep a count describing
    nothing: two flags that disagree are refused, as --init-from's shape flags are."""
    target_dir, _ = make_pair("llama")
    data = tmp_path / "data"
    code = main(["distill", str(target_dir), "--out", str(tmp_path / "out"), "--data", str(data),
                 "--phase", "data", *DATA_FLAGS, "--target-layers", "3", "--target-layer-ids", "0,2"])
    message = one_line_error(capsys)
    assert code == 2 and "--target-layers 3 --target-layer-ids 0,2: the list names 2 layers" in message
    assert not data.exists()

def _run_cli(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_distill_without_the_trainer_installed_says_how_to_get_it():
    # The import system's own answer for a package that is not installed.
    result = _run_cli(
        "import sys\n"
        "class NotInstalled:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'dflash_tui_distill':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NotInstalled())\n"
        "from dflash_tui.cli import main\n"
        "sys.exit(main(['distill', '--out', 'x']))\n")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        'dflash-tui: error: distill: the trainer is not installed: pip install "dflash-tui[distill]" '
        "(from a checkout: pip install ./distill)"]


def test_the_debugger_does_not_import_the_trainer():
    result = _run_cli(
        "import sys\n"
        "from dflash_tui.cli import parse\n"
        "import dflash_tui.app.main, dflash_tui.bench.command, dflash_tui.probe\n"
        "for argv in (['probe', '--prompt', 'hi'], ['bench'], ['replay', 't.jsonl'], []):\n"
        "    parse(argv)\n"
        "print(sorted(m for m in sys.modules if m.startswith('dflash_tui_distill')))\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_debuggers_package_does_not_ship_the_trainer():
    base = tomllib.loads((ROOT / "pyproject.toml").read_text())
    trainer = tomllib.loads((ROOT / "distill" / "pyproject.toml").read_text())
    shipped = base["tool"]["setuptools"]["packages"]
    folders = [ROOT / base["tool"]["setuptools"]["package-dir"].get(p, p.replace(".", "/")) for p in shipped]
    assert not any((folder / "cli.py").is_file() and (folder / "trainer.py").is_file() for folder in folders)
    assert base["project"]["optional-dependencies"]["distill"] == [
        f"{trainer['project']['name']}=={trainer['project']['version']}"]
    assert trainer["tool"]["setuptools"]["packages"] == ["dflash_tui_distill",
                                                         "dflash_tui_distill.prompt_data"]
    data = trainer["tool"]["setuptools"]["package-data"]["dflash_tui_distill.prompt_data"]
    assert data == ["*.json"] and list((ROOT / "distill" / "dflash_tui_distill" / "prompt_data").glob(data[0]))


def test_a_missing_prompts_from_file_is_refused_before_any_work(make_pair, tmp_path, capsys):
    target_dir, _ = make_pair("llama")
    out = tmp_path / "out"
    code = main(["distill", str(target_dir), "--out", str(out), "--prompts-from", str(tmp_path / "no.jsonl")])
    assert code == 2 and f"--prompts-from {tmp_path / 'no.jsonl'}: no such file" in one_line_error(capsys)
    assert not out.exists()


@pytest.mark.parametrize("make_bad", ["missing", "not-utf8"])
def test_a_bad_extra_prompts_file_is_refused_before_the_target_generates(make_pair, tmp_path, capsys,
                                                                        make_bad):
    target_dir, _ = make_pair("llama")
    extra = tmp_path / "extra.txt"
    if make_bad == "not-utf8":
        extra.write_bytes(b"\xff\xfe caf\xe9\n")
    out = tmp_path / "out"
    code = main(["distill", str(target_dir), "--out", str(out), "--phase", "data",
                 "--extra-prompts", str(extra)])
    assert code == 2 and f"--extra-prompts {extra}: " in one_line_error(capsys)
    assert not out.exists()  # nothing generated, no empty data folder left behind


@pytest.mark.parametrize("flags, expected", [
    # NaN (and an infinite rate or loss weight) trained on in silence to a NaN drafter,
    # saved with exit 0; a NaN time limit stopped at once, saving an untrained one
    (["--time-limit", "nan"], "--time-limit nan: expected a positive number of seconds"),
    (["--lr", "inf"], "--lr inf: expected a positive learning rate"),
    (["--clip", "nan"], "--clip nan: expected a number above 0"),
    (["--decay", "nan"], "--decay nan: expected a number above 0"),
    (["--weight-decay", "nan"], "--weight-decay nan: expected a finite number >= 0"),
    (["--weight-decay", "inf"], "--weight-decay inf: expected a finite number >= 0"),
    (["--selector-weight", "nan"], "--selector-weight nan: expected a finite number >= 0"),
    (["--selector-weight", "inf"], "--selector-weight inf: expected a finite number >= 0"),
])
def test_nan_and_infinite_training_numbers_are_refused_before_any_work(make_pair, tmp_path, capsys,
                                                                       flags, expected):
    target_dir, _ = make_pair("llama")
    out = tmp_path / "out"
    code = main(["distill", str(target_dir), "--out", str(out), *DATA_FLAGS, "--steps", "2",
                 "--layers", "1", "--block", "3", "--rank", "4", "--top-k", "4", "--batch", "2",
                 "--seq-len", "32", "--anchors", "2", "--eval-every", "0", "--session-tokens", "0",
                 "--no-progress", *flags])
    assert code == 2 and expected in one_line_error(capsys)
    assert not out.exists(), "nothing is written"


@pytest.mark.parametrize("listed", ["2,0,1", "0,1,1"])
def test_target_layer_ids_out_of_order_or_repeated_are_refused_before_any_work(
        make_pair, tmp_path, capsys, listed):
    """fc reads the captured layers in the list's order: such a list trained (a repeat fed
    one layer twice) and wrote a drafter the engine then called unusual."""
    target_dir, _ = make_pair("llama")
    data = tmp_path / "data"
    code = main(["distill", str(target_dir), "--out", str(tmp_path / "out"), "--data", str(data),
                 "--phase", "data", *DATA_FLAGS, "--target-layer-ids", listed])
    message = one_line_error(capsys)
    assert code == 2 and f"--target-layer-ids {listed}: expected target layer ids in ascending order" in message
    assert not data.exists()
