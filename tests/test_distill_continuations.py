"""An earlier data phase's continuations, kept in a file and taken by the next one."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from dflash_tui.cli import main
from dflash_tui_distill import continuations, data_phase, dataset

FLAGS = ["--phase", "data", "--num-prompts", "6", "--max-new-tokens", "8", "--seed", "3"]


@pytest.fixture(scope="module")
def first_phase(make_pair, tmp_path_factory):
    """A data phase over generated prompts and a small real corpus, and its real-* kept."""
    target_dir, _ = make_pair("llama")
    root = tmp_path_factory.mktemp("continuations")
    corpus = root / "prompts.jsonl"
    corpus.write_text("".join(json.dumps(
        {"text": f"Explain what line {n} of the poem means.", "kind": "real-prose",
         "split": "validation" if n < 2 else "train", "source": "poems==1.0"}) + "\n" for n in range(9)))
    data = root / "first"
    assert main(["distill", str(target_dir), "--out", str(root / "o"), "--data", str(data),
                 *FLAGS, "--prompts-from", str(corpus)]) == 0
    kept = root / "kept.npz"
    assert continuations.main([str(data), str(kept), "--kinds", "real-"]) == 0
    return target_dir, corpus, data, kept


def rows_by_text(data) -> dict[str, tuple]:
    """Every stored sequence as (ids, prompt length, stopped), by its prompt's text."""
    texts = [p["text"] for p in dataset.read_prompts(data)]
    manifest = dataset.read_manifest(data)
    return {texts[index]: (tokens.tolist(), plen, stopped)
            for index, tokens, plen, stopped in dataset.shard_rows(data, manifest["shards"])}


def test_a_data_phase_takes_the_kept_continuations_and_decodes_only_the_rest(first_phase, tmp_path,
                                                                             capsys):
    target_dir, corpus, first, kept = first_phase
    capsys.readouterr()
    second = tmp_path / "second"
    assert main(["distill", str(target_dir), "--out", str(tmp_path / "o"), "--data", str(second),
                 *FLAGS, "--prompts-from", str(corpus), "--continuations-from", str(kept)]) == 0
    log = capsys.readouterr().err
    generated = sum(1 for p in dataset.read_prompts(second) if not p["kind"].startswith("real-"))
    total = len(dataset.read_prompts(second))
    assert f"data: 9 of {total} prompts take their continuation from {kept}" in log
    assert f"data: {generated} sequences this command" in log  # only the generated were decoded
    assert rows_by_text(second) == rows_by_text(first)
    manifest = json.loads((second / "manifest.json").read_text())
    assert manifest["complete"] and manifest["continuations_from"] == [{"file": "kept.npz", "taken": 9}]


def test_the_kept_file_holds_the_continuations_alone_in_uint16(first_phase):
    _, _, first, kept = first_phase
    with np.load(kept) as data:
        assert data["tokens"].dtype == np.uint16 and data["keys"].shape == (9, 32)
        stored = data["tokens"]
    seqs = [s for split in ("train", "validation") for s in [dataset.load_sequences(first, split)]]
    real = [t[p:] for s in seqs for t, p, k in zip(s.tokens, s.prompt_lens, s.kinds) if k == "real-prose"]
    assert len(stored) == sum(len(t) for t in real)


