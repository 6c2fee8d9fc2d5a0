"""`dflash-tui bench-diff A.json B.json` on files `dflash-tui bench --json` wrote: its means are
the bench's own cells, its interval brackets a change that every prompt shows, what it
leaves out is said, and bad input is one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from dflash_tui.bench.diff import LEVEL, load, rows
from dflash_tui.cli import main

TRAINING = Path(__file__).resolve().parents[1] / "docs" / "training"
STORED = [(TRAINING / f"stage{n}-bench-{s}-cpu.json", TRAINING / f"stage{n + 1}-bench-{s}-cpu.json")
          for n in (14, 15, 16, 17, 18) for s in ("test_prompts", "sample_prompts")]
# stages 20 and 21 did not ship: stage 22 followed stage 19
STORED += [(TRAINING / f"stage19-bench-{s}-cpu.json", TRAINING / f"stage22-bench-{s}-cpu.json")
           for s in ("test_prompts", "sample_prompts")]
PROMPTS = {"prose": ["The quick brown fox", "The rain in Spain", "Once upon a time"],
           "code": ["def add(a, b):", "for i in range(10):", "import os"]}
MAX_TOKENS = 14


def run(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["bench-diff", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def body(stdout: str) -> dict:
    """The main table's rows by (workload, block): n, A, B, B - A, interval, up/down."""
    table = {}
    for line in stdout.splitlines():
        cells = re.split(r"\s{2,}", line.strip())  # columns are two spaces apart at least
        if len(cells) == 8 and cells[1].isdigit() and cells[2].isdigit():
            table[(cells[0], int(cells[1]))] = cells[2:]
    return table


def cells(path: Path) -> dict:
    return {(c["workload"], c["block"]): c["mean_accepted"] for c in json.loads(path.read_text())["cells"]}


def edited(source: Path, path: Path, edit) -> Path:
    """A copy of a real bench file with one thing changed."""
    record = json.loads(source.read_text())
    edit(record)
    path.write_text(json.dumps(record))
    return path


@pytest.fixture(scope="module")
def benches(make_pair, tmp_path_factory) -> tuple[Path, Path]:
    """A random drafter's bench and one whose proposals cannot miss, on the same prompts."""
    root = tmp_path_factory.mktemp("diff")
    prompts = root / "prompts"
    for workload, texts in PROMPTS.items():
        (prompts / workload).mkdir(parents=True)
        for k, text in enumerate(texts):
            (prompts / workload / f"0{k}.txt").write_text(text + "\n", encoding="utf-8")
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    paths = []
    for name, extra in (("random", []), ("oracle", ["--oracle"])):
        path = root / f"{name}.json"
        assert main(["bench", str(target_dir), "--prompts", str(prompts), "--blocks", "2,4",
                     "--max-tokens", str(MAX_TOKENS), "--json", str(path), *extra]) == 0
        paths.append(path)
    return paths[0], paths[1]


def test_means_are_each_bench_s_cells_and_a_sure_gain_has_an_interval_above_zero(benches, capsys):
    random_json, oracle_json = benches
    rc, stdout, _ = run(capsys, random_json, oracle_json)
    assert rc == 0
    assert [line for line in stdout.splitlines() if line.startswith("note:")] == [
        f"note: oracle differs: False in {random_json}, True in {oracle_json}"]
    table, a, b = body(stdout), cells(random_json), cells(oracle_json)
    assert set(table) == set(a) == set(b)  # every workload and block, "all" included
    for key, (n, mean_a, mean_b, change, interval, up_down) in table.items():
        assert (mean_a, mean_b) == (f"{a[key]:.2f}", f"{b[key]:.2f}")
        assert n == str(sum(len(PROMPTS[w]) for w in PROMPTS if key[0] in (w, "all")))
        share = f" ({(b[key] - a[key]) / a[key]:+.1%})" if a[key] else ""  # none of nothing
        assert change == f"{b[key] - a[key]:+.2f}{share}"
        low, high = (float(x) for x in interval.split(".."))
        assert 0 < low <= float(change.split()[0]) <= high  # every prompt gains, so every resample does
        assert up_down == f"{n}/0"
    assert table[("all", 2)][0] == "6"


def test_a_bench_against_itself_changes_nothing(benches, capsys):
    rc, stdout, _ = run(capsys, benches[0], benches[0], "--by-prompt")
    assert rc == 0
    assert len(body(stdout)) == 6
    for n, mean_a, mean_b, change, interval, up_down in body(stdout).values():
        assert mean_a == mean_b and change.split()[0] == "+0.00" and interval == "+0.00..+0.00"
        assert up_down == "0/0"
    assert "code/02" in stdout and "prose/01" in stdout  # --by-prompt lists every prompt



