"""The first word and --draft: a mistyped command, a file or a target folder given as the
drafter are each named for what they are, in one line, before any model loads."""

from __future__ import annotations

import shutil

import pytest

from one_line import refusal

from dflash_tui.cli import COMMANDS, build_parsers


@pytest.fixture(autouse=True)
def no_app(monkeypatch):
    monkeypatch.setattr("dflash_tui.app.main.run_live", lambda *a, **k: pytest.fail("app opened"))


def test_a_mistyped_command_is_named_with_the_commands(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no file named bench-dif here
    line = refusal(capsys, ["bench-dif", "a.json", "b.json"], "unknown command 'bench-dif'",
                   "did you mean 'bench-diff'?", ", ".join(COMMANDS))
    assert "unrecognized arguments" not in line


def test_an_existing_folder_is_still_a_model_dir(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "probx").mkdir()
    line = refusal(capsys, ["probx"], "probx: not a model directory")
    assert "unknown command" not in line


def test_the_help_lists_every_command():
    epilog = build_parsers()["tui"].epilog
    assert all(command in epilog for command in COMMANDS) and "bench-diff" in epilog


@pytest.mark.parametrize("name", ["empty", "drafter.gguf"])
@pytest.mark.parametrize("command", [[], ["probe"], ["bench"]])
def test_a_file_given_as_the_drafter_is_called_a_file(make_pair, tmp_path, capsys, name, command):
    target, _ = make_pair("llama", "DFlash2DraftModel")
    draft = tmp_path / name
    draft.write_bytes(b"" if name == "empty" else b"GGUF")
    line = refusal(capsys, [*command, target, "--draft", draft],
                   f"{draft}: a file, not a drafter directory")
    assert "no such" not in line


@pytest.mark.parametrize("command", [[], ["probe"], ["bench"]])
def test_a_target_folder_given_as_the_drafter_says_so(make_pair, capsys, command):
    target, _ = make_pair("llama", "DFlash2DraftModel")
    refusal(capsys, [*command, target, "--draft", target],
            f"{target / 'config.json'}: looks like a target model (model_type = 'llama'",
            "not a DFlash drafter")


@pytest.mark.parametrize("command", [[], ["probe"], ["bench"]])
def test_a_draft_folder_refused_by_the_check_starts_with_draft(make_pair, tmp_path, capsys, command):
    """Two drafter folders can be on one command line (--draft and --compare DIR): each
    refusal says which option gave it, as --compare's always did (the path is not repeated)."""
    target, _ = make_pair("llama", "DFlash2DraftModel")
    missing = tmp_path / "no-drafter"
    line = refusal(capsys, [*command, target, "--draft", missing],
                   f"error: --draft {missing}: no such drafter directory")
    assert line.count(str(missing)) == 1
    broken = tmp_path / "broken-drafter"
    broken.mkdir()
    (broken / "config.json").write_text("{")
    refusal(capsys, [*command, target, "--draft", broken],
            f"error: --draft {broken}: {broken / 'config.json'}: not valid JSON")


@pytest.mark.parametrize("command", [["probe"], ["bench", "--max-tokens", "2", "--limit", "1"]])
def test_a_draft_folder_refused_by_the_loader_starts_with_draft(make_pair, tmp_path, capsys, command):
    """The weights are read after the target loads (the check before reads config.json
    only): the loader's refusal names --draft too."""
    target, draft = make_pair("llama", "DFlash2DraftModel")
    broken = tmp_path / "torn-weights"
    shutil.copytree(draft, broken)
    (broken / "model.safetensors").write_bytes(b"")
    refusal(capsys, [command[0], target, "--draft", broken, *command[1:]],
            f"error: --draft {broken}: {broken / 'model.safetensors'}: unreadable safetensors")


@pytest.mark.parametrize("command", [[], ["probe"], ["bench"]])
def test_a_compare_folder_gets_the_drafter_checks_before_the_target_loads(
        make_pair, tmp_path, capsys, monkeypatch, command):
    target, _ = make_pair("llama", "DFlash2DraftModel")
    monkeypatch.setattr("dflash_tui.engine.api.load_target",
                        lambda *a, **k: pytest.fail("the target loaded first"))
    refusal(capsys, [*command, target, "--compare", target],
            f"error: --compare {target}: {target / 'config.json'}: looks like a target model")
    broken = tmp_path / "broken-drafter"
    broken.mkdir()
    (broken / "config.json").write_text("{")
    refusal(capsys, [*command, target, "--compare", broken],
            f"error: --compare {broken}: {broken / 'config.json'}: not valid JSON")


@pytest.mark.parametrize("argv, needle", [
    (["--compare-tol", "abc"], "argument --compare-tol: invalid float value: 'abc'"),
    (["--block", "abc"], "argument --block: invalid int value: 'abc'"),
    (["probe", "--rounds", "abc"], "argument --rounds: invalid int value: 'abc'"),
    (["bench", "--max-tokens", "1.5"], "argument --max-tokens: invalid int value: '1.5'"),
    (["bench-diff", "a.json", "b.json", "--resamples", "x"],
     "argument --resamples: invalid int value: 'x'"),
    (["quantize", "d", "--out", "o", "--bits", "x"], "argument --bits: invalid int value: 'x'"),
    (["replay", "t", "--nope"], "unrecognized arguments: --nope"),
    (["export", "s", "--out", "o", "--session", "q"], "argument --session: invalid int value: 'q'"),
    (["distill", "--out", "o", "--nope"], "unrecognized arguments: --nope"),
])
def test_argparse_errors_have_one_prefix(capsys, argv, needle):
    """argparse's own refusals, for every command's parser: `dflash-tui: error:` once, then
    the flag and what was wrong (the parser's own prog, `dflash-tui probe:`, no more)."""
    line = refusal(capsys, argv, needle)
    assert line == f"dflash-tui: error: {needle}"


def test_an_abbreviated_option_is_refused_by_its_name(make_pair, capsys):
    """`bench --prompt Hi` was taken as `--prompts Hi` (argparse completes a prefix) and
    refused as a missing directory: an option that is not one is named as such."""
    target, _ = make_pair("llama", "DFlash2DraftModel")
    line = refusal(capsys, ["bench", target, "--prompt", "Hi"], "unrecognized arguments: --prompt")
    assert "--prompts" not in line and "no such directory" not in line


@pytest.mark.parametrize("command", sorted(build_parsers()))
def test_no_command_completes_abbreviations(command):
    assert build_parsers()[command].allow_abbrev is False
