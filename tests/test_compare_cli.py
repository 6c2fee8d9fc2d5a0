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
    # commas but no override: the SPEC's syntax, not a folder that is missing
    (",", "--compare ',': an empty override: expected KEY=VALUE[,KEY=VALUE...], one on each "
          "side of every comma (keys: dtype, bits, group, layer-offset, residual-scale)"),
    ("bits=4,", "--compare 'bits=4,': an empty override"),
    ("bits4,dtype", "--compare 'bits4,dtype': 'bits4' is not KEY=VALUE"),
])
def test_a_bad_spec_is_refused_before_anything_loads(capsys, spec, needle):
    for command in (["probe"], ["bench"], []):  # [] : the TUI, refused before it opens
        _refused(capsys, [*command, "/no/model/needed", "--compare", spec], needle)


def test_a_repeated_compare_is_refused_not_replaced(capsys):
    """argparse keeps a repeated flag's last value: `--compare bits=4 --compare bits=8` used
    to run bits=8 alone, while a key repeated inside one SPEC is refused."""
    for command in (["probe"], ["bench"], []):  # [] : the TUI, refused before it opens
        _refused(capsys, [*command, "/m", "--compare", "bits=4", "--compare", "bits=8"],
                 "--compare 'bits=8': given twice (after --compare 'bits=4'); a run has one "
                 "reference configuration")
        _refused(capsys, [*command, "/m", "--compare=bits=4", "--compare", "bits=4"],
                 "--compare 'bits=4': given twice (after --compare 'bits=4')")


def test_compare_flags_that_cannot_work_are_refused(capsys):
    _refused(capsys, ["probe", "/m", "--compare-tol", "0.1"], "--compare-tol: given without --compare")
    _refused(capsys, ["/m", "--compare-tol", "0.1"], "--compare-tol: given without --compare")
    _refused(capsys, ["/m", "--compare", "dtype=float16", "--temperature", "0.5"],
             "--temperature 0.5: --compare counts the proposals the target accepts greedily")
    _refused(capsys, ["probe", "/m", "--compare", "dtype=float16", "--compare-tol", "-1"],
             "--compare-tol -1: expected a relative error of 0 or more")
    _refused(capsys, ["probe", "/m", "--compare", "dtype=float16", "--temperature", "0.5"],
             "--temperature 0.5: --compare counts the proposals the target accepts greedily; "
             "it needs temperature 0")
    _refused(capsys, ["probe", "/m", "--compare", "dtype=float16", "--distributed"],
             "--compare: not with --distributed")


@pytest.mark.parametrize("typed", ["-1", "-0.50", "1e999", "NaN"])
def test_a_refused_float_is_echoed_as_typed(capsys, typed):
    """`--compare-tol -1` was refused as `--compare-tol -1.0: ...` (Python's float, not
    what was typed; `1e999` read `inf`), by the TUI, probe, replay and export alike, and
    so was --temperature (the TUI, probe, bench), also where --compare refuses a sampled
    decode (`--temperature 0.50`)."""
    tol = ["--compare-tol", typed]
    for argv in (["/m", "--compare", "bits=4", *tol], ["probe", "/m", "--compare", "bits=4", *tol],
                 ["replay", "/no/trace", *tol], ["export", "/no/trace", "--out", "/no/out", *tol]):
        _refused(capsys, argv, f"error: --compare-tol {typed}: expected a relative error")
    for command in ([], ["probe"], ["bench"]):
        _refused(capsys, [*command, "/m", "--temperature", typed],
                 f"error: --temperature {typed}: expected a finite number")
    _refused(capsys, ["probe", "/m", "--compare", "dtype=float16", "--temperature", "0.50"],
             "error: --temperature 0.50: --compare counts the proposals")


def test_a_spec_that_is_not_a_drafter_or_not_for_this_target_is_refused(make_pair, tmp_path, capsys):
    from fixtures import write_sample_shaped_drafter

    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    empty = tmp_path / "empty"
    empty.mkdir()
    for command in (["probe"], ["bench"], []):  # [] : the TUI, refused before it opens
        # named as the reference, not as a --draft folder would be
        _refused(capsys, [*command, str(target_dir), "--compare", str(empty)],
                 f"error: --compare {empty}: {empty / 'config.json'}: missing")
    # a config.json alone passes the check before loading; the loader names it too
    weightless = tmp_path / "weightless"
    weightless.mkdir()
    (weightless / "config.json").write_text((draft_dir / "config.json").read_text())
    _refused(capsys, ["probe", str(target_dir), "--compare", str(weightless)],
             f"error: --compare {weightless}: {weightless}: no *.safetensors weights found")
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
    # every round of every prompt was compared, and none diverged
    rounds = sum(len(r["accepted_per_round"]) for r in data["runs"])
    assert (data["compare"]["rounds_compared"], data["compare"]["rounds_diverged"]) == (rounds, 0)
    said = " ".join(stdout.split())  # rich wraps the line
    assert f"the configurations diverge beyond the tolerance in 0 of {rounds} rounds" in said


