"""Every output is checked before the work starts (dflash_tui/outputs.py): a run never
computes for minutes and then fails to write, and a reused `probe --out` never mixes runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from one_line import refusal

from dflash_tui.cli import main


@pytest.fixture(scope="module")
def target(make_pair):
    return make_pair("llama", "DFlash2DraftModel")[0]


@pytest.fixture
def unwritable(tmp_path):
    """A folder in which nothing running the tests can create a file: one without write
    permission, or where permission bits do not bind (root), sysfs."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        (locked / "probe").touch()
    except PermissionError:
        yield locked
    else:
        (locked / "probe").unlink()
        try:
            (Path("/sys") / "dflash-tui-probe").touch()
        except OSError:
            yield Path("/sys")
        else:
            pytest.skip("no folder here refuses new files")
    finally:
        locked.chmod(0o755)


def _blocker(tmp_path) -> Path:
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where a folder should be")
    return blocker


@pytest.mark.parametrize("where", ["existing file", "under a file", "unwritable"])
def test_probe_out_that_cannot_be_a_folder_is_refused_before_loading(target, tmp_path, capsys,
                                                                    unwritable, where):
    out = {"existing file": _blocker(tmp_path), "under a file": _blocker(tmp_path) / "out",
           "unwritable": unwritable / "out"}[where]
    code = main(["probe", str(target), "--prompt", "Hi", "--rounds", "1", "--out", str(out)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("dflash-tui: error: ")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert f"--out {out}" in lines[0]
    assert "loading target" not in err  # refused before any work


@pytest.mark.parametrize("flag", ["--json", "--csv"])
@pytest.mark.parametrize("where", ["unwritable", "a folder", "under a file"])
def test_bench_output_that_cannot_be_written_is_refused_before_the_bench(target, tmp_path, capsys,
                                                                       unwritable, flag, where):
    path = {"unwritable": unwritable / "bench.out", "a folder": tmp_path,
            "under a file": _blocker(tmp_path) / "bench.out"}[where]
    refusal(capsys, ["bench", target, "--max-tokens", "2", "--blocks", "1", "--limit", "1",
                     flag, path], f"{flag} {path}")
    assert not list(tmp_path.glob("*.out"))


def _round_files(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob("round-*"))


def test_probe_out_reused_is_refused_and_force_replaces_only_that_run(target, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["probe", str(target), "--prompt", "Hi", "--rounds", "5", "--out", str(out)]) == 0
    (out / "notes.txt").write_text("the user's own file")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()

    refusal(capsys, ["probe", target, "--prompt", "Hi", "--rounds", "2", "--out", out],
            f"--out {out}", "not empty", "--force")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing touched

    assert main(["probe", str(target), "--prompt", "Hi", "--rounds", "2", "--out", str(out),
                 "--force"]) == 0
    assert _round_files(out) == ["round-0000.json", "round-0001.json"]
    assert json.loads((out / "summary.json").read_text())["rounds"] == 2
    assert (out / "notes.txt").read_text() == "the user's own file"


def test_force_without_out_is_refused(target, capsys):
    refusal(capsys, ["probe", target, "--prompt", "Hi", "--force"], "--force", "--out")


@pytest.mark.parametrize("flag, where", [
    ("--trace", "a folder"), ("--trace", "unwritable"), ("--trace", "under a file"),
    ("--export-dir", "a file"), ("--export-dir", "unwritable"), ("--export-dir", "under a file"),
])
def test_tui_outputs_are_checked_before_the_app_opens(target, tmp_path, capsys, monkeypatch,
                                                      unwritable, flag, where):
    def app_opened(*args, **kwargs):
        raise AssertionError(f"the app opened with a bad {flag}")

    monkeypatch.setattr("dflash_tui.app.main.run_live", app_opened)
    path = {"a folder": tmp_path, "a file": _blocker(tmp_path), "unwritable": unwritable / "x",
            "under a file": _blocker(tmp_path) / "x"}[where]
    refusal(capsys, [target, flag, path], f"{flag} {path}")


@pytest.mark.parametrize("spelling", ["same path", "a link to it"])
def test_trace_on_the_prompt_file_is_refused_before_the_app_opens(target, tmp_path, capsys,
                                                                  monkeypatch, spelling):
    monkeypatch.setattr("dflash_tui.app.main.run_live",
                        lambda *a, **k: pytest.fail("the app opened with --trace on the prompt"))
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("def add(a, b):\n")
    trace = prompt if spelling == "same path" else tmp_path / "link.txt"
    if trace != prompt:
        trace.symlink_to(prompt)
    refusal(capsys, [target, "--prompt-file", prompt, "--trace", trace],
            f"--trace {trace}: same file as --prompt-file")
    assert prompt.read_text() == "def add(a, b):\n"
