"""`--compare SPEC` on the TUI, `probe` and `bench`: one-line refusals, the probe line, snapshots and
summary.json, the bench's side-by-side tables and JSON."""

from __future__ import annotations

import json

import pytest

from dflash_tui.cli import main
from dflash_tui.snapshot import TraceWriter, round_from_json, round_json, session_from_json


def _refused(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err  # progress lines, then the error: one line
    last = err.splitlines()[-1]
    assert err.endswith(last + "\n") and last.startswith("dflash-tui: error: ") and needle in last, err


@pytest.mark.parametrize("spec, needle", [
    ("dtype=float8", "--compare 'dtype=float8': dtype=float8: expected one of float32, float16, bfloat16"),
    ("colour=red", "unknown key 'colour' (expected one of dtype, bits, group, layer-offset, residual-scale)"),
    ("bits=5", "bits=5: expected one of 2, 3, 4, 6, 8"),
    ("bits=4,group=48", "group=48: expected one of 32, 64, 128"),
    ("group=32", "group sets the group size of bits=B; give bits too"),
    ("residual-scale=0", "residual-scale=0: expected a number above 0"),
    ("residual-scale=inf", "residual-scale=inf: expected a number above 0"),
    ("layer-offset=one", "layer-offset=one: expected an integer"),
    ("dtype=float16,dtype=float32", "dtype is given twice"),
    ("dtype=float16,bits", "'bits' is not KEY=VALUE"),
    ("/no/such/drafter", "--compare '/no/such/drafter': no such directory (a SPEC is a drafter "
                         "directory or KEY=VALUE overrides"),
])
def test_a_bad_spec_is_refused_before_anything_loads(capsys, spec, needle):
    for command in (["probe"], ["bench"], []):  # [] : the TUI, refused before it opens
        _refused(capsys, [*command, "/no/model/needed", "--compare", spec], needle)


def test_compare_flags_that_cannot_work_are_refused(capsys):
    _refused(capsys, ["probe", "/m", "--compare-tol", "0.1"], "--compare-tol: given without --compare")
    _refused(capsys, ["/m", "--compare-tol", "0.1"], "--compare-tol: given without --compare")
    _refused(capsys, ["/m", "--compare", "dtype=float16", "--temperature", "0.5"],
             "--temperature 0.5: --compare counts the proposals the target accepts greedily")
    _refused(capsys, ["probe", "/m", "--compare", "dtype=float16", "--compare-tol", "-1"],
             "--compare-tol -1.0: expected a relative error of 0 or more")
    _refused(capsys, ["probe", "/m", "--compare", "dtype=float16", "--temperature", "0.5"],
             "--temperature 0.5: --compare counts the proposals the target accepts greedily; "
             "it needs temperature 0")
    _refused(capsys, ["probe", "/m", "--compare", "dtype=float16", "--distributed"],
             "--compare: not with --distributed")


def test_a_spec_that_is_not_a_drafter_or_not_for_this_target_is_refused(make_pair, tmp_path, capsys):
    from fixtures import write_sample_shaped_drafter

    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    (tmp_path / "empty").mkdir()
    _refused(capsys, ["probe", str(target_dir), "--compare", str(tmp_path / "empty")],
             f"{tmp_path / 'empty' / 'config.json'}: missing")
    other = write_sample_shaped_drafter(tmp_path / "other")
    _refused(capsys, ["probe", str(target_dir), "--compare", str(other)],
             f"--compare {other}: drafter hidden_size 576 does not match the target's hidden size 64")


def test_probe_compare_writes_the_reference_everywhere(make_pair, nan_pair, tmp_path, capsys):
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    _, nan_dir = nan_pair
    out = tmp_path / "out"
    code = main(["probe", str(target_dir), "--prompt", "Hello", "--block", "3", "--rounds", "3",
                 "--compare", str(nan_dir), "--out", str(out)])
    assert code == 0
    stdout = capsys.readouterr().out
    lines = [l for l in stdout.splitlines() if l.startswith("round ")]
    assert all("| reference accepted" in l and "DIVERGES: draft layer 1 ffn_out (non-finite on "
               "the reference side only)" in l for l in lines)
    assert f"--- reference {nan_dir}: mean accepted" in stdout
    summary = json.loads((out / "summary.json").read_text())
    snaps = [json.loads((out / f"round-{i:04d}.json").read_text()) for i in range(3)]
    assert summary["compare"] == str(nan_dir)
    assert summary["compare_accepted_per_round"] == [s["compare"]["accepted"] for s in snaps]
    assert summary["compare_first_divergent"] == {
        "round": 0, "stage": "draft", "layer": 1, "buffer": "ffn_out", "rel_err": None,
        "nonfinite": "reference"}
    trace = tmp_path / "trace.jsonl"
    records = [round_from_json(s) for s in snaps]
    writer = TraceWriter(trace, session_from_json(snaps[0]["session"]))
    for snap, record in zip(snaps, records):
        assert round_json(record) == {k: v for k, v in snap.items() if k != "session"}
        first = record.compare.first_divergent
        assert (first.buffer, first.rel_err, first.nonfinite) == ("ffn_out", None, "reference")
        writer.write(record)
    writer.close()
    lines = trace.read_text().splitlines()[1:]
    assert [round_from_json(json.loads(l)).compare for l in lines] == [r.compare for r in records]


def test_bench_compare_against_itself_shows_no_difference(make_pair, tmp_path, capsys):
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    out = tmp_path / "bench.json"
    code = main(["bench", str(target_dir), "--blocks", "2,3", "--limit", "1", "--max-tokens", "8",
                 "--compare", str(draft_dir), "--json", str(out)])
    assert code == 0
    stdout = capsys.readouterr().out
    assert f"Accepted per round: drafter vs reference {draft_dir} on the same committed" in stdout
    assert "the configurations diverge beyond the tolerance in 0 of" in stdout
    table = stdout.split("Accepted per round: drafter vs reference")[1].split("block b =")[0]
    rows = [l for l in table.splitlines() if l.split()[:1] in (["prose"], ["code"], ["math"], ["all"])]
    assert len(rows) == 4 and all(l.count("+0.00") == 2 for l in rows)
    data = json.loads(out.read_text())
    assert data["compare"]["spec"] == str(draft_dir) and data["compare"]["tolerance"] == 0.01
    mine = [(c["workload"], c["block"], c["accepted"], c["per_position"]) for c in data["cells"]]
    ref = [(c["workload"], c["block"], c["accepted"], c["per_position"])
           for c in data["compare"]["cells"]]
    assert mine == ref
    assert all(r["compare_accepted_per_round"] == r["accepted_per_round"] for r in data["runs"])
    assert "--compare" in data["command"]
