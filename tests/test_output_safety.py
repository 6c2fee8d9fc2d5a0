"""Nothing the user has is lost to a run: `probe --out --force` keeps the earlier run until the
new one has opened, no output flag writes over a file of the model, and readers of what runs
wrote (bench-diff, replay, export) refuse what they cannot read in one line instead of
crashing or reporting a table that is quietly wrong."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from fixtures import write_drafter
from one_line import refusal

from dflash_tui.app.replay import load
from dflash_tui.cli import main
from dflash_tui.engine.errors import InputError
from dflash_tui.engine.compare_spec import parse_spec
from dflash_tui.trace_rounds import TraceRounds

DEEP = "[" * 100_000 + "]" * 100_000  # a line json.loads cannot parse without recursing past the limit


@pytest.fixture(scope="module")
def target(make_pair):
    return make_pair("llama", "DFlash2DraftModel")[0]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


# ---- probe --out DIR --force --------------------------------------------------------------

@pytest.fixture(scope="module")
def earlier_run(target, tmp_path_factory):
    out = tmp_path_factory.mktemp("earlier") / "run"
    assert main(["probe", str(target), "--prompt", "Hi", "--rounds", "3", "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("bad", ["drafter", "target", "prompt", "block"])
def test_force_keeps_the_earlier_run_when_the_new_one_is_refused(target, earlier_run, tmp_path,
                                                                 capsys, bad):
    out = tmp_path / "run"
    shutil.copytree(earlier_run, out)
    before = _files(out)
    assert {"round-0000.json", "round-0002.json", "summary.json"} <= before.keys()
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken-drafter"  # its config is fine: only the loader refuses it
    shutil.copytree(target / "draft", broken)
    (broken / "model.safetensors").write_bytes(b"")
    argv, needle = {
        "drafter": ([target, "--draft", broken], "model.safetensors"),
        "target": ([empty, "--draft", target / "draft"], "not a model directory"),
        "prompt": ([target, "--prompt", "The quick brown fox " * 1000], "has a context of 2048"),
        "block": ([target, "--block", "5000"], "exceeds the target's context"),
    }[bad]
    if bad != "prompt":
        argv += ["--prompt", "Hi"]
    capsys.readouterr()
    refusal(capsys, ["probe", *argv, "--rounds", "1", "--out", out, "--force"], needle)
    assert _files(out) == before  # the earlier run is whole


# ---- no output is a file of the model -----------------------------------------------------

@pytest.mark.parametrize("flag, file, owner", [
    ("--json", "config.json", "the target"),
    ("--csv", "draft/config.json", "the drafter"),
    ("--json", "model.safetensors", "the target"),
    ("--csv", "draft/model.safetensors", "the drafter"),
    ("--csv", "tokenizer.json", "the target"),
    ("--json", "a symlink elsewhere", "the target"),
    ("--csv", "a hard link elsewhere", "the target"),
])
def test_bench_output_naming_a_model_file_is_refused(breakable_pair, tmp_path, capsys, flag,
                                                     file, owner):
    model, draft = breakable_pair
    if file == "a symlink elsewhere":
        path = tmp_path / "results.json"
        path.symlink_to(model / "config.json")
    elif file == "a hard link elsewhere":
        path = tmp_path / "results.csv"
        os.link(model / "tokenizer_config.json", path)
    else:
        path = model / file
    before = {**_files(model), **{f"draft/{k}": v for k, v in _files(draft).items()}}
    folder = draft if owner == "the drafter" else model
    line = refusal(capsys, ["bench", model, flag, path, "--blocks", "2", "--max-tokens", "4"],
                   f"{flag} {path}: a file of {owner} ({folder}); write elsewhere")
    assert "bench:" not in capsys.readouterr().err  # refused before loading
    assert {**_files(model), **{f"draft/{k}": v for k, v in _files(draft).items()}} == before, line


def test_a_gguf_target_named_as_an_output_is_refused(target, tmp_path, capsys):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF stands in for a real one: the check comes before loading")
    refusal(capsys, ["bench", gguf, "--draft", target / "draft", "--csv", gguf],
            f"--csv {gguf}: is the target itself ({gguf}); write elsewhere")
    assert gguf.read_bytes().startswith(b"GGUF stands in")


@pytest.mark.parametrize("flag, file", [("--trace", "tokenizer.json"), ("--trace", "draft/config.json"),
                                        ("--export-dir", "model.safetensors")])
def test_tui_trace_or_export_dir_on_a_model_file_is_refused(breakable_pair, capsys, monkeypatch,
                                                            flag, file):
    monkeypatch.setattr("dflash_tui.app.main.run_live",
                        lambda *a, **k: pytest.fail(f"the app opened with {flag} on a model file"))
    model, draft = breakable_pair
    path = model / file
    before = path.read_bytes()
    owner = "the drafter" if file.startswith("draft/") else "the target"
    if flag == "--trace":  # it would append
        refusal(capsys, [model, flag, path], f"{flag} {path}: a file of {owner}", "write elsewhere")
    else:  # a file is no folder to export into
        refusal(capsys, [model, flag, path], f"{flag} {path}: exists and is not a directory")
    assert path.read_bytes() == before


def test_probe_out_is_no_model_folder_but_may_be_inside_one(breakable_pair, tmp_path, capsys):
    model, draft = breakable_pair
    before = _files(draft)
    refusal(capsys, ["probe", model, "--prompt", "Hi", "--rounds", "1", "--out", draft, "--force"],
            f"--out {draft}: is the folder of the drafter")
    assert _files(draft) == before
    assert main(["probe", str(model), "--prompt", "Hi", "--rounds", "1",
                 "--out", str(model / "runs")]) == 0
    assert (model / "runs" / "summary.json").is_file()


# ---- --compare residual-scale ---------------------------------------------------------------

@pytest.mark.parametrize("scale", ["1e300", "1e-300", "2e6", "5e-7"])
def test_residual_scale_outside_its_range_is_refused_before_loading(target, capsys, scale):
    refusal(capsys, ["probe", target, "--prompt", "Hi", "--compare", f"residual-scale={scale}"],
            f"residual-scale={scale}: expected a number from 1e-6 to 1e6")
    assert "loading" not in capsys.readouterr().err
    assert parse_spec("residual-scale=1e6").residual_scale == 1e6  # the bounds are taken
    assert parse_spec("residual-scale=1e-6").residual_scale == 1e-6


# ---- bench workloads ----------------------------------------------------------------------

def test_a_workload_named_all_is_refused(target, tmp_path, capsys):
    prompts = tmp_path / "prompts"
    for workload in ("prose", "all"):
        (prompts / workload).mkdir(parents=True)
        (prompts / workload / "01.txt").write_text("The quick brown fox\n")
    refusal(capsys, ["bench", target, "--prompts", prompts, "--blocks", "2", "--max-tokens", "4"],
            f"{prompts / 'all'}: a workload cannot be named 'all' (the tables' pooled row)")


# ---- traces -------------------------------------------------------------------------------

def _trace(recorded, tmp_path: Path, edit=None, name="trace.jsonl") -> Path:
    """A copy of a real three-round trace, its lines edited by `edit(lines) -> lines`."""
    lines = recorded[0].read_text().splitlines()
    path = tmp_path / name
    path.write_text("\n".join(edit(lines) if edit else lines) + "\n")
    return path


def _export(capsys, source: Path, out: Path) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["export", str(source), "--out", str(out)])
    got = capsys.readouterr()
    return code, got.out, got.err


def test_a_line_nested_too_deeply_is_skipped_and_counted(recorded, tmp_path, capsys):
    trace = _trace(recorded, tmp_path, lambda lines: lines[:2] + [DEEP] + lines[2:])
    loaded = load(trace)
    assert loaded.skipped == 1 and [len(s.rounds) for s in loaded.sessions] == [3]
    assert TraceRounds(trace)(2) is not None  # the app's reader of older rounds skips it too
    code, out, err = _export(capsys, trace, tmp_path / "tables")
    assert code == 0 and "rounds.csv: 3 rows" in out
    assert f"note: {trace}: 1 line damaged, skipped" in err


def test_export_of_a_trace_with_no_readable_round_is_refused_like_replay(recorded, tmp_path, capsys):
    trace = _trace(recorded, tmp_path, lambda lines: lines[:1] + [DEEP, "{torn"])
    expected = f"{trace}: the trace holds no complete round yet (2 lines damaged, skipped)"
    with pytest.raises(Exception, match=r"no complete round yet \(2 lines damaged"):
        load(trace)
    out = tmp_path / "tables"
    refusal(capsys, ["export", trace, "--out", out], expected)
    assert not out.exists()  # nothing written


@pytest.mark.parametrize("schema", ["something/else", "dflash-tui.bench/1"])
def test_a_trace_of_another_tool_is_refused(recorded, tmp_path, capsys, schema):
    def foreign(lines):
        header = json.loads(lines[0])
        header["schema"] = schema
        return [json.dumps(header)] + lines[1:]

    trace = _trace(recorded, tmp_path, foreign)
    needle = f"{trace}: not a dflash-tui trace (line 1 has schema '{schema}'"
    with pytest.raises(Exception, match=r"not a dflash-tui trace \(line 1 has schema"):
        load(trace)
    refusal(capsys, ["export", trace, "--out", tmp_path / "tables"], needle)


def test_a_trace_of_a_newer_version_is_read_with_a_note(recorded, tmp_path, capsys):
    def newer(lines):
        header = json.loads(lines[0])
        header["schema"] = "dflash-tui/trace@99"
        return [json.dumps(header)] + lines[1:]

    trace = _trace(recorded, tmp_path, newer)
    note = (f"note: {trace}: written by a newer dflash-tui (1 line of dflash-tui/trace@99, "
            "skipped); this version reads dflash-tui/trace@1")
    capsys.readouterr()
    loaded = load(trace)
    assert note in capsys.readouterr().err and len(loaded.notes) == 1
    assert [len(s.rounds) for s in loaded.sessions] == [3]
    code, out, err = _export(capsys, trace, tmp_path / "tables")
    assert code == 0 and note in err


# ---- quantize -----------------------------------------------------------------------------

def test_quantize_that_would_quantize_nothing_is_refused(target, tmp_path, capsys):
    config = json.loads((target / "draft" / "config.json").read_text())
    config["intermediate_size"] = 64  # every Linear is 64 wide; the codebooks 8
    narrow = write_drafter(tmp_path / "narrow", config)
    out = tmp_path / "q"
    refusal(capsys, ["quantize", narrow, "--bits", "4", "--group-size", "128", "--out", out],
            f"{narrow}: nothing would be quantized in groups of 128", "(groups of 32 or 64 fit)")
    refusal(capsys, ["quantize", target / "draft", "--bits", "4", "--out", out,
                     "--keep", "selector,fc,layers"],
            "nothing would be quantized: --keep selector,fc,layers leaves every quantizable "
            "module in float")
    assert not out.exists()


@pytest.mark.parametrize("keep", ["", " "])  # as `--keep ,` is
def test_quantize_keep_naming_nothing_is_refused(target, tmp_path, capsys, keep):
    out = tmp_path / "q"
    refusal(capsys, ["quantize", target / "draft", "--bits", "4", "--keep", keep, "--out", out],
            "--keep", "expected comma-separated module names with none empty")
    assert not out.exists()


def test_a_users_own_file_beside_the_model_may_be_written(breakable_pair):
    """Only what the loaders read is the model's: results.json beside it is the user's."""
    from dflash_tui.outputs import model_parts, not_a_model_file

    model, draft = breakable_pair
    parts = model_parts(model, draft)
    for mine in (model / "results.json", draft / "notes.csv", model / "runs" / "config.json"):
        mine.parent.mkdir(exist_ok=True)
        mine.write_text("mine")
        not_a_model_file("--json", mine, parts)  # no refusal
    with pytest.raises(InputError, match="a file of the target"):
        not_a_model_file("--json", model / "tokenizer_config.json", parts)