def test_probe_and_bench_say_what_the_drift_left_out_and_the_references_notes(
        make_pair, fixture_root, tmp_path, capsys):
    """A reference with another MLP width and trained for a smaller block: probe and bench
    each say in one line which buffers the drift could not compare (and their JSON carries
    them), and the reference's note is shown where the drafter's notes go, as the
    reference's."""
    from fixtures import write_drafter

    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    config = json.loads((draft_dir / "config.json").read_text())
    config["intermediate_size"], config["dflash_config"]["block_size"] = 96, 3
    other = write_drafter(fixture_root / "narrow-block-3-reference", config, seed=2)
    out = tmp_path / "out"
    assert main(["probe", str(target_dir), "--prompt", "Hello", "--block", "3", "--rounds", "2",
                 "--compare", str(other), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    differs = (f"--compare {other}: its config.json differs from the drafter's: "
               "intermediate_size = 96 (the drafter: 128); dflash_config.block_size = 3 (the "
               "drafter: 16)")
    assert f"note: {differs}" in captured.err.splitlines()
    assert (f"note: --compare {other}: block of 3 proposals is beyond the 2 the drafter was "
            "trained for") in captured.err.splitlines()
    left = [l for l in captured.out.splitlines() if "the drift leaves out" in l]
    assert left == ["--- the drift leaves out 6 buffers it cannot compare (another shape, or on "
                    "one side only): draft layer 0 ffn_gate (1x4x128 vs 1x4x96), draft layer 0 "
                    "ffn_up (1x4x128 vs 1x4x96), draft layer 0 ffn_act (1x4x128 vs 1x4x96), "
                    "draft layer 1 ffn_gate (1x4x128 vs 1x4x96) and 2 more"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["compare_left_out"][0] == {
        "stage": "draft", "layer": 0, "buffer": "ffn_gate", "primary_shape": [1, 4, 128],
        "reference_shape": [1, 4, 96]}
    assert len(summary["compare_left_out"]) == 6

    bench_json = tmp_path / "bench.json"
    assert main(["bench", str(target_dir), "--blocks", "3", "--limit", "1", "--max-tokens", "6",
                 "--compare", str(other), "--json", str(bench_json)]) == 0
    captured = capsys.readouterr()
    assert left[0].removeprefix("--- ") in " ".join(captured.out.split())  # rich wraps it
    assert (f"note (block 3): --compare {other}: block of 3 proposals is beyond the 2 the "
            "drafter was trained for") in captured.out
    data = json.loads(bench_json.read_text())
    assert data["compare"]["left_out"] == summary["compare_left_out"]
    assert data["notes"]["3"] == [differs, f"--compare {other}: block of 3 proposals is beyond "
                                  "the 2 the drafter was trained for"]


def test_export_carries_the_references_slots_and_time(make_pair, fixture_root, tmp_path, capsys):
    """The reference's per-slot columns (its target, argmax, walk, candidates) and its time
    per round are the records', beside the drafter's."""
    from fixtures import write_drafter

    from dflash_tui.tables import load_trace

    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    config = json.loads((draft_dir / "config.json").read_text())
    other = write_drafter(fixture_root / "export-reference", config, seed=7)
    out = tmp_path / "out"
    assert main(["probe", str(target_dir), "--prompt", "Hello", "--block", "4", "--rounds", "3",
                 "--compare", str(other), "--out", str(out)]) == 0
    capsys.readouterr()
    records = [round_from_json(json.loads((out / f"round-{i:04d}.json").read_text()))
               for i in range(3)]
    tables = load_trace(out)
    assert [r["compare_ms"] for r in tables.rounds] == [r.compare.ms for r in records]
    assert all(r.compare.ms > 0 for r in records)
    assert [(s["compare_target"], s["compare_argmax"], s["compare_left_argmax"],
             s["compare_in_candidates"]) for s in tables.slots] == [
        cells for r in records for cells in zip(r.compare.targets, r.compare.argmax,
                                                r.compare.left_argmax, r.compare.in_candidates)]
    # and the stage times are the drafter's own: the reference is not in the commit's
    assert all(r.timings_ms["commit"] < r.compare.ms for r in records)


def test_bench_compare_json_carries_the_drift_the_text_states(nan_pair, tmp_path, capsys):
    """The JSON's `compare` counts what the divergence line says (rounds compared, rounds
    diverged, by first divergent buffer), over every round and per cell, and carries no
    lossless-check fields (`checked`, `diverged`: the drafter's decode, top-level) that
    read as drift."""
    import re

    target_dir, nan_dir = nan_pair
    out = tmp_path / "bench.json"
    assert main(["bench", str(target_dir), "--blocks", "2,3", "--limit", "1", "--max-tokens",
                 "8", "--compare", str(nan_dir), "--json", str(out)]) == 0
    stdout = " ".join(capsys.readouterr().out.split())  # rich wraps the line
    said = re.search(r"diverge beyond the tolerance in (\d+) of (\d+) rounds; first at: "
                     r"draft layer 1 ffn_out \((\d+)\)", stdout)
    assert said, stdout
    diverged, compared, first = map(int, said.groups())
    data = json.loads(out.read_text())
    compare = data["compare"]
    assert (compare["rounds_compared"], compare["rounds_diverged"]) == (compared, diverged)
    assert compare["first_divergent"] == {"draft layer 1 ffn_out": first}
    # the NaN layer diverges in every round the drafter ran
    assert diverged == compared == sum(c["rounds"] for c in data["cells"] if c["workload"] != "all")
    for cell in compare["cells"]:
        assert "checked" not in cell and "diverged" not in cell and "speed" not in cell
        assert cell["rounds_compared"] == cell["rounds"] > 0
        assert cell["rounds_diverged"] == cell["rounds"]
        assert cell["first_divergent"] == {"draft layer 1 ffn_out": cell["rounds"]}
    # the lossless check stays where it belongs: the drafter's cells
    assert all(c["checked"] == c["prompts"] and c["diverged"] == 0 for c in data["cells"])


def test_probe_names_where_a_reference_overflowed_behind_a_rounding_divergence(
        fp16_overflow_pair, tmp_path, capsys):
    """A float16 reference that overflows, judged at a tolerance its rounding passes (as a
    bfloat16 drafter against float16 is at the default): its round lines, last lines,
    summary.json and export say that its logits went NaN / Inf and at which buffer it first
    went non-finite, not only the rounding-level first divergence before it (which was all
    they said)."""
    from dflash_tui.tables import load_trace

    target_dir, draft_dir = fp16_overflow_pair
    out = tmp_path / "out"
    assert main(["probe", str(target_dir), "--draft", str(draft_dir), "--prompt", "Hello",
                 "--block", "3", "--rounds", "3", "--no-probes", "--compare", "dtype=float16",
                 "--compare-tol", "1e-5", "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    records = [round_from_json(json.loads((out / f"round-{i:04d}.json").read_text()))
               for i in range(3)]
    bad = records[0].compare.first_nonfinite
    assert bad.where.startswith("draft layer 0 ") and bad.nonfinite == "reference"
    lines = [l for l in stdout.splitlines() if l.startswith("round ")]
    for line, record in zip(lines, records):
        reference = line.split("| reference accepted")[1]
        first = record.compare.first_divergent
        assert first.nonfinite is None and f"DIVERGES: {first.where} (rel err" in reference
        assert "LOGITS NON-FINITE in 3 of 3 slots" in reference
        assert reference.endswith(f"; NON-FINITE first at {record.compare.first_nonfinite.where} "
                                  "(on the reference side only)")
        assert "LOGITS NON-FINITE" not in line.split("|")[0]  # the float32 drafter holds it
    assert (f"--- reference dtype=float16: logits NaN/Inf in 3 of 3 rounds, first in round 0; "
            f"a buffer non-finite on one side only in 3 of 3 rounds, first in round 0 at "
            f"{bad.where} (on the reference side only)") in stdout.splitlines()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["compare_nonfinite_logit_rounds"] == [0, 1, 2]
    assert summary["nonfinite_logit_rounds"] == []
    assert summary["compare_first_nonfinite"] == {
        "round": 0, "stage": "draft", "layer": 0, "buffer": bad.buffer, "rel_err": None,
        "nonfinite": "reference"}
    assert all(s["compare_logits_nonfinite"] and not s["logits_nonfinite"]
               for s in load_trace(out).slots)


def test_bench_counts_each_sides_nonfinite_logits_in_its_own_cells(
        fp16_overflow_pair, nan_pair, make_pair, tmp_path, capsys):
    """The reference's cells in the bench JSON count the reference's NaN / Inf logit rounds,
    not the drafter's (they carried the drafter's count: 0 for a float16 reference that
    overflowed in every round, every round for a healthy reference beside a NaN drafter),
    and the report says where the reference went non-finite."""
    target_dir, overflow_dir = fp16_overflow_pair
    _, nan_dir = nan_pair
    _, good_dir = make_pair("llama", "DFlash2DraftModel")

    def bench(draft, spec, name):
        out = tmp_path / name
        assert main(["bench", str(target_dir), "--draft", str(draft), "--blocks", "3",
                     "--limit", "1", "--max-tokens", "6", "--compare", spec,
                     "--json", str(out)]) == 0
        return json.loads(out.read_text()), " ".join(capsys.readouterr().out.split())

    data, stdout = bench(overflow_dir, "dtype=float16", "overflow.json")
    rounds = sum(c["rounds"] for c in data["cells"] if c["workload"] != "all")
    assert all(c["nonfinite_logit_rounds"] == 0 for c in data["cells"])
    assert all(c["nonfinite_logit_rounds"] == c["rounds"] > 0 for c in data["compare"]["cells"])
    assert f"REFERENCE LOGITS NaN/Inf in {rounds} of {rounds} rounds" in stdout
    compare = data["compare"]
    assert compare["rounds_nonfinite"] == rounds
    # in probe's words for the side (one vocabulary: the bench said `on the reference side`,
    # `on the drafter side`, `on both sides`, probe `... only`, and the ▶ line `primary`)
    assert all(w.startswith("draft layer 0 ") and w.endswith(" on the reference side only")
               for w in compare["first_nonfinite"])
    assert sum(compare["first_nonfinite"].values()) == rounds

    data, stdout = bench(nan_dir, str(good_dir), "nan.json")
    assert all(c["nonfinite_logit_rounds"] == c["rounds"] > 0 for c in data["cells"])
    assert all(c["nonfinite_logit_rounds"] == 0 for c in data["compare"]["cells"])
    assert "REFERENCE LOGITS" not in stdout and "DRAFTER LOGITS NaN/Inf" in stdout
    assert data["compare"]["first_nonfinite"] == {
        "draft layer 1 ffn_out on the drafter side only": data["compare"]["rounds_compared"]}


def test_the_divergence_line_counts_every_diverged_round():
    """Past the four commonest first divergent buffers, the rest are counted, so the line's
    numbers add up to the rounds it says diverged."""
    from pathlib import Path

    from dflash_tui.bench.compare import divergence_line
    from dflash_tui.bench.prompts import Prompt, Workload
    from dflash_tui.bench.runner import BenchResult, Settings
    from dflash_tui.bench.stats import RoundStat, SpecRun

    def line(firsts) -> str:
        """The line for one prompt's rounds, each first diverging at `firsts[i]` (None: no
        divergence)."""
        prompt = Prompt("prose", "01", "text", Path("01.txt"))
        rounds = tuple(RoundStat(gamma=2, accepted=1, committed=2, stage_ms=(0.0,) * 5,
                                 compare_accepted=1, compare_divergent=f) for f in firsts)
        run = SpecRun(prompt, 2, (1,) * 40, rounds, 0.0, 0.0, "length", checked=True)
        return divergence_line(BenchResult(
            Settings(blocks=(2,), max_tokens=64), (Workload("prose", (prompt,)),),
            compare="bits=4", compare_tol=0.01, spec_runs=[run])).plain

    named = (["context ctx_combined"] * 5 + ["draft layer 0 ffn_gate"] * 4
             + ["draft layer 0 conv_p2"] * 3 + ["context layer 3 ctx_v"] * 2)
    assert line(named + ["draft logits"] * 2 + ["draft layer 1 ffn_out"] + [None] * 3) == (
        "the configurations diverge beyond the tolerance in 17 of 20 rounds; first at: "
        "context ctx_combined (5), draft layer 0 ffn_gate (4), draft layer 0 conv_p2 (3), "
        "context layer 3 ctx_v (2) and 3 more in 2 other buffers")
    assert line(named + ["draft logits"]).endswith("ctx_v (2) and 1 more in 1 other buffer")
    assert line(named).endswith("context layer 3 ctx_v (2)")  # four buffers: nothing more
