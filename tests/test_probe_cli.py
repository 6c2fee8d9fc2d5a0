"""`dflash-tui probe`: one line per round, snapshots and summary that follow docs/SNAPSHOT.md
and read back into the same records."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dflash_tui.cli import main
from dflash_tui.snapshot import SNAPSHOT_SCHEMA, round_from_json, round_json

SNAPSHOT_KEYS = {"schema", "round", "position", "anchor", "gamma", "proposals", "target_tokens",
                 "accepted", "bonus", "ranks", "probes", "first_nonfinite", "selector", "state",
                 "rollback", "timings_ms", "committed_text"}
RANK_KEYS = {"slot", "proposal", "target", "rank", "p_target", "in_candidates", "after_rejection"}
PROBE_KEYS = {"stage", "layer", "name", "shape", "dtype", "nan", "posinf", "neginf", "min", "max",
              "absmax", "mean", "rms", "fp16_headroom_bits"}
SLOT_KEYS = {"candidates", "unary", "edge", "score", "chosen", "argmax"}
STATE_KEYS = {"cursor", "capture_base", "capture_rows", "target_offset", "committed"}


def test_probe_writes_snapshots_and_summary(make_pair, tmp_path, capsys):
    target_dir, _ = make_pair("qwen35", "DFlash2DraftModel")
    out = tmp_path / "out"
    code = main(["probe", str(target_dir), "--prompt", "Hello", "--block", "3", "--rounds", "4",
                 "--out", str(out), "--npz"])
    assert code == 0
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("round ")]
    assert len(lines) == 4 and "accepted" in lines[0] and "bonus" in lines[0]

    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounds"] == 4 and len(summary["accepted_per_round"]) == 4
    assert len(summary["tokens"]) == 1 + sum(a + 1 for a in summary["accepted_per_round"])
    assert isinstance(summary["text"], str)

    for i in range(4):
        snap = json.loads((out / f"round-{i:04d}.json").read_text())
        assert SNAPSHOT_KEYS <= set(snap) and snap["schema"] == SNAPSHOT_SCHEMA
        assert snap["round"] == i and snap["gamma"] == 3 and len(snap["proposals"]) == 3
        assert all(RANK_KEYS <= set(r) for r in snap["ranks"])
        assert all(PROBE_KEYS <= set(p) for p in snap["probes"])
        assert all(SLOT_KEYS <= set(s) for s in snap["selector"]["slots"])
        assert STATE_KEYS <= set(snap["state"]["before"]) and STATE_KEYS <= set(snap["state"]["after"])
        assert snap["rollback"]["kind"] in ("none", "replay")
        record = round_from_json(snap)
        assert round_json(record) == {k: v for k, v in snap.items() if k != "session"}
        raw = np.load(out / f"round-{i:04d}.npz")
        assert raw["draft__logits"].shape == (3, snap["session"]["vocab_size"])


def test_probe_line_names_the_first_nonfinite_buffer(make_pair, tmp_path, capsys):
    from fixtures import drafter_tensors, write_drafter

    target_dir, draft_dir = make_pair("llama", "DFlashDraftModel")
    config = json.loads((draft_dir / "config.json").read_text())
    tensors = drafter_tensors(config)
    tensors["layers.1.mlp.up_proj.weight"][5, 5] = np.nan
    bad = write_drafter(tmp_path / "bad", config, tensors=tensors)
    code = main(["probe", str(target_dir), "--draft", str(bad), "--prompt", "Hi", "--rounds", "1",
                 "--out", str(tmp_path / "o")])
    assert code == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("round "))
    assert "FIRST NON-FINITE: draft layer 1 ffn_up" in line
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["first_nonfinite"] == {"round": 0, "stage": "draft", "layer": 1, "name": "ffn_up"}


def test_probe_says_the_drafters_logits_went_nan_with_probes_off(nan_pair, tmp_path, capsys):
    target_dir, draft_dir = nan_pair
    code = main(["probe", str(target_dir), "--draft", str(draft_dir), "--prompt", "Hi",
                 "--block", "3", "--rounds", "2", "--no-probes", "--out", str(tmp_path / "o")])
    assert code == 0
    out = capsys.readouterr().out.splitlines()
    lines = [l for l in out if l.startswith("round ")]
    assert len(lines) == 2 and all("LOGITS NON-FINITE in 3 of 3 slots" in l for l in lines)
    assert not any("FIRST NON-FINITE" in l for l in lines)  # no probe ran
    assert "--- drafter logits NaN/Inf in 2 of 2 rounds, first in round 0" in out
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["nonfinite_logit_rounds"] == [0, 1] and summary["first_nonfinite"] is None


def test_a_healthy_probe_line_says_nothing_of_nonfinite_logits(make_pair, capsys):
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    assert main(["probe", str(target_dir), "--prompt", "Hi", "--rounds", "2", "--no-probes"]) == 0
    assert "NON-FINITE" not in capsys.readouterr().out.upper()


def test_a_layer_offset_says_which_target_layers_are_read(make_pair, capsys):
    """The session line used to read the same with and without --layer-offset; now the layers
    read and those config.json names are both said (nothing is said without an offset)."""
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")  # config.json names [1, 2, 3]
    for flags, said in ((["--layer-offset", "-1"], ["layer offset -1: reading target layers "
                                                    "[0, 1, 2] (config.json names [1, 2, 3])"]),
                        ([], [])):
        assert main(["probe", str(target_dir), "--prompt", "Hi", "--rounds", "1",
                     "--no-probes", *flags]) == 0
        err = capsys.readouterr().err.splitlines()
        assert [line for line in err if line.startswith("layer offset")] == said


def test_prompt_file_sends_the_bench_s_prompt(make_pair, tmp_path, capsys):
    """The same file must be the same prompt in probe and bench: its final newline is not part
    of it (one "\n" is its own token inside a chat template and changes every round)."""
    from dflash_tui.bench.prompts import load_workloads

    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    (tmp_path / "prompts" / "prose").mkdir(parents=True)
    file = tmp_path / "prompts" / "prose" / "01-fox.txt"
    file.write_text("The quick brown fox jumps\n\n")
    assert main(["probe", str(target_dir), "--prompt-file", str(file), "--rounds", "1",
                 "--out", str(tmp_path / "o")]) == 0
    capsys.readouterr()
    sent = json.loads((tmp_path / "o" / "summary.json").read_text())["session"]["prompt"]
    [workload] = load_workloads(tmp_path / "prompts")
    assert sent == workload.prompts[0].text == "The quick brown fox jumps"


@pytest.mark.parametrize("prompt", ["", " \n\t"])
def test_an_empty_prompt_is_refused_like_an_empty_prompt_file(make_pair, tmp_path, capsys, prompt):
    from one_line import refusal

    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    out = tmp_path / "o"
    refusal(capsys, ["probe", target_dir, "--prompt", prompt, "--rounds", "1", "--out", out],
            f"--prompt {prompt!r}: the prompt is empty")
    assert not out.exists()  # refused before anything ran



def test_a_probe_with_no_round_reports_no_mean_and_no_rate(make_pair, tmp_path, capsys):
    """--max-tokens 1 is the prefill's token alone: no mean of 0, no tokens/s of one token
    over the no time the rounds took."""
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    out = tmp_path / "out"
    assert main(["probe", str(target_dir), "--prompt", "Hello", "--max-tokens", "1",
                 "--no-probes", "--out", str(out)]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("--- "))
    assert line.startswith("--- 1 tokens in 0 rounds") and "mean accepted —" in line
    assert "tokens/s" not in line
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounds"] == 0 and summary["mean_accepted"] is None


def test_a_rounds_bonus_reads_as_the_tui_shows_it(make_pair):
    """A token that is a piece of a UTF-8 character reads as its bytes, `\\xc3`, in the TUI;
    probe's line printed its repr, `'\\\\xc3'`, the backslash doubled. A leading space shows
    as the TUI's tables show it too."""
    from dataclasses import replace

    from dflash_tui.engine import SessionOptions, load_pair
    from dflash_tui.panels.format import token_cell
    from dflash_tui.probe import round_line

    session = load_pair(*make_pair("llama", "DFlash2DraftModel")).open(
        "Hello", options=SessionOptions(gamma=2, max_tokens=8))
    record = session.step_round()
    session.close()
    for shown, text in (("\\xc3", "\\xc3"), ("␣the", " the")):
        line = round_line(replace(record, token_text={**record.token_text, record.bonus: text}))
        assert f"  bonus {shown}" in line and token_cell(text) == shown, line
        assert line.split("  bonus ")[1].split("  ")[0] == shown, line  # nothing more to it


