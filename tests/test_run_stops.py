"""A run that is stopped keeps what it computed. probe: ctrl-c and a full disk both end with
whole round files, a summary.json of exactly those rounds marked interrupted (where the disk
still takes it), and one line saying what happened; bench: a --json that cannot be written
at the end is named in one line after the tables are printed. Real processes, real signals,
a real full file system (a small tmpfs where this machine lets us mount one) or a real file
size limit."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

PREFIX = "dflash-tui: error: "


@pytest.fixture(scope="module")
def target(make_pair):
    return make_pair("llama", "DFlash2DraftModel")[0]


def _probe(target: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "dflash_tui", "probe", str(target), "--prompt", "Hi",
            "--out", str(out), *extra]


def _check_whole(out: Path) -> dict:
    """Every file in `out` parses; the summary lists exactly the round files present."""
    rounds = sorted(out.glob("round-*.json"))
    for file in rounds:
        json.loads(file.read_text())
    assert not list(out.glob(".*.tmp")), "a temp file was left behind"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounds"] == len(rounds) == len(summary["accepted_per_round"])
    assert len(summary["tokens"]) == 1 + sum(summary["committed_per_round"])
    assert [f.name for f in rounds] == [f"round-{i:04d}.json" for i in range(len(rounds))]
    return summary


def test_ctrl_c_writes_the_summary_of_the_rounds_done(target, tmp_path):
    out = tmp_path / "run"
    child = subprocess.Popen(
        _probe(target, out, "--rounds", "100000"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = 0
    for line in child.stdout:  # ctrl-c once five rounds are out
        seen += line.startswith("round ")
        if seen == 5:
            child.send_signal(signal.SIGINT)
            break
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    assert "Traceback" not in err
    summary = _check_whole(out)
    assert summary["interrupted"] is True and summary["rounds"] >= 5
    assert f"interrupted after {summary['rounds']} rounds" in err
    assert str(out / "summary.json") in err


def _tmpfs(mount_point: Path, size: str) -> bool:
    mount_point.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
                          capture_output=True).returncode == 0


def _file_size_limit(limit: int):
    def apply():  # Python ignores SIGXFSZ, so an over-long write fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.parametrize("full", ["tmpfs", "file size limit"])
def test_a_full_disk_stops_with_one_line_naming_the_file(target, tmp_path, full):
    if full == "tmpfs":
        disk = tmp_path / "disk"
        if not _tmpfs(disk, "300k"):  # a few 80 KB rounds fit, then the disk is full
            pytest.skip("cannot mount a tmpfs here (needs root)")
        out, argv, limit = disk / "run", _probe(target, disk / "run", "--rounds", "50"), None
    else:
        # each round's .json fits under the limit, its .npz of raw buffers does not
        out, argv = tmp_path / "run", _probe(target, tmp_path / "run", "--rounds", "50", "--npz")
        limit = _file_size_limit(150_000)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, preexec_fn=limit)
        errors = [line for line in proc.stderr.splitlines() if line.startswith(PREFIX)]
        assert proc.returncode == 2 and len(errors) == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        assert str(out / "round-") in errors[0] and "cannot write" in errors[0]
        failed = Path(errors[0][len(PREFIX):].split(":")[0])
        assert not failed.exists()  # the round that could not be written is not there at all
        if (out / "summary.json").exists():
            summary = _check_whole(out)
            assert summary["interrupted"] is True and "cannot write" in summary["error"]
        else:
            assert "summary.json not written either" in errors[0]
            assert all(json.loads(f.read_text()) for f in out.glob("round-*.json"))
    finally:
        if full == "tmpfs":
            subprocess.run(["umount", str(tmp_path / "disk")], capture_output=True)


def test_bench_json_on_a_full_disk_is_named_after_the_tables(target, tmp_path):
    (tmp_path / "prompts" / "prose").mkdir(parents=True)
    (tmp_path / "prompts" / "prose" / "01.txt").write_text("The quick brown fox")
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "dflash_tui", "bench", str(target), "--prompts", str(tmp_path / "prompts"),
         "--blocks", "2", "--max-tokens", "4", "--json", str(out)],
        capture_output=True, text=True, timeout=300, preexec_fn=_file_size_limit(2_000))
    errors = [line for line in proc.stderr.splitlines() if line.startswith(PREFIX)]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert errors[0].startswith(f"{PREFIX}{out}: cannot write")
    assert "Accepted proposals per round" in proc.stdout  # the numbers reached the screen
    assert not out.exists() and not list(tmp_path.glob(".bench.json.*"))