def slot_rows(stdout: str) -> dict:
    """--by-slot's rows: (workload, block, "A" | "B" | "B - A") -> the slots' cells."""
    table, current = {}, None
    for line in stdout.split("by slot:", 1)[1].splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) > 3 and cells[1].isdigit() and cells[2] == "A":
            current = (cells[0], int(cells[1]))
            table[(*current, "A")] = cells[3:]
        elif current and cells and cells[0] in ("B", "B - A"):
            table[(*current, cells[0])] = cells[1:]
    return table


def test_by_slot_is_each_bench_s_own_alpha_per_position_and_the_oracle_never_ends_a_round(
        benches, capsys):
    """Slot s's survival, P(accepted >= s + 1 | accepted >= s), pooled over the prompts both
    ran: the bench's own per_position `conditional` in each file's cells. Proposals that cannot
    miss (--oracle) survive at every slot."""
    random_json, oracle_json = benches
    rc, stdout, _ = run(capsys, random_json, oracle_json, "--by-slot")
    assert rc == 0
    table = slot_rows(stdout)
    for label, path in (("A", random_json), ("B", oracle_json)):
        for cell in json.loads(path.read_text())["cells"]:
            shown = table[(cell["workload"], cell["block"], label)]
            want = ["-" if p["conditional"] is None else f"{p['conditional']:.2f}"
                    for p in cell["per_position"]]
            assert shown[:len(want)] == want, (label, cell["workload"], cell["block"])
    assert all(x == "1.00" for key, row in table.items() if key[2] == "B" for x in row)
    assert {key[:2] for key in table} == {(w, b) for w in ("prose", "code", "all") for b in (2, 4)}
    random_a = table[("all", 4, "A")]
    assert table[("all", 4, "B - A")] == [
        "-" if a == "-" else f"{1 - float(a):+.2f}" for a in random_a]


def test_by_slot_reads_a_bench_from_before_gamma_per_round_as_every_round_proposing_its_block(
        benches, tmp_path, capsys):
    def older(record):
        for r in record["runs"]:
            r.pop("gamma_per_round", None)
    old = edited(benches[0], tmp_path / "old.json", older)
    rc, stdout, _ = run(capsys, old, benches[0], "--by-slot")
    assert rc == 0
    table = slot_rows(stdout)
    # every round proposes slot 0, so slot 0 reads alike; later slots count the last round
    # (cut short at the token budget) as proposing the whole block
    assert all(table[(*key[:2], "A")][0] == row[0] for key, row in table.items() if key[2] == "B")


def test_by_slot_numbers_its_slots_as_bench_slots_and_tab_4_do(capsys, monkeypatch):
    """The column headed s is the slot `bench --slots` (the TUI's slot_stats) calls slot s,
    from 0: on a stored --slots bench, each column's survival is that slot's `acceptance`
    (accepted once reached) in the same file's per-slot numbers."""
    monkeypatch.setenv("COLUMNS", "120")  # block 7's slots in one table
    path = TRAINING / "stage15-slots-validation-cpu.json"
    rc, stdout, _ = run(capsys, path, path, "--by-slot", "--resamples", "100")
    part = stdout.split("by slot:", 1)[1]
    headers = next(line.split()[2:] for line in part.splitlines()
                   if line.strip().startswith("workload"))
    table = slot_rows(stdout)
    for entry in json.loads(path.read_text())["slots"]:
        shown = dict(zip(headers, table[(entry["workload"], entry["block"], "A")]))
        assert rc == 0 and shown == {str(s["slot"]): f"{s['acceptance']:.2f}"
                                     for s in entry["slots"]}, entry["workload"]

