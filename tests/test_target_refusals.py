"""Targets are loaded strictly: a path that is not a model, a config.json missing a field
the architecture needs, a prompt longer than the target's context. One line each, in the
CLI and on the TUI's error screen alike."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from one_line import refusal
from app_helpers import launch, wait_for


def _edit_config(target: Path, **changes) -> None:
    config = json.loads((target / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key)
        else:
            config[key] = value
    (target / "config.json").write_text(json.dumps(config))


def test_config_without_hidden_size_names_the_field(breakable_pair, capsys):
    target, _ = breakable_pair
    _edit_config(target, hidden_size=None)
    refusal(capsys, ["probe", target, "--prompt", "Hi"],
            str(target / "config.json"), "missing required field 'hidden_size'", "llama")


def test_config_without_hidden_size_on_the_tui_error_screen(breakable_pair, tmp_path):
    from dflash_tui.app.live import LiveApp

    target, draft = breakable_pair
    _edit_config(target, hidden_size=None)

    async def scenario():
        app = LiveApp(launch((target, draft)), show_timings=False, export_dir=tmp_path / "sessions")
        async with app.run_test(size=(120, 35)) as pilot:
            await wait_for(pilot, lambda: app.failure is not None, what="the refusal")
            await pilot.press("q")
        return app

    app = asyncio.run(scenario())
    message = app.failure.message
    assert "missing required field 'hidden_size'" in message and "\n" not in message
    assert "TypeError" not in message and not app.failure.detail  # an InputError, not a crash
    assert app.return_code == 2


@pytest.mark.parametrize("model", ["empty folder", "regular file"])
@pytest.mark.parametrize("command", [[], ["probe"], ["bench"]])
def test_a_model_path_that_is_no_model_says_so(tmp_path, capsys, monkeypatch, model, command):
    monkeypatch.setattr("dflash_tui.app.main.run_live", lambda *a, **k: pytest.fail("app opened"))
    if model == "empty folder":
        path = tmp_path / "empty"
        path.mkdir()
        needle = "not a model directory"
    else:
        path = Path("/etc/passwd")
        needle = "not a model"
    line = refusal(capsys, [*command, path], str(path), needle)
    assert "drafter" not in line


LONG_PROMPT = " ".join(["The quick brown fox jumps over the lazy dog."] * 20)


def _short_context(target: Path) -> int:
    """The target's context cut to 64 positions; the tokens of LONG_PROMPT, more than that."""
    _edit_config(target, max_position_embeddings=64)
    from dflash_tui.engine.target import load_target

    tokens = len(load_target(target).tokenizer.encode(LONG_PROMPT))
    assert tokens > 64
    return tokens


@pytest.mark.parametrize("source", ["--prompt", "--prompt-file", "bench"])
def test_a_prompt_longer_than_the_target_context_is_refused_naming_its_source(
        breakable_pair, tmp_path, capsys, source):
    """The prompt is too long to quote: the line starts with where it came from (the flag,
    the file), as the user gave it."""
    target, _ = breakable_pair
    tokens = _short_context(target)
    prompt_file = tmp_path / "prompts" / "prose" / "01.txt"
    prompt_file.parent.mkdir(parents=True)
    prompt_file.write_text(LONG_PROMPT)
    if source == "--prompt":
        argv, lead = ["probe", target, "--prompt", LONG_PROMPT, "--raw"], "--prompt"
    elif source == "--prompt-file":
        argv, lead = ["probe", target, "--prompt-file", prompt_file, "--raw"], f"--prompt-file {prompt_file}"
    else:
        argv = ["bench", target, "--prompts", tmp_path / "prompts", "--raw", "--blocks", "2",
                "--max-tokens", "2"]
        lead = str(prompt_file)
    line = refusal(capsys, argv, "context of 64 tokens", str(target))
    assert line.startswith(f"dflash-tui: error: {lead}: the prompt is {tokens} tokens; "), line


def test_the_tui_names_where_a_prompt_past_the_context_came_from(breakable_pair, tmp_path):
    """--prompt-file F at launch: the session cannot open, and the line says which file (a
    prompt typed in the prompt dialog: tests/test_app_live.py)."""
    from dflash_tui.app.live import LiveApp
    from dflash_tui.app.main import launch_from_args
    from dflash_tui.cli import parse

    target, _ = breakable_pair
    tokens = _short_context(target)
    prompt_file = tmp_path / "long.txt"
    prompt_file.write_text(LONG_PROMPT)
    _, args = parse([str(target), "--prompt-file", str(prompt_file), "--raw", "--no-trace"])

    async def scenario():
        app = LiveApp(launch_from_args(args), show_timings=False, export_dir=tmp_path / "sessions")
        async with app.run_test(size=(120, 35)) as pilot:
            await wait_for(pilot, lambda: app.failure is not None, what="the refusal")
            await pilot.press("q")
        return app

    app = asyncio.run(scenario())
    assert app.failure.message.startswith(f"--prompt-file {prompt_file}: the prompt is {tokens} tokens; ")
    assert app.return_code == 2


def test_a_block_wider_than_the_target_context_is_refused(breakable_pair, capsys):
    target, _ = breakable_pair
    _edit_config(target, max_position_embeddings=64)
    refusal(capsys, ["probe", target, "--prompt", "Hi", "--block", "64"],
            "a block of 64 proposals (65 positions)", "context of 64 tokens")


def test_mlx_s_strict_load_error_is_read_as_the_loaders_need():
    """The one reading of mlx's strict load_weights error that the folder and GGUF loaders
    share: which kind, how many, the first name (of a list mlx gives one per line)."""
    import mlx.core as mx
    import mlx.nn as nn
    from mlx.utils import tree_flatten

    from dflash_tui.engine.errors import strict_load_names

    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    every = tree_flatten(model.parameters())
    for weights, expected in (([every[0]], ("Missing", 3, "layers.0.bias")),
                              (every + [("extra.weight", mx.zeros(1))], ("Received", 1, "extra.weight"))):
        with pytest.raises(ValueError) as error:
            model.load_weights(weights, strict=True)
        assert strict_load_names(error.value) == expected
    assert strict_load_names(ValueError("[load] something else")) is None
