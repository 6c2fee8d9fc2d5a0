"""A damaged trace replays what is readable: every damaged line is skipped and counted,
whatever the damage (bytes that are not text, JSON that no longer parses, a field of the
wrong type), and sessions never merge when a header is the damaged line."""

from __future__ import annotations

import json

import pytest


from dflash_tui.app.replay import load


def _lines(recorded):
    path, _ = recorded
    return path.read_bytes().splitlines(keepends=True)  # header, round 0, round 1, round 2


def _damage(line: bytes, how: str) -> bytes:
    middle = len(line) // 2
    if how == "random bytes":  # not UTF-8: the whole trace used to be refused
        # Over the line's start, so the JSON is broken wherever its strings fall: in the
        # middle, the bytes could land inside one string value (the header holds paths that
        # differ between machines), which reads back as valid JSON with replacement chars.
        return bytes(range(0x80, 0x100, 3)) + line[43:]
    if how == "torn JSON":
        return line[:middle] + b"\n"
    obj = json.loads(line)
    obj["state"] = ["not", "a", "mapping"]  # valid JSON, our schema, a damaged field
    return json.dumps(obj).encode() + b"\n"


@pytest.mark.parametrize("how", ["random bytes", "torn JSON", "damaged field"])
def test_a_damaged_round_in_the_middle_is_skipped_and_counted(recorded, tmp_path, how):
    header, *rounds = _lines(recorded)
    path = tmp_path / "damaged.jsonl"
    path.write_bytes(header + rounds[0] + _damage(rounds[1], how) + rounds[2])
    loaded = load(path)
    assert loaded.skipped == 1
    [session] = loaded.sessions
    assert [r.round for r in session.rounds] == [0, 2]
    assert session.info is not None and session.info.prompt == "The quick brown fox"


def test_a_damaged_header_does_not_merge_two_sessions(recorded, tmp_path):
    header, *rounds = _lines(recorded)
    path = tmp_path / "two.jsonl"
    # a restarted session appends a second header; here that header is damaged
    path.write_bytes(header + b"".join(rounds) + _damage(header, "random bytes") + rounds[0] + rounds[1])
    loaded = load(path)
    assert loaded.skipped == 1
    assert [[r.round for r in s.rounds] for s in loaded.sessions] == [[0, 1, 2], [0, 1]]
    assert loaded.sessions[1].info is None  # its header is gone: said, not borrowed


@pytest.fixture(scope="module")
def probed(make_pair, tmp_path_factory):
    """round-0000.json as `probe --rounds 1 --out DIR` writes it."""
    from dflash_tui.cli import main

    target, _ = make_pair("llama", "DFlash2DraftModel")
    out = tmp_path_factory.mktemp("probed") / "run"
    assert main(["probe", str(target), "--prompt", "Hi", "--rounds", "1", "--out", str(out)]) == 0
    return out / "round-0000.json"


@pytest.mark.parametrize("value", ["x", 3, True])
@pytest.mark.parametrize("command", ["replay", "export"])
def test_a_snapshot_whose_first_nonfinite_is_no_object_is_one_line(probed, tmp_path, capsys,
                                                                   monkeypatch, command, value):
    from one_line import refusal

    monkeypatch.setattr("dflash_tui.app.replay_app.ReplayApp",
                        lambda *a, **k: pytest.fail("the damaged snapshot replayed"))
    snapshot = json.loads(probed.read_text())
    assert snapshot["first_nonfinite"] is None  # the field the damage replaces
    snapshot["first_nonfinite"] = value
    file = tmp_path / "round-0000.json"
    file.write_text(json.dumps(snapshot, indent=1))
    argv = [command, file] + (["--out", tmp_path / "tables"] if command == "export" else [])
    refusal(capsys, argv, f"{file}: damaged snapshot",
            f"first_nonfinite = {value!r}; expected an object or null")
    assert not (tmp_path / "tables").exists()  # export wrote nothing


@pytest.fixture(scope="module")
def probed_compare(make_pair, tmp_path_factory):
    """round-0000.json of `probe --compare DRAFTER`: a record with the reference's fields."""
    from dflash_tui.cli import main

    target, draft = make_pair("llama", "DFlash2DraftModel")
    out = tmp_path_factory.mktemp("probed_compare") / "run"
    assert main(["probe", str(target), "--prompt", "Hi", "--rounds", "1", "--compare",
                 str(draft), "--out", str(out)]) == 0
    return out / "round-0000.json"


@pytest.mark.parametrize("field, value", [("top_k", "x"), ("top_k", [2]),
                                          ("nonfinite_logit_slots", "x"),
                                          ("nonfinite_logit_slots", [1, "a"])])
def test_a_snapshot_whose_reference_fields_are_of_the_wrong_type_is_one_line(
        probed_compare, tmp_path, capsys, field, value):
    """The reference's selector K and its non-finite logit slots (fields newer than most
    recordings): a value of the wrong type is refused by name, in one line, nothing written."""
    from one_line import refusal

    snapshot = json.loads(probed_compare.read_text())
    assert field in snapshot["compare"]  # the field the damage replaces
    snapshot["compare"][field] = value
    file = tmp_path / "round-0000.json"
    file.write_text(json.dumps(snapshot, indent=1))
    refusal(capsys, ["export", file, "--out", tmp_path / "tables"], f"{file}: damaged snapshot",
            f"compare.{field}")
    assert not (tmp_path / "tables").exists()


@pytest.mark.parametrize("command", [["replay"], ["export", "--out", "TABLES"]])
def test_the_export_directory_itself_names_its_newest_session(recorded, tmp_path, capsys, command):
    """`replay dflash-snapshots` (the folder every session's directory goes in, the first
    path one reaches for) used to say only `no round-NNNN.json snapshots (and no
    trace.jsonl) in this directory`, as if nothing were recorded there."""
    from one_line import refusal

    root = tmp_path / "dflash-snapshots"
    for name in ("20250301-142233", "20250302-090000"):
        (root / name).mkdir(parents=True)
        (root / name / "trace.jsonl").write_bytes(recorded[0].read_bytes())
    (root / "notes").mkdir()  # not a session: no trace, no snapshot
    argv = [command[0], root, *(tmp_path / a if a == "TABLES" else a for a in command[1:])]
    line = refusal(capsys, argv, f"{root}: holds 2 session directories",
                   f"the newest is {root / '20250302-090000'}")
    assert "no round-NNNN.json" not in line, line


@pytest.mark.parametrize("names, says", [
    # one session, the usual case after a first run: no "1 session directories"
    (["20250301-142233"], "holds one session directory, not a recording (expected it: "),
    # the app's tenth directory of one second, -10, is newer than -2 (name order put it first)
    (["20250301-142233", *(f"20250301-142233-{n}" for n in range(2, 11))],
     "holds 10 session directories, not a recording (expected one of them: the newest is "),
])
def test_the_export_directory_names_its_newest_session_by_the_apps_order(recorded, tmp_path,
                                                                        capsys, names, says):
    from one_line import refusal

    root = tmp_path / "dflash-snapshots"
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "trace.jsonl").write_bytes(recorded[0].read_bytes())
    line = refusal(capsys, ["replay", root], f"{root}: {says}{root / names[-1]})")
    assert line.endswith(f"{root / names[-1]})"), line