@pytest.mark.parametrize("a, b", STORED)
def test_stored_benches_pool_as_their_cells_do(a, b):
    """On the shipped drafters' own bench files: the pooled means equal the bench's cells to
    the last digit, and the same seed draws the same interval."""
    result = rows(load(a), load(b), resamples=500, seed=1)
    ca, cb = cells(a), cells(b)
    assert {(r.workload, r.block) for r in result} == set(ca)
    # each prompt's own mean, from the files' per-round counts, for n and up/down
    means = [{(run["workload"], run["block"], run["prompt"]): np.mean(run["accepted_per_round"])
              for run in json.loads(path.read_text())["runs"]} for path in (a, b)]
    for r in result:
        assert r.a == pytest.approx(ca[(r.workload, r.block)], abs=1e-12)
        assert r.b == pytest.approx(cb[(r.workload, r.block)], abs=1e-12)
        assert r.interval[0] < r.interval[1]
        moves = [means[1][k] - means[0][k] for k in means[0]
                 if k in means[1] and k[1] == r.block and r.workload in (k[0], "all")]
        assert r.prompts == len(moves)
        assert (r.up, r.down) == (sum(m > LEVEL for m in moves), sum(m < -LEVEL for m in moves))
    again = rows(load(a), load(b), resamples=500, seed=1)
    assert [r.interval for r in again] == [r.interval for r in result]


def test_settings_that_differ_are_named(benches, tmp_path, capsys):
    def longer(record):
        record["settings"]["max_tokens"] = 64
    other = edited(benches[1], tmp_path / "other.json", longer)
    rc, stdout, _ = run(capsys, benches[0], other)
    assert rc == 0
    assert f"note: max_tokens differs: {MAX_TOKENS} in {benches[0]}, 64 in {other}" in stdout


def test_compare_and_slots_are_named_since_they_move_the_speed_numbers(benches, tmp_path, capsys):
    """--compare and --slots add work to every round (bench's speed numbers include it) and
    leave the decode as it was: said when the two files differ in them, or both ran them."""
    def compared(record):
        record["compare"] = {"spec": "bits=4", "tolerance": 0.01, "cells": []}
        record["settings"]["slots"] = True
    a = edited(benches[0], tmp_path / "a.json", compared)
    b = edited(benches[1], tmp_path / "b.json", compared)
    said = lambda stdout: " ".join(stdout.split())  # noqa: E731 (the console wraps long notes)
    rc, stdout, _ = run(capsys, a, benches[1])
    assert rc == 0 and (
        f"note: --compare / --slots differ: --compare bits=4 --slots in {a}, neither in "
        f"{benches[1]}; their speed numbers are not alike (each includes that work), the "
        "accepted counts compared here do not depend on it") in said(stdout)
    rc, stdout, _ = run(capsys, a, b)
    assert ("note: both ran with --compare bits=4 --slots: their speed numbers include that "
            "work, the accepted counts compared here do not depend on it") in said(stdout)
    rc, stdout, _ = run(capsys, *benches)
    assert "--slots" not in stdout


def test_an_interrupted_bench_compares_the_prompts_it_finished_at_every_block(benches, tmp_path, capsys):
    """As the bench's own tables do: a prompt done at block 2 but not 4 is left out of both."""
    def interrupt(record):
        record["runs"] = [r for r in record["runs"] if not (r["prompt"] == "code/02" and r["block"] == 4)]
        record["complete"] = False
    cut = edited(benches[1], tmp_path / "cut.json", interrupt)
    rc, stdout, _ = run(capsys, benches[0], cut)
    assert rc == 0
    assert f"note: {cut} is an interrupted bench" in stdout
    assert f"note: {cut}: 1 runs of prompts it did not finish at every block are left out" in stdout
    table = body(stdout)
    assert table[("code", 2)][0] == table[("code", 4)][0] == "2"
    assert table[("code", 2)][4] == "-"  # two prompts are too few to resample
    assert table[("prose", 2)][0] == "3" and table[("all", 2)][4] == "-"


@pytest.mark.parametrize("kept", ["no run", "the first prompt at block 2"])
def test_an_interrupted_bench_that_finished_no_prompt_is_refused_as_such(benches, tmp_path, capsys, kept):
    """Such a file (an older bench wrote one on ctrl-c in its first prompt) has nothing to
    compare: said in one line, where it read as a file with no runs, or as two benches that
    share no prompt."""
    from one_line import refusal

    def interrupt(record):
        record["runs"] = [] if kept == "no run" else record["runs"][:1]  # ctrl-c before its block 4
        assert kept == "no run" or record["runs"][0]["block"] == 2
        record["complete"] = False
    cut = edited(benches[1], tmp_path / "cut.json", interrupt)
    refusal(capsys, ["bench-diff", benches[0], cut],
            f"{cut}: an interrupted bench (\"complete\": false) that finished no prompt at every "
            "block; nothing to compare")