def test_continuations_decoded_under_other_settings_are_refused_in_one_line(first_phase, tmp_path,
                                                                            capsys):
    target_dir, corpus, _, kept = first_phase
    flags = [f if f != "8" else "9" for f in FLAGS]  # --max-new-tokens 9
    assert main(["distill", str(target_dir), "--out", str(tmp_path / "o"), "--data", str(tmp_path / "d"),
                 *flags, "--prompts-from", str(corpus), "--continuations-from", str(kept)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (f"dflash-tui: error: --continuations-from {kept}: decoded with max_new_tokens 8; "
                   "this data phase uses 9")
    assert not (tmp_path / "d").exists()  # refused before anything was written


def damaged(kept, change: dict) -> bytes:
    """The kept file with some arrays replaced."""
    with np.load(kept) as data:
        arrays = {k: data[k] for k in data.files}
    arrays.update(change)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


@pytest.mark.parametrize("make, expected", [
    (lambda kept: None, "no such file"),
    (lambda kept: b"not an npz", "not a continuations file"),
    (lambda kept: kept.read_bytes()[: kept.stat().st_size // 2], "not a continuations file"),  # a part lost
    (lambda kept: damaged(kept, {"meta": np.frombuffer(b"[1]", np.uint8)}), "not a continuations file"),
    # offsets that run past the end of the tokens
    (lambda kept: damaged(kept, {"tokens": np.zeros(3, np.uint16)}), "not a continuations file"),
    (lambda kept: damaged(kept, {"keys": np.zeros((9, 16), np.uint8)}), "not a continuations file"),
])
def test_a_missing_foreign_or_damaged_continuations_file_is_a_one_line_error(first_phase, tmp_path, capsys,
                                                                             make, expected):
    target_dir, corpus, _, kept = first_phase
    path = tmp_path / "kept.npz"
    content = make(kept)
    if content is not None:
        path.write_bytes(content)
    assert main(["distill", str(target_dir), "--out", str(tmp_path / "o"), "--data", str(tmp_path / "d"),
                 *FLAGS, "--continuations-from", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"dflash-tui: error: --continuations-from {path}: {expected}")
    assert not (tmp_path / "d").exists()  # refused before anything was written


def test_exporting_an_unfinished_data_phase_is_refused(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    assert continuations.main([str(tmp_path / "data"), str(tmp_path / "kept.npz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no finished data phase here" in err[0]
    assert not (tmp_path / "kept.npz").exists()


def test_continuations_of_another_target_are_refused_before_the_data_are_written(first_phase, make_pair,
                                                                                 tmp_path, capsys):
    _, corpus, _, kept = first_phase
    other_target, _ = make_pair("qwen35")
    assert main(["distill", str(other_target), "--out", str(tmp_path / "o"), "--data", str(tmp_path / "d"),
                 *FLAGS, "--prompts-from", str(corpus), "--continuations-from", str(kept)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"dflash-tui: error: --continuations-from {kept}: decoded with target {{")
    assert not (tmp_path / "d" / "manifest.json").exists()


def test_a_file_that_cannot_be_written_is_a_one_line_error(first_phase, tmp_path, capsys):
    _, _, first, _ = first_phase
    out = tmp_path / "no-such-folder" / "kept.npz"
    assert continuations.main([str(first), str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"continuations: error: {out}: cannot write it (No such file or directory)"]


def test_a_taken_continuation_is_stored_as_a_decode_would_store_it(tmp_path):
    """Prompt ids, then the continuation; the prompt's length; and whether it stopped."""
    kept = continuations.Continuations("kept.npz", {}, {
        continuations.prompt_key([5, 6, 7]): (np.array([8, 2], np.uint16), True),
        continuations.prompt_key([5, 9]): (np.array([3, 3, 3], np.uint16), False)})
    manifest = {"version": dataset.VERSION, "shards": []}
    todo = [{"i": 0}, {"i": 1}, {"i": 2}]
    rest, rest_ids = data_phase._take_stored(tmp_path, manifest, todo, [[5, 9], [1], [5, 6, 7]], kept,
                                             shard_size=1, say=lambda message: None)
    assert rest == [{"i": 1}] and rest_ids == [[1]]
    rows = [(i, t.tolist(), p, s) for i, t, p, s in dataset.shard_rows(tmp_path, manifest["shards"])]
    assert rows == [(0, [5, 9, 3, 3, 3], 2, False), (2, [5, 6, 7, 8, 2], 3, True)]
    assert dataset.read_manifest(tmp_path)["continuations_from"] == [{"file": "kept.npz", "taken": 2}]


def test_exporting_kinds_that_no_prompt_has_is_refused(first_phase, tmp_path, capsys):
    _, _, first, _ = first_phase
    assert continuations.main([str(first), str(tmp_path / "kept.npz"), "--kinds", "rael-"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"continuations: error: {first}: no sequence's prompt kind starts with 'rael-'; "
                   "nothing to keep"]
    assert not (tmp_path / "kept.npz").exists()


def test_a_source_can_be_left_out_of_the_kept_file(first_phase, tmp_path, capsys):
    _, _, first, _ = first_phase
    prompts = dataset.read_prompts(first)
    poems = {continuations.prompt_key(ids[:plen].tolist())
             for index, ids, plen, _ in dataset.shard_rows(first, dataset.read_manifest(first)["shards"])
             if prompts[index]["source"] == "poems==1.0"}
    assert len(poems) == 9
    kept = tmp_path / "without-poems.npz"
    assert continuations.main([str(first), str(kept), "--exclude-source", "poems==1.0"]) == 0
    table = continuations.load(str(kept))
    assert len(table.table) == len(prompts) - 9 and not poems & set(table.table)
    assert table.meta["excluded_sources"] == ["poems==1.0"]
    # a name no prompt carries is a typo, not an empty exclusion
    capsys.readouterr()
    assert continuations.main([str(first), str(tmp_path / "x.npz"), "--exclude-source", "poem==1.0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'poem==1.0'" in err and not (tmp_path / "x.npz").exists()
    # leaving out every prompt of the kinds asked for says so
    assert continuations.main([str(first), str(tmp_path / "y.npz"), "--kinds", "real-",
                               "--exclude-source", "poems==1.0"]) == 2
    assert "once poems==1.0 is left out" in capsys.readouterr().err


def test_sources_under_a_licence_are_left_out_by_what_the_manifest_records(make_pair, first_phase,
                                                                            tmp_path, capsys):
    target_dir, _ = make_pair("llama")
    corpus = tmp_path / "corpus" / "prompts.jsonl"
    corpus.parent.mkdir()
    rows = [{"text": f"Summarize paragraph {n} of the manual.", "kind": "real-prose", "split": "train",
             "source": "manual==2" if n % 2 else "docs==1"} for n in range(6)]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (corpus.parent / "sources.json").write_text(json.dumps({"sources": {
        "manual==2": {"licence": "GPL-2.0-or-later"}, "docs==1": {"licence": "BSD-3-Clause"},
        "unused==3": {"licence": "GPL-3.0-only"}}}))  # listed, no prompt drawn from it
    data = tmp_path / "data"
    assert main(["distill", str(target_dir), "--out", str(tmp_path / "o"), "--data", str(data),
                 *FLAGS, "--prompts-from", str(corpus)]) == 0
    kept = tmp_path / "kept.npz"
    assert continuations.main([str(data), str(kept), "--kinds", "real-", "--exclude-licence", "GPL"]) == 0
    table = continuations.load(str(kept))
    prompts = dataset.read_prompts(data)
    by_source = {}
    for index, ids, plen, _ in dataset.shard_rows(data, dataset.read_manifest(data)["shards"]):
        by_source.setdefault(prompts[index]["source"], set()).add(continuations.prompt_key(ids[:plen].tolist()))
    assert set(table.table) == by_source["docs==1"] and len(by_source["manual==2"]) == 3
    assert sorted(table.meta["excluded_sources"]) == ["manual==2", "unused==3"]
    # a data phase whose manifest records no licences cannot check the exclusion: no file
    _, _, first, _ = first_phase
    capsys.readouterr()
    assert continuations.main([str(first), str(tmp_path / "x.npz"), "--exclude-licence", "GPL"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "records no corpus sources" in err and not (tmp_path / "x.npz").exists()


def test_the_committed_corpus_continuations_load_and_fit_the_sample_target():
    """distill/continuations/ holds stage 13's corpus continuations for stage 16 on: the file
    loads through the data phase's own reader, was decoded under the recipe's settings by
    the bundled sample's target, and leaves out the GPL source, as its README says."""
    from pathlib import Path

    path = Path(__file__).parents[1] / "distill" / "continuations" / "corpus13-smollm2-135m-q4_1.npz"
    stored = continuations.load(str(path))
    stored.check(max_new_tokens=256, data_dtype="float32")
    meta = stored.meta
    assert meta["target"]["name"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert meta["target"]["vocab"] == 49152 and meta["target"]["layers"] == 30
    assert meta["excluded_sources"] == ["debian-reference-en==2.100"]
    assert meta["sequences"] == len(stored.table) == 31612
    lengths = [len(tokens) for tokens, _ in stored.table.values()]
    assert 1 <= min(lengths) and max(lengths) <= 256
    assert sum(lengths) == 5817702
