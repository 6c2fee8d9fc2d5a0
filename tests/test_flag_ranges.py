"""Numeric flags out of range are refused by every command alike, before anything loads
(dflash_tui/flag_ranges.py), and a merely unusual block runs with a note."""

from __future__ import annotations

import json

import pytest

from fixtures import drafter_tensors, write_drafter
from one_line import refusal

from dflash_tui.cli import main

COMMANDS = {  # argv before the flag under test: the TUI launcher, probe, bench
    "tui": [],
    "probe": ["probe"],
    "bench": ["bench"],
}


@pytest.fixture(scope="module")
def target(make_pair):
    return make_pair("llama", "DFlash2DraftModel")[0]


@pytest.fixture(autouse=True)
def no_app(monkeypatch):
    """A TUI launch that got past its checks fails the test instead of opening the app."""
    def app_opened(*args, **kwargs):
        raise AssertionError("the app opened")

    monkeypatch.setattr("dflash_tui.app.main.run_live", app_opened)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("value", ["nan", "-1", "inf"])
def test_temperature_nan_negative_or_infinite_is_refused(target, capsys, command, value):
    refusal(capsys, [*COMMANDS[command], target, "--temperature", value],
            f"--temperature {value}:", "finite", "0 for greedy")  # as typed: not -1.0


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("value", ["0", "-5"])
def test_max_tokens_below_one_is_refused(target, capsys, command, value):
    # probe --max-tokens 0 used to mean "the default 64" (args.max_tokens or ...)
    refusal(capsys, [*COMMANDS[command], target, "--max-tokens", value],
            f"--max-tokens {value}", "at least 1")


@pytest.mark.parametrize("value", ["0", "-3"])
def test_probe_rounds_below_one_is_refused(target, capsys, value):
    # it used to run no round and print "... tokens/s" for nothing
    refusal(capsys, ["probe", target, "--rounds", value], f"--rounds {value}", "at least 1 round")


@pytest.mark.parametrize("command", ["tui", "probe"])
def test_negative_seed_is_refused(target, capsys, command):
    refusal(capsys, [*COMMANDS[command], target, "--seed", "-1"], "--seed -1", "0 or more")


def test_block_past_the_trained_block_runs_with_a_note(make_pair, tmp_path, capsys):
    """--block 1000 on a block-8 drafter is unusual, not wrong: it runs, and says so."""
    target, draft = make_pair("llama", "DFlash2DraftModel")
    config = json.loads((draft / "config.json").read_text())
    config["dflash_config"]["block_size"] = 8
    block8 = write_drafter(tmp_path / "block8", config, tensors=drafter_tensors(config))
    code = main(["probe", str(target), "--draft", str(block8), "--prompt", "Hi", "--block", "1000",
                 "--rounds", "1", "--no-probes"])
    captured = capsys.readouterr()
    assert code == 0
    notes = [line for line in captured.err.splitlines() if line.startswith("note: ")]
    assert any("1000" in note and "7" in note and "trained" in note for note in notes), captured.err
    assert "proposals 1000" in captured.out  # the round really proposed 1000 tokens