def test_what_only_one_bench_ran_is_named_and_left_out(benches, tmp_path, capsys):
    def prose_only(record):
        record["runs"] = [r for r in record["runs"] if r["workload"] == "prose"]
    prose = edited(benches[1], tmp_path / "prose.json", prose_only)
    rc, stdout, _ = run(capsys, benches[0], prose)
    assert rc == 0
    assert f"note: 6 runs only in {benches[0]} (block 2, 4) are left out" in stdout
    assert set(body(stdout)) == {("prose", 2), ("prose", 4)}  # one workload: no "all" row


def test_a_drafter_whose_logits_went_nan_is_named_for_that_bench_only(benches, nan_pair, tmp_path,
                                                                        capsys):
    """Its zeros are a numeric failure, not a weak drafter; the table alone read as a fall."""
    target_dir, draft_dir = nan_pair
    broken = tmp_path / "nan.json"
    prompts = benches[0].parent / "prompts"
    assert main(["bench", str(target_dir), "--draft", str(draft_dir), "--prompts", str(prompts),
                 "--blocks", "2,4", "--max-tokens", str(MAX_TOKENS), "--json", str(broken)]) == 0
    rounds = sum(r["rounds"] for r in json.loads(broken.read_text())["runs"])
    rc, stdout, _ = run(capsys, benches[0], broken)
    assert rc == 0
    said = " ".join(stdout.split())  # rich wraps at the console's width
    assert (f"note: {broken}: the drafter's logits held NaN/Inf in {rounds:,} of {rounds:,} "
            "rounds (12 of 12 runs)") in said
    assert f"note: {benches[0]}: the drafter's logits" not in said
    rc, stdout, _ = run(capsys, benches[0], benches[1])
    assert rc == 0 and "NaN/Inf" not in stdout


def test_odd_but_readable_fields_do_not_stop_it(benches, tmp_path, capsys):
    def odd(record):
        record["settings"], record["drafter"] = [1], "x"
    other = edited(benches[0], tmp_path / "odd.json", odd)
    rc, stdout, _ = run(capsys, benches[0], other)
    assert rc == 0 and "drafter ?" in stdout


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _with(benches, tmp_path: Path, name: str, edit) -> Path:
    return edited(benches[0], tmp_path / name, edit)


def _foreign(record):
    for r in record["runs"]:
        r["prompt"] = "elsewhere/" + r["prompt"]


def _repeated(record):
    record["runs"].append(dict(record["runs"][0]))


def _workload_all(record):
    for r in record["runs"]:
        if r["workload"] == "prose":
            r["workload"] = "all"


def _first_run(key, value):
    def edit(record):
        record["runs"][0][key] = value
    return edit


@pytest.mark.parametrize("make_args, expected", [
    (lambda t, b: [t / "missing.json", b[0]], "missing.json: no such file"),
    (lambda t, b: [(t / "d.json").mkdir() or t / "d.json", b[0]],
     "d.json: a folder (expected a `dflash-tui bench --json` file)"),
    (lambda t, b: [write(t / "x.json", "{not json"), b[0]], "x.json: not a bench JSON file"),
    (lambda t, b: [write(t / "s.json", '{"schema": "dflash-tui.trace/1"}'), b[0]],
     "schema 'dflash-tui.trace/1', expected 'dflash-tui.bench/1'"),
    (lambda t, b: [write(t / "e.json", '{"schema": "dflash-tui.bench/1", "runs": 5}'), b[0]],
     "e.json: holds no runs"),
    (lambda t, b: [write(t / "r.json", '{"schema": "dflash-tui.bench/1", "runs": [{"prompt": "p"}]}'), b[0]],
     "r.json: runs[0] lacks workload, prompt or block"),
    (lambda t, b: [_with(b, t, "big.json", _first_run("block", 1e400)), b[0]],
     "big.json: runs[0]: expected text workload and prompt and a block >= 1"),
    (lambda t, b: [_with(b, t, "str.json", _first_run("accepted_per_round", "1234")), b[0]],
     "str.json: runs[0].accepted_per_round: expected a list of counts >= 0"),
    (lambda t, b: [b[0], _with(b, t, "foreign.json", _foreign)], "share no prompt at any block"),
    (lambda t, b: [_with(b, t, "nf.json", _first_run("nonfinite_logit_rounds", 99)), b[0]],
     "nf.json: runs[0].nonfinite_logit_rounds = 99: expected a count from 0 to the run's"),
    (lambda t, b: [_with(b, t, "huge.json", _first_run("accepted_per_round", [1, 10**400])), b[0]],
     "huge.json: runs[0].accepted_per_round[1] = a 401-digit number: expected a list of counts "
     ">= 0, at most the run's block (2)"),
    (lambda t, b: [_with(b, t, "over.json", _first_run("accepted_per_round", [3])), b[0]],
     "over.json: runs[0].accepted_per_round[0] = 3: expected a list of counts >= 0, at most"),
    (lambda t, b: [b[0], _with(b, t, "dup.json", _repeated)],
     "dup.json: runs[12] repeats prompt 'prose/00' at block 2 (runs[0] has it too)"),
    (lambda t, b: [_with(b, t, "all.json", _workload_all), b[0]],
     "all.json: runs[0].workload: a workload cannot be named 'all' (the tables' pooled row)"),
    (lambda t, b: [write(t / "deep.json", "[" * 100_000 + "]" * 100_000), b[0]],
     "deep.json: not a bench JSON file (nested too deeply to read)"),
    (lambda t, b: [_with(b, t, "g.json", _first_run("gamma_per_round", [2])), b[0]],
     "g.json: runs[0].gamma_per_round: expected a list of"),
    (lambda t, b: [_with(b, t, "g0.json", _first_run("accepted_per_round", [2, 1])), b[0]],
     "g0.json: runs[0].gamma_per_round"),
    (lambda t, b: [b[0], b[1], "--resamples", "5"], "--resamples 5: expected 100 to 100000"),
    (lambda t, b: [b[0], b[1], "--seed", "-1"], "--seed -1: expected a seed >= 0"),
])
def test_bad_input_is_one_line_and_exit_2(benches, tmp_path, capsys, make_args, expected):
    rc, stdout, stderr = run(capsys, *make_args(tmp_path, benches))
    assert rc == 2 and stdout == ""
    assert stderr.count("\n") == 1 and expected in stderr and "Traceback" not in stderr


