"""`dflash-tui export` and `load_trace`: the flat tables of a trace or a snapshot directory,
each row checked against the record it came from."""

from __future__ import annotations

import csv
import math
import sys

import pytest

from dflash_tui import cli, load_trace
from dflash_tui.engine.records import STAGE_ORDER


@pytest.fixture(scope="module")
def recorded(pair, tmp_path_factory):
    """Two sessions appended to one trace (as an explicit --trace FILE gets them), and the
    second one's rounds exported as snapshots too (as probe --out writes them)."""
    from dflash_tui.engine.api import load_pair
    from dflash_tui.engine.session import SessionOptions
    from dflash_tui.snapshot import TraceWriter, export_round

    root = tmp_path_factory.mktemp("export")
    pair = load_pair(*pair)
    sessions = []
    for prompt, rounds in (("The quick brown fox", 2), ("def add(a, b):", 4)):
        session = pair.open(prompt, options=SessionOptions(gamma=3))
        writer = TraceWriter(root / "trace.jsonl", session.info, session.prefill_record)
        records = list(session.run(rounds))
        for record in records:
            writer.write(record)
            if prompt.startswith("def"):
                export_round(root / "snapshots", record, session.info)
        writer.close()
        session.close()
        sessions.append(records)
    return root, sessions


def read_csv(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def cell(value) -> str:
    """How a value reads in the CSV."""
    if value is None or isinstance(value, float) and not math.isfinite(value):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def expected_rows(records):
    """Each table's rows, straight from the records' fields (not through dflash_tui.tables)."""
    rounds, slots, buffers = [], [], []
    for r in records:
        first = r.first_nonfinite
        rounds.append({
            "round": r.round, "position": r.position, "gamma": r.gamma, "accepted": r.accepted,
            "bonus": r.bonus, "committed": len(r.committed_tokens),
            "rollback_kind": r.rollback.kind, "rollback_rows": r.rollback.rows,
            **{f"ms_{s.stage}": s.ms for s in r.stages},
            "first_nonfinite": None if first is None else first.where,
            "top_k": r.selector.top_k,
        })
        for k in r.ranks:
            pick = r.selector.slots[k.slot]
            slots.append({
                "round": r.round, "slot": k.slot, "proposal": k.proposal, "target": k.target,
                "accepted": k.accepted, "rank": k.rank, "p_target": k.p_target,
                "in_candidates": k.in_candidates, "chosen_index": pick.chosen_index,
                "argmax": pick.argmax, "left_argmax": pick.chosen != pick.argmax,
                "logits_nonfinite": k.slot in r.nonfinite_logit_slots,
                "target_p1": k.target_top[0].prob,
            })
        for p in r.probes:
            buffers.append({
                "round": r.round, "stage": p.stage, "layer": p.layer, "buffer": p.name,
                "shape": "x".join(map(str, p.shape)), "dtype": p.dtype, "nan": p.nan,
                "posinf": p.posinf, "neginf": p.neginf, "min": p.min, "max": p.max,
                "absmax": p.absmax, "mean": p.mean, "rms": p.rms,
                "fp16_headroom_bits": p.fp16_headroom_bits,
            })
    return {"rounds": rounds, "slots": slots, "buffers": buffers}


def test_export_of_a_trace_writes_rows_equal_to_the_records(recorded, tmp_path, capsys):
    root, sessions = recorded
    out = tmp_path / "tables"
    assert cli.main(["export", str(root / "trace.jsonl"), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "holds 2 sessions; exporting the last" in captured.err
    expected = expected_rows(sessions[-1])
    for name, rows in expected.items():
        got = read_csv(out / f"{name}.csv")
        assert list(got[0]) == list(rows[0]), name  # exactly these columns, in this order
        assert got == [{k: cell(v) for k, v in row.items()} for row in rows], name
    assert f"{out / 'buffers.csv'}: {len(expected['buffers'])} rows" in captured.out
    assert [list(r) for r in read_csv(out / "rounds.csv")][0][8:13] == [f"ms_{s}" for s in STAGE_ORDER]

    assert cli.main(["export", str(root / "trace.jsonl"), "--out", str(out), "--session", "1",
                     "--force"]) == 0
    assert [r["round"] for r in read_csv(out / "rounds.csv")] == ["0", "1"]
    assert cli.main(["export", str(root / "trace.jsonl"), "--out", str(out), "--session", "3",
                     "--force"]) == 2
    assert "--session 3" in capsys.readouterr().err


def test_a_snapshot_directory_exports_the_same_tables(recorded, tmp_path):
    root, sessions = recorded
    assert cli.main(["export", str(root / "snapshots"), "--out", str(tmp_path / "a")]) == 0
    assert cli.main(["export", str(root / "trace.jsonl"), "--out", str(tmp_path / "b")]) == 0
    for name in ("rounds", "slots", "buffers"):
        assert (tmp_path / "a" / f"{name}.csv").read_text() == (tmp_path / "b" / f"{name}.csv").read_text()


def test_parquet_holds_the_same_rows(recorded, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    root, sessions = recorded
    assert cli.main(["export", str(root / "trace.jsonl"), "--out", str(tmp_path), "--format", "parquet"]) == 0
    expected = expected_rows(sessions[-1])
    for name, rows in expected.items():
        table = pq.read_table(tmp_path / f"{name}.parquet")
        got = table.to_pylist()
        assert table.column_names == list(rows[0])
        assert got == [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                        for k, v in row.items()} for row in rows], name


def test_parquet_without_pyarrow_is_one_line(recorded, tmp_path, capsys, monkeypatch):
    root, _ = recorded
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    assert cli.main(["export", str(root / "trace.jsonl"), "--out", str(tmp_path / "t"),
                     "--format", "parquet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'dflash-tui[parquet]'" in err
    assert not (tmp_path / "t").exists()  # refused before anything was written


def test_load_trace_gives_a_notebook_the_same_tables(recorded):
    root, sessions = recorded
    tables = load_trace(root / "trace.jsonl")
    expected = expected_rows(sessions[-1])
    assert tables.rounds == expected["rounds"] and tables.slots == expected["slots"]
    assert tables.buffers == expected["buffers"]
    assert load_trace(root / "trace.jsonl", session=1).rounds == expected_rows(sessions[0])["rounds"]
    pytest.importorskip("pandas")
    rounds, slots, buffers = tables.to_pandas()
    assert list(rounds["accepted"]) == [r.accepted for r in sessions[-1]]
    assert len(buffers) == len(expected["buffers"]) and list(slots.columns) == list(expected["slots"][0])


def test_export_never_overwrites_tables_without_force(recorded, tmp_path, capsys):
    from one_line import refusal

    root, sessions = recorded
    out = tmp_path / "tables"
    out.mkdir()
    (out / "rounds.csv").write_text("the user's own table\n")
    (out / "notes.txt").write_text("kept")
    argv = ["export", root / "trace.jsonl", "--out", out]
    refusal(capsys, argv, f"--out {out}: already holds rounds.csv", "--force")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "rounds.csv"]
    assert (out / "rounds.csv").read_text() == "the user's own table\n"

    assert cli.main([*map(str, argv), "--force"]) == 0
    assert [r["round"] for r in read_csv(out / "rounds.csv")] == [str(r.round) for r in sessions[-1]]
    assert (out / "notes.txt").read_text() == "kept"
    refusal(capsys, argv, f"--out {out}: already holds rounds.csv")  # an export is refused alike


def test_export_into_its_own_source_folder_is_refused(recorded, capsys):
    from one_line import refusal

    root, _ = recorded
    snapshots = root / "snapshots"
    before = sorted(p.name for p in snapshots.iterdir())
    refusal(capsys, ["export", snapshots, "--out", snapshots / ".." / "snapshots"],
            "is SOURCE's own folder")
    refusal(capsys, ["export", snapshots, "--out", snapshots, "--force"], "is SOURCE's own folder")
    assert sorted(p.name for p in snapshots.iterdir()) == before
    # a trace's folder, the session directory, is its own folder too
    before = sorted(p.name for p in root.iterdir())
    refusal(capsys, ["export", root / "trace.jsonl", "--out", root, "--force"], "is SOURCE's own folder")
    assert sorted(p.name for p in root.iterdir()) == before


@pytest.mark.parametrize("argv, message", [
    (["export", "{tmp}/missing.jsonl", "--out", "{tmp}/o"], "no such trace"),
    (["export", "{trace}", "--out", "{file}"], "is not a directory"),
    (["export", "{trace}"], "--out"),
])
def test_export_refusals_are_one_line(recorded, tmp_path, capsys, argv, message):
    root, _ = recorded
    (tmp_path / "file").write_text("x")
    argv = [a.format(tmp=tmp_path, trace=root / "trace.jsonl", file=tmp_path / "file") for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_a_last_session_without_rounds_is_passed_over(recorded, tmp_path, capsys):
    """A restart then q leaves a session header with no round: export takes the last session
    that has rounds, as replay shows them."""
    root, sessions = recorded
    trace = tmp_path / "trace.jsonl"
    text = (root / "trace.jsonl").read_text()
    trace.write_text(text + text.splitlines()[0] + "\n")  # one more header, no round
    out = tmp_path / "tables"
    assert cli.main(["export", str(trace), "--out", str(out)]) == 0, capsys.readouterr().err
    expected = expected_rows(sessions[-1])
    assert read_csv(out / "rounds.csv") == [{k: cell(v) for k, v in row.items()}
                                           for row in expected["rounds"]]