def test_a_round_cut_by_max_tokens_prints_what_it_committed(make_pair):
    """The last round, cut by --max-tokens, printed `bonus ␣`, a bonus never committed (the
    TUI showed `+1`, export `committed 1`): now `bonus —  committed 1 (length)`."""
    from dflash_tui.engine import SessionOptions, load_pair
    from dflash_tui.panels.format import token_cell
    from dflash_tui.probe import round_line

    pair = load_pair(*make_pair("llama", "DFlash2DraftModel"))
    free = pair.open("Hello", options=SessionOptions(gamma=3, max_tokens=12, probes=False))
    while not free.finished:
        free.step_round()
    full = list(free.tokens)
    free.close()

    def oracle(tokens, gamma):  # the target's own tokens: every proposal accepted
        return (full[len(tokens): len(tokens) + gamma] + [0] * gamma)[:gamma]

    session = pair.open("Hello", options=SessionOptions(gamma=3, max_tokens=6, probes=False,
                                                        proposer=oracle))
    records = []
    while not session.finished:
        records.append(session.step_round())
    session.close()
    whole, cut = records[0], records[-1]
    assert len(whole.committed_tokens) == whole.accepted + 1
    assert f"bonus {token_cell(whole.text(whole.bonus), 24)}" in round_line(whole)
    assert "committed" not in round_line(whole)
    assert cut.finish_reason == "length" and len(cut.committed_tokens) < cut.accepted + 1
    line = round_line(cut)
    assert f"bonus —  committed {len(cut.committed_tokens)} (length)" in line, line