@pytest.mark.parametrize("columns, widest", [(None, 200), ("100", 100)])
def test_piped_output_wraps_at_columns_where_set(capsys, monkeypatch, columns, widest):
    """As the bench's own tables (dflash_tui/bench/console.py): COLUMNS, else 200 columns."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    rc, stdout, _ = run(capsys, *STORED[0], "--resamples", "100")
    assert rc == 0
    assert widest - 20 < max(len(line.rstrip()) for line in stdout.splitlines()) <= widest


def test_by_prompt_shows_every_prompt_s_name_whole_at_80_columns(capsys, monkeypatch):
    """A name longer than its column folds onto the next line: cut with an ellipsis,
    "prose/02-why-leaves-change-colour" read "prose/02-why-leaves-change-col…" at 80 columns."""
    monkeypatch.setenv("COLUMNS", "80")
    a, b = (TRAINING / f"stage{n}-bench-sample_prompts-cpu.json" for n in (18, 19))
    rc, stdout, _ = run(capsys, a, b, "--by-prompt", "--resamples", "100")
    part = stdout.split("by prompt", 1)[1].split("\nn: prompts both ran", 1)[0]
    names = {run["prompt"] for run in json.loads(a.read_text())["runs"]}
    assert rc == 0 and "…" not in part and max(len(line.rstrip()) for line in part.splitlines()) <= 80
    first_cells = "".join(line.split()[0] for line in part.splitlines()[3:] if line.strip())
    assert any(len(name) > 31 for name in names)  # longer than the column has room for
    assert all(name in first_cells for name in names)


def test_by_slot_splits_its_slots_over_tables_that_fit_the_width_and_cuts_no_number(
        benches, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "45")  # three slot columns a table
    rc, stdout, _ = run(capsys, *benches, "--by-slot")
    slots_part = stdout.split("by slot:", 1)[1]
    headers = [line.split()[2:] for line in slots_part.splitlines() if line.strip().startswith("workload")]
    assert rc == 0 and headers == [["0", "1", "2"], ["3"]]
    assert "…" not in slots_part and max(len(line.rstrip()) for line in slots_part.splitlines()) <= 45


def test_by_slot_at_a_width_too_narrow_for_one_slot_still_shows_every_digit(
        benches, capsys, monkeypatch):
    """Below the labels and one slot (31 columns) a line runs past the width rather than
    losing its last digits: cropped, 0.75 read as "0.7" and +0.05 as "+0.0"."""
    wide = slot_rows(run(capsys, *benches, "--by-slot")[1])
    monkeypatch.setenv("COLUMNS", "20")
    rc, stdout, _ = run(capsys, *benches, "--by-slot")
    shown = re.findall(r"(?<![\d.])[+-]?\d+\.\d+", stdout.split("by slot:", 1)[1])
    # one slot a table there, so the same numbers in another order
    numbers = [x for row in wide.values() for x in row if x not in ("", "-")]
    assert rc == 0 and sorted(shown) == sorted(numbers)


def test_by_slot_tables_after_the_first_list_only_the_blocks_that_reach_their_slots(
        capsys, monkeypatch):
    """Stage 18 and 19's benches at blocks 2, 4 and 7, three slots a table: slots 3-5 are
    blocks 4's and 7's, slot 6 block 7's alone; no row of empty cells for a shorter block."""
    monkeypatch.setenv("COLUMNS", "45")
    a, b = (TRAINING / f"stage{n}-bench-sample_prompts-cpu.json" for n in (18, 19))
    rc, stdout, _ = run(capsys, a, b, "--by-slot", "--resamples", "100")
    tables = stdout.split("by slot:", 1)[1].split("workload  block")[1:]
    first_rows = r"\s*\w+\s+\d+\s+A\b"  # a workload's row: name, block, "A"
    blocks = [{int(line.split()[1]) for line in t.splitlines() if re.match(first_rows, line)}
              for t in tables]
    assert rc == 0 and blocks == [{2, 4, 7}, {4, 7}, {7}]


def test_by_slot_says_which_slots_of_a_block_past_the_columns_it_leaves_out(tmp_path, capsys):
    def longer(record):  # stage 19's block-7 rounds, read as a block of 40 (each still proposed 7)
        record["settings"]["blocks"] = [2, 4, 40]
        for r in record["runs"]:
            r["block"] = 40 if r["block"] == 7 else r["block"]
    source = TRAINING / "stage19-bench-sample_prompts-cpu.json"
    long = edited(source, tmp_path / "long.json", longer)
    rc, stdout, _ = run(capsys, long, long, "--by-slot", "--resamples", "100")
    slots = stdout.split("by slot:", 1)[1]
    headers = " ".join(line for line in slots.splitlines() if line.strip().startswith("workload"))
    assert rc == 0 and " 31 " in headers and " 32 " not in headers
    assert "block 40: slots 32 to 39 left out" in " ".join(slots.split())


def test_distill_md_s_slot_table_is_by_slot_on_the_stored_benches(capsys):
    """docs/DISTILL.md's "Stage 21: the plan" quotes stage 19's and stage 20's all-workloads
    survival at block 7 on sample_prompts/: `bench-diff --by-slot` on the stored files, under
    the same slot numbers."""
    a, b = (TRAINING / f"stage{name}-bench-sample_prompts-cpu.json" for name in ("19", "20-q8"))
    rc, stdout, _ = run(capsys, a, b, "--by-slot", "--resamples", "100")
    table = slot_rows(stdout)
    doc = (TRAINING.parent / "DISTILL.md").read_text().split("**Stage 21: the plan**", 1)[1]
    heads = next(line.split()[2:] for line in stdout.split("by slot:", 1)[1].splitlines()
                 if line.strip().startswith("workload"))
    quoted = next(line for line in doc.splitlines() if line.startswith("| P(slot"))
    assert quoted.strip(" |").split(" | ")[1:] == heads, quoted
    for label, row in (("A", "| stage 19 |"), ("B", "| stage 20, 8-bit |")):
        quoted = next(line for line in doc.splitlines() if line.startswith(row))
        assert rc == 0 and quoted.strip(" |").split(" | ")[1:] == table[("all", 7, label)], quoted


def test_benches_on_different_targets_are_noted_and_one_model_in_two_places_is_not(
        benches, tmp_path, capsys):
    """Each target decides every accepted token: a change between two targets is the pairs',
    which the table alone read as the drafters'. The same file benched from two folders (a
    GPU machine and this one) is the same target."""
    def moved(record):
        record["target"]["path"] = "/elsewhere/" + Path(record["target"]["path"]).name

    def deeper(record):
        record["target"]["layers"] += 1

    said = {}
    for name, edit in (("moved", moved), ("deeper", deeper)):
        rc, stdout, _ = run(capsys, benches[0], _with(benches, tmp_path, f"{name}.json", edit))
        said[name] = " ".join(stdout.split())
        assert rc == 0
    layers = json.loads(benches[0].read_text())["target"]["layers"]
    assert "targets differ" not in said["moved"]
    assert (f"note: the targets differ: {Path(json.loads(benches[0].read_text())['target']['path']).name} "
            f"(llama, {layers} layers, hidden") in said["deeper"]
    assert f"{layers + 1} layers" in said["deeper"]
