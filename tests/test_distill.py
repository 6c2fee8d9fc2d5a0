"""`dflash-tui distill` end to end on a tiny real target, on the CPU, in seconds."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from distill_flags import DATA_FLAGS, TRAIN_FLAGS
from fixtures import write_sample_shaped_drafter

from dflash_tui.cli import main
from dflash_tui_distill.settings import TrainSettings
from dflash_tui.engine.checkpoint import expected_shapes, load_drafter
from dflash_tui.engine.draft_config import DFLASH2, DraftConfig
from dflash_tui.engine.api import Pair
from dflash_tui.engine.session import SessionOptions
from dflash_tui.engine.target import encode_prompt, load_target



@pytest.fixture(scope="module")
def data_dir(make_pair, tmp_path_factory):
    """Self-distillation data from the llama fixture, generated once for this file."""
    target_dir, _ = make_pair("llama")
    data = tmp_path_factory.mktemp("distill") / "data"
    out = data.parent / "unused"
    assert main(["distill", str(target_dir), "--out", str(out), "--data", str(data),
                 "--phase", "data", *DATA_FLAGS]) == 0
    return target_dir, data


@pytest.fixture(scope="module")
def trained(data_dir, tmp_path_factory):
    """A drafter trained 40 steps, for the tests that start from one (read it, copy it to
    change it): enough that it accepts clearly more than nothing (about 1.3 per round at 7
    proposals as decoded), so a copy that computes garbage cannot pass for it."""
    target_dir, data = data_dir
    out = tmp_path_factory.mktemp("trained") / "drafter"
    assert distill(target_dir, out, data, "--phase", "train", "--eval-every", "0", "--save-every",
                   "100", "--steps", "40", "--lr", "3e-3") == 0
    return out


def _starts_where_it_left_off(first, second) -> bool:
    """Step 1 of `second` (started from `first`'s checkpoint) sees the trained drafter's loss,
    not a random one's: nearer `first`'s last step than its first."""
    log = lambda run: [json.loads(line) for line in (run / "train.jsonl").read_text().splitlines()]  # noqa: E731
    start, trained, resumed = log(first)[0], log(first)[-1], log(second)[0]
    return resumed["block_ce"] < (start["block_ce"] + trained["block_ce"]) / 2


def distill(target_dir, out, data, *flags) -> int:
    return main(["distill", str(target_dir), "--out", str(out), "--data", str(data),
                 *DATA_FLAGS, *TRAIN_FLAGS, *flags])


def test_data_phase_stores_prompt_and_greedy_continuation(data_dir):
    target_dir, data = data_dir
    manifest = json.loads((data / "manifest.json").read_text())
    assert manifest["complete"] and manifest["shards"]
    assert manifest["sequences"]["validation"] >= 1 and manifest["sequences"]["train"] >= 10
    prompts = [json.loads(line) for line in (data / "prompts.jsonl").read_text().splitlines()]
    assert {p["split"] for p in prompts} == {"train", "validation"}
    target = load_target(target_dir)
    with np.load(data / manifest["shards"][0]) as shard:
        first_len, first_plen = int(shard["lengths"][0]), int(shard["prompt_lens"][0])
        tokens = shard["tokens"][:first_len]
        index = int(shard["prompt_index"][0])
    assert tokens[:first_plen].tolist() == encode_prompt(target.tokenizer, prompts[index]["text"], None)
    assert first_len > first_plen


def test_out_of_memory_in_the_data_phase_keeps_what_finished_and_says_so(make_pair, tmp_path, capsys,
                                                                         monkeypatch):
    from dflash_tui_distill import data_phase

    target_dir, _ = make_pair("llama")
    data, out = tmp_path / "data", tmp_path / "unused"
    real = data_phase.decode_continuations

    def fails_after_one_batch(model, prompts, max_new, stops, batch_size, should_stop):
        # The real decode, then the allocator's failure on the second batch.
        for n, c in enumerate(real(model, prompts, max_new, stops, batch_size, should_stop)):
            if n == batch_size:
                raise RuntimeError("[malloc] Unable to allocate 1073741824 bytes: out of memory")
            yield c

    monkeypatch.setattr(data_phase, "decode_continuations", fails_after_one_batch)
    flags = ["distill", str(target_dir), "--out", str(out), "--data", str(data), "--phase", "data",
             *DATA_FLAGS, "--gen-batch", "8"]
    assert main(flags) == 2
    said = capsys.readouterr().err
    err = said.strip().splitlines()[-1]
    assert "Traceback" not in said and "out of device memory" in err and "--gen-batch 8" in err and "8 of" in err
    manifest = json.loads((data / "manifest.json").read_text())
    assert not manifest["complete"] and len(manifest["shards"]) == 1
    monkeypatch.setattr(data_phase, "decode_continuations", real)
    assert main(flags) == 0
    said = capsys.readouterr().err
    total = json.loads((data / "manifest.json").read_text())
    assert total["complete"] and f"{total['prompts'] - 8} of {total['prompts']} prompts to continue" in said


def test_distill_end_to_end_gives_a_checkpoint_the_engine_runs(data_dir, tmp_path):
    from dflash_tui_distill.evaluate import accepted_by_gamma

    target_dir, data = data_dir
    out = tmp_path / "drafter"
    assert distill(target_dir, out, data, "--steps", "8", "--eval-every", "4", "--save-every", "4",
                   "--session-tokens", "8") == 0
    drafter = load_drafter(out)
    config = drafter.config
    assert config.is_dflash2 and config.block_size == 8 and config.num_hidden_layers == 2
    record = config.extra["dflash_tui_training"]
    assert record["step"] == 8 and record["train"]["steps"] == 8 and record["train"]["seed"] == 1
    assert record["data"]["settings"]["num_prompts"] == 24
    curve = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    final = json.loads((out / "eval_final.json").read_text())
    assert final == curve[-1]
    # config.json's record holds the final eval's own numbers, each in its place
    assert record["held_out_final"] == {
        "blocks": final["blocks"], "accepted": accepted_by_gamma(final["gamma"]),
        "decode_sequences": final["decode"]["sequences"],
        "decode_accepted": accepted_by_gamma(final["decode"]["gamma"])}
    assert [c["step"] for c in curve] == [4, 8, 8] and curve[-1]["final"]
    assert not curve[1].get("final") and curve[1]["blocks"] < curve[2]["blocks"]
    assert set(curve[-1]["gamma"]) == {"2", "4", "7"}
    # Beside the evenly spread blocks, every eval walks validation answers as a decode does.
    assert set(curve[0]["decode"]["gamma"]) == set(curve[-1]["decode"]["gamma"]) == {"2", "4", "7"}
    assert curve[-1]["decode"]["sequences"] == record["data"]["sequences"]["validation"]
    # The checkpoint is bfloat16 on disk and runs a real round in the engine.
    stored = mx.load(str(out / "model.safetensors"))
    assert all(v.dtype == mx.bfloat16 for v in stored.values())
    pair = Pair(load_target(target_dir), drafter, out)
    session = pair.open("What is 12 plus 30?", options=SessionOptions(gamma=4, max_tokens=16))
    record = session.step_round()
    assert record.complete and 0 <= record.accepted <= 4 and len(record.proposals) == 4
    session.close()


def test_an_engine_session_that_parts_from_the_stored_text_says_where_and_keeps_its_prompt(
        data_dir, tmp_path):
    from dflash_tui_distill.dataset import load_sequences
    from dflash_tui_distill.evaluate import session_check

    target_dir, data = data_dir
    out = tmp_path / "drafter"
    assert distill(target_dir, out, data, "--steps", "2", "--phase", "train") == 0
    held = load_sequences(data, "validation")
    # the stored answer's first token changed: the engine's greedy decode must part from it there
    start = int(held.prompt_lens[0])
    original = int(held.tokens[0][start])
    tampered = held.tokens[0].copy()
    tampered[start] = original ^ 1
    held.tokens[0] = tampered
    first = session_check(load_target(target_dir), out, held, gamma=3, max_tokens=6)[0]
    assert not first["matches_greedy"] and first["first_difference"] == 0
    assert first["generated_token"] == original and first["stored_token"] == int(tampered[start])
    assert first["prompt_text"] == held.texts[0] and first["prompt"] == held.texts[0][:80]


def test_resume_continues_exactly(data_dir, tmp_path):
    target_dir, data = data_dir
    flags = ["--phase", "train", "--steps", "6", "--eval-every", "0", "--save-every", "2"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert distill(target_dir, straight, data, *flags) == 0
    assert distill(target_dir, split, data, *flags, "--stop-at", "3") == 0
    assert json.loads((split / "training" / "latest.json").read_text())["step"] == 3
    assert distill(target_dir, split, data, *flags, "--resume") == 0
    # The same batches and the same losses, step for step (the log has each step once). The
    # log rounds to 5 decimals, and the resumed weights may differ from the straight run's in
    # the last float bit (below), which can flip a rounded digit; another batch would move
    # the loss by far more than 1e-5.
    logs = [[json.loads(line) for line in (run / "train.jsonl").read_text().splitlines()]
            for run in (straight, split)]
    assert [r["step"] for r in logs[1]] == [1, 2, 3, 4, 5, 6]
    for a, b in zip(*logs):
        for key in ("block_ce", "selector_ce"):
            assert np.isclose(a[key], b[key], rtol=0, atol=2e-5), (a["step"], key)
    # ... and the same weights, up to float summation order inside MLX (about 1e-7).
    a = mx.load(str(straight / "training" / "step-0000006" / "params.safetensors"))
    b = mx.load(str(split / "training" / "step-0000006" / "params.safetensors"))
    assert a.keys() == b.keys()
    for name in a:
        assert mx.allclose(a[name], b[name], rtol=1e-5, atol=1e-6).item(), name



def test_resume_refuses_different_settings(data_dir, tmp_path, capsys):
    target_dir, data = data_dir
    out = tmp_path / "run"
    assert distill(target_dir, out, data, "--phase", "train", "--steps", "2", "--eval-every", "0") == 0
    capsys.readouterr()
    assert distill(target_dir, out, data, "--phase", "train", "--steps", "2", "--layers", "3") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--layers" in err and "Traceback" not in err


def test_init_from_starts_at_the_checkpoint_and_refuses_another_shape(data_dir, trained, tmp_path,
                                                                     capsys):
    target_dir, data = data_dir
    first, second = trained, tmp_path / "second"
    flags = ["--phase", "train", "--eval-every", "0", "--save-every", "100"]
    # The shape comes from the checkpoint: no architecture flags needed.
    assert main(["distill", str(target_dir), "--out", str(second), "--data", str(data),
                 "--init-from", str(first), *flags, "--steps", "1", "--batch", "3",
                 "--seq-len", "96", "--anchors", "6", "--no-progress"]) == 0
    assert _starts_where_it_left_off(first, second)
    config = load_drafter(second).config
    assert config.num_hidden_layers == 2 and config.block_size == 8
    record = config.extra["dflash_tui_training"]
    assert record["train"]["init_from"] == str(first.resolve())
    # The lineage travels: the new record nests the one the start was trained with.
    assert record["started_from"] == load_drafter(first).config.extra["dflash_tui_training"]
    # Its eval needs no --init-from (scripts/train_sample_drafter.sh's eval names none).
    assert main(["distill", str(target_dir), "--out", str(second), "--data", str(data), "--phase", "eval",
                 "--session-tokens", "0", "--eval-blocks", "24", "--no-progress"]) == 0
    assert (second / "eval_final.json").is_file()
    capsys.readouterr()
    code = distill(target_dir, tmp_path / "third", data, *flags, "--steps", "1",
                   "--init-from", str(first), "--layers", "3")
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--layers 2" in err and "Traceback" not in err


def test_init_from_a_quantized_drafter_trains_from_its_dequantized_values(data_dir, trained, tmp_path):
    """A sample drafter shipped in 8 bits is the next stage's start: its packed weights are
    read back as the float values they hold, and the lineage says so."""
    import shutil

    from dflash_tui_distill.init_from import start_weights
    from mlx.utils import tree_flatten

    target_dir, data = data_dir
    first, packed, second = tmp_path / "first", tmp_path / "q8", tmp_path / "second"
    shutil.copytree(trained, first)  # its eval below writes beside it
    flags = ["--phase", "train", "--eval-every", "0", "--save-every", "100"]
    assert main(["quantize", str(first), "--bits", "8", "--group-size", "32", "--out", str(packed)]) == 0
    stored = load_drafter(packed)
    weights = start_weights(packed, {})
    down = stored.layers[0].mlp.down_proj
    expected = mx.dequantize(down.weight, down.scales, down.biases, down.group_size, down.bits)
    assert np.array_equal(np.array(weights["layers"][0]["mlp"]["down_proj"]["weight"]), np.array(expected))
    assert not any(name.endswith(".scales") for name, _ in tree_flatten(weights))
    assert main(["distill", str(target_dir), "--out", str(second), "--data", str(data),
                 "--init-from", str(packed), *flags, "--steps", "1", "--batch", "3",
                 "--seq-len", "96", "--anchors", "6", "--no-progress"]) == 0
    assert _starts_where_it_left_off(first, second)
    record = load_drafter(second).config.extra["dflash_tui_training"]
    assert record["started_from"]["dequantized_from"]["bits"] == 8
    assert load_drafter(second).config.quantization is None  # it trained and saved float
    # What scripts/device_train_sample.sh runs to judge a drafter that ships quantized, and
    # the same eval of the float drafter it was packed from: 8 bits in groups of 32 move each
    # weight by at most 1/510 of its group's range, so the copy must be judged as the float
    # one is (a cast to the packed uint32 dtype once judged a 2.7 drafter at 0.2).
    eval_flags = ["--phase", "eval", "--eval-blocks", "24", "--no-progress"]
    assert main(["distill", str(target_dir), "--out", str(packed), "--data", str(data), *eval_flags,
                 "--session-tokens", "8"]) == 0
    assert main(["distill", str(target_dir), "--out", str(first), "--data", str(data), *eval_flags,
                 "--session-tokens", "0", "--eval-gammas", "7"]) == 0  # the float one, briefly
    float_eval, result = (json.loads((run / "eval_final.json").read_text()) for run in (first, packed))
    assert float_eval["decode"]["gamma"]["7"]["accepted"] > 0.5  # else the comparison proves nothing
    assert result["blocks"] == float_eval["blocks"] > 0
    for part in (lambda r: r["gamma"]["7"], lambda r: r["decode"]["gamma"]["7"]):  # blocks; rounds
        want = part(float_eval)["accepted"]
        assert abs(part(result)["accepted"] - want) <= 0.1 * want
    flips = np.array(result["gamma"]["7"]["argmax_acc"]) - float_eval["gamma"]["7"]["argmax_acc"]
    assert np.abs(flips).max() * result["blocks"] <= 2  # two blocks' argmax at most
    assert result["sessions"] and all(s["matches_greedy"] for s in result["sessions"])
    assert json.loads((packed / "config.json").read_text())["quantization"]["bits"] == 8  # still packed


def test_grow_adds_layers_that_change_nothing_and_keeps_the_strongest_codebook_components(
        data_dir, tmp_path, capsys):
    from dflash_tui_distill.architecture import build_config
    from dflash_tui_distill.init_from import shape_settings, start_weights
    from dflash_tui_distill.objective import draft_hidden, target_features, target_parts

    target_dir, data = data_dir
    first = tmp_path / "first"
    flags = ["--phase", "train", "--eval-every", "0", "--save-every", "100"]
    assert distill(target_dir, first, data, *flags, "--steps", "6", "--lr", "3e-3") == 0
    trained = load_drafter(first)
    target = load_target(target_dir)
    shape = {k: v for k, v in shape_settings(first).items() if k not in ("kind", "gamma")}
    deeper = build_config(target, TrainSettings(**{**shape, "gamma": 7, "layers": 4}),
                          trained.config.mask_token_id)
    from dflash_tui_distill.architecture import init_drafter
    grown = init_drafter(deeper, 5)
    grown.update(start_weights(first, {}, deeper))
    assert len(grown.layers) == 4
    # The two new layers compute exactly nothing: the grown drafter is the trained one.
    target.hook(trained.config.target_layer_ids)
    ids = mx.array(np.random.default_rng(2).integers(4, 300, size=(1, 30)).astype(np.int32))
    capture = target_features(target, ids)
    block = mx.array([[int(ids[0, 12])] + [trained.config.mask_token_id] * 7])
    args = (capture, mx.array([12]), block, mx.array([7]))
    before = draft_hidden(trained, target_parts(target, trained.config), *args)
    after = draft_hidden(grown, target_parts(target, deeper), *args)
    target.unhook()
    assert np.array_equal(np.array(before), np.array(after))
    # A smaller rank keeps whole components, the strongest by the product of their norms.
    selector = trained.candidate_selector
    narrower = build_config(target, TrainSettings(**{**shape, "gamma": 7, "rank": 3}),
                            trained.config.mask_token_id)
    kept = start_weights(first, {}, narrower)["candidate_selector"]
    norms = lambda a, axis: np.sqrt((np.array(a.astype(mx.float32)) ** 2).sum(axis))  # noqa: E731
    scale = (norms(selector.predecessor_codebook, 0) * norms(selector.successor_codebook, 0)
             * norms(selector.hidden_projection.weight, 1))
    best = np.sort(np.argsort(-scale)[:3])
    assert np.array_equal(np.array(kept["successor_codebook"]),
                          np.array(selector.successor_codebook)[:, best])
    assert np.array_equal(np.array(kept["hidden_projection"]["weight"]),
                          np.array(selector.hidden_projection.weight)[best])
    # End to end: the grown checkpoint trains, saves and loads with its new shape.
    second = tmp_path / "second"
    assert main(["distill", str(target_dir), "--out", str(second), "--data", str(data),
                 "--init-from", str(first), "--grow", "--layers", "3", "--rank", "4",
                 *flags, "--steps", "1", "--batch", "3", "--seq-len", "96", "--anchors", "6",
                 "--no-progress"]) == 0
    config = load_drafter(second).config
    assert config.num_hidden_layers == 3 and config.selector_rank == 4
    assert config.extra["dflash_tui_training"]["train"]["grow"] is True
    # Growing never shrinks, and --grow alone changes nothing else's rules.
    capsys.readouterr()
    for extra, named in ((["--grow", "--layers", "1"], "--layers 2"),
                         (["--grow", "--rank", "16"], "--rank 8"),
                         (["--grow", "--block", "5"], "--block 7")):
        code = main(["distill", str(target_dir), "--out", str(tmp_path / "refused"), "--data",
                     str(data), "--init-from", str(first), *flags, "--steps", "1", *extra])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and named in err and "Traceback" not in err
    code = distill(target_dir, tmp_path / "refused", data, *flags, "--steps", "1", "--grow")
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "--grow" in err and "--init-from" in err



def test_grow_reads_more_target_layers_starting_from_the_same_function(data_dir, tmp_path, capsys):
    """Stage 21's lever: the drafter reads target layers it did not. fc keeps each old
    layer's columns where that layer now sits and gives the new ones zero columns."""
    from dflash_tui_distill.architecture import build_config, init_drafter
    from dflash_tui_distill.init_from import shape_settings, start_weights
    from dflash_tui_distill.objective import draft_hidden, target_features, target_parts

    target_dir, data = data_dir
    first = tmp_path / "first"
    flags = ["--phase", "train", "--eval-every", "0", "--save-every", "100"]
    assert distill(target_dir, first, data, *flags, "--steps", "6", "--lr", "3e-3",
                   "--target-layer-ids", "0,2") == 0  # of the fixture's 4
    trained = load_drafter(first)
    target = load_target(target_dir)
    have = list(trained.config.target_layer_ids)
    new = [i for i in range(target.num_layers) if i not in have][:2]
    wanted = sorted(have + new)  # the new layers land between the old ones, not after them
    assert wanted[:len(have)] != have
    shape = {k: v for k, v in shape_settings(first).items() if k not in ("kind", "gamma")}
    wider = build_config(target, TrainSettings(**{**shape, "gamma": 7, "target_layer_ids": wanted}),
                         trained.config.mask_token_id)
    grown = init_drafter(wider, 5)
    grown.update(start_weights(first, {}, wider))
    hidden = trained.config.hidden_size
    assert grown.fc.weight.shape == (hidden, len(wanted) * hidden)
    ids = mx.array(np.random.default_rng(2).integers(4, 300, size=(1, 30)).astype(np.int32))
    block = mx.array([[int(ids[0, 12])] + [trained.config.mask_token_id] * 7])
    rest = (mx.array([12]), block, mx.array([7]))
    target.hook(trained.config.target_layer_ids)
    before = draft_hidden(trained, target_parts(target, trained.config), target_features(target, ids), *rest)
    target.hook(wider.target_layer_ids)
    after = draft_hidden(grown, target_parts(target, wider), target_features(target, ids), *rest)
    target.unhook()
    assert np.allclose(np.array(before), np.array(after), atol=1e-5), float(mx.abs(before - after).max())
    # End to end: it trains, saves and loads reading the wider set.
    second = tmp_path / "second"
    listed = ",".join(map(str, wanted))
    assert main(["distill", str(target_dir), "--out", str(second), "--data", str(data),
                 "--init-from", str(first), "--grow", "--target-layer-ids", listed,
                 *flags, "--steps", "1", "--batch", "3", "--seq-len", "96", "--anchors", "6",
                 "--no-progress"]) == 0
    assert list(load_drafter(second).config.target_layer_ids) == wanted
    # the record's count is the list's, not the flag's default (stage 21's said 5 beside 7 ids)
    record = json.loads((second / "config.json").read_text())["dflash_tui_training"]["train"]
    assert record["target_layers"] == len(wanted) == len(record["target_layer_ids"])
    # Growing never drops a layer the checkpoint reads, nor names one twice (its columns
    # would count twice: not the same function), and a count alone is not a set of ids.
    capsys.readouterr()
    dropped = ",".join(map(str, wanted[1:]))
    repeated = ",".join(map(str, [have[0], *wanted]))
    for extra, named in ((["--grow", "--target-layer-ids", dropped], "--target-layer-ids"),
                         (["--grow", "--target-layer-ids", repeated], "--target-layer-ids"),
                         (["--target-layer-ids", listed], "--grow"),
                         (["--target-layers", str(len(have) + 1)], "--target-layers")):
        code = main(["distill", str(target_dir), "--out", str(tmp_path / "refused"), "--data",
                     str(data), "--init-from", str(first), *flags, "--steps", "1", *extra])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and named in err and "Traceback" not in err, err

def test_kd_weight_trains_and_is_recorded(data_dir, tmp_path):
    target_dir, data = data_dir
    out = tmp_path / "kd"
    assert distill(target_dir, out, data, "--phase", "train", "--steps", "4", "--eval-every", "0",
                   "--save-every", "100", "--kd-weight", "0.5") == 0
    log = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    assert all(r["kd_kl"] > 0 and np.isfinite(r["loss"]) for r in log)
    assert load_drafter(out).config.extra["dflash_tui_training"]["train"]["kd_weight"] == 0.5


def test_init_from_a_drafter_for_another_target_is_refused_before_the_data_phase(
        make_pair, tmp_path, capsys):
    target_dir, _ = make_pair("llama")
    other = write_sample_shaped_drafter(tmp_path / "smollm2-drafter")  # SmolLM2's shape
    data = tmp_path / "data"
    code = main(["distill", str(target_dir), "--out", str(tmp_path / "out"), "--data", str(data),
                 *DATA_FLAGS, "--init-from", str(other), "--no-progress"])
    err = capsys.readouterr().err.strip()
    problems = [line for line in err.splitlines() if not line.startswith("data: target ")]
    assert code == 2 and len(problems) == 1 and "Traceback" not in err
    assert str(other / "config.json") in problems[0] and "hidden_size 576" in problems[0]
    assert not list(data.glob("shard-*")), "no continuation is generated for a run that cannot train"


def test_init_from_a_target_folder_is_refused_naming_the_flag(make_pair, tmp_path, capsys):
    target_dir, _ = make_pair("llama")
    code = main(["distill", str(target_dir), "--out", str(tmp_path / "out"), "--data", str(tmp_path / "data"),
                 *DATA_FLAGS, "--init-from", str(target_dir), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"dflash-tui: error: --init-from {target_dir}: ") and "target model" in err
    assert not (tmp_path / "out").exists()


def test_default_eval_gammas_stay_within_a_short_block(data_dir, tmp_path):
    target_dir, data = data_dir
    out = tmp_path / "short"
    flags = list(TRAIN_FLAGS)
    flags[flags.index("--block") + 1] = "3"
    assert main(["distill", str(target_dir), "--out", str(out), "--data", str(data), *DATA_FLAGS,
                 *flags, "--phase", "train", "--steps", "2", "--eval-every", "2"]) == 0
    evals = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert [sorted(e["gamma"], key=int) for e in evals] == [["2", "3"]]


@pytest.mark.parametrize("flags, expected", [
    (["--steps", "0"], "--steps 0"),
    (["--mix", "poetry=1"], "--mix"),
    (["--block", "0"], "--block 0"),
    (["--eval-gammas", "two"], "--eval-gammas"),
    (["--eval-gammas", "0,4"], "--eval-gammas 0,4: expected positive proposal counts"),
    (["--block", "7", "--eval-gammas", "4,8"], "--eval-gammas 4,8: 8 proposals is more than the drafter's block of 7"),
    (["--short-block-fraction", "1.5"], "--short-block-fraction"),
    (["--kd-weight", "1.5"], "--kd-weight 1.5: expected 0..1"),
    (["--phase", "nonsense"], "--phase"),
    (["--time-limit", "-5"], "--time-limit"),
    (["--resume"], "no saved training state"),
    (["--phase", "eval"], "no drafter checkpoint"),
])
def test_bad_flags_are_one_line_errors(data_dir, tmp_path, capsys, flags, expected):
    target_dir, data = data_dir
    code = main(["distill", str(target_dir), "--out", str(tmp_path / "o"), "--data", str(data), *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and expected in err and "Traceback" not in err


def test_missing_target_and_missing_data_are_one_line_errors(tmp_path, capsys):
    assert main(["distill", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "no such target" in capsys.readouterr().err


def test_train_without_data_is_a_one_line_error(make_pair, tmp_path, capsys):
    target_dir, _ = make_pair("llama")
    assert main(["distill", str(target_dir), "--out", str(tmp_path / "o"), "--phase", "train"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "run --phase data first" in err


def test_data_that_contains_a_held_out_prompt_is_refused(data_dir, tmp_path, capsys):
    target_dir, data = data_dir
    prompts = [json.loads(line) for line in (data / "prompts.jsonl").read_text().splitlines()]
    first = next(p["text"] for p in prompts if p["split"] == "train")
    held = tmp_path / "held" / "math"
    held.mkdir(parents=True)
    (held / "p.txt").write_text(first)
    code = main(["distill", str(target_dir), "--out", str(tmp_path / "o"), "--data", str(data),
                 "--phase", "data", "--holdout", str(held.parent)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "test prompt" in err and len(err.splitlines()) == 1


def test_default_sample_drafter_fits_in_40_mb():
    s = TrainSettings()
    config = DraftConfig(  # SmolLM2-135M's shape with distill's defaults
        kind=DFLASH2, hidden_size=576, num_hidden_layers=s.layers, num_attention_heads=9,
        num_key_value_heads=3, head_dim=64, intermediate_size=1536, vocab_size=49152,
        rms_norm_eps=1e-5, rope_theta=100000.0, max_position_embeddings=8192,
        num_target_layers=30, block_size=s.block_size, target_layer_ids=(1, 8, 14, 20, 27),
        mask_token_id=16, layer_types=("full_attention",) * s.layers, conv_kernel_size=s.conv_kernel,
        conv_group_size=16, selector_rank=s.rank, selector_top_k=s.top_k)
    values = sum(int(np.prod(shape)) for shape in expected_shapes(config).values())
    assert values * 2 < 40e6


def test_a_dflash_v1_drafter_trains_and_loads(data_dir, tmp_path):
    target_dir, data = data_dir
    out = tmp_path / "v1"
    assert distill(target_dir, out, data, "--kind", "dflash", "--phase", "train", "--steps", "2",
                   "--eval-every", "2") == 0
    drafter = load_drafter(out)
    assert not drafter.config.is_dflash2 and "candidate_selector" not in drafter
    curve = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert curve[-1]["step"] == 2 and "7" in curve[-1]["gamma"]


@pytest.mark.parametrize("script, variable, value, expected", [
    ("train_sample_drafter.sh", "STAGE", "23", "STAGE must be 1 to 22 (got 23)"),
    ("train_sample_drafter.sh", "STAGE", "0", "STAGE must be 1 to 22 (got 0)"),
    ("build_prompt_corpus.sh", "CORPUS_STAGE", "7", "CORPUS_STAGE must be 5, 6, 11, 12 or 13 (got 7)"),
])
def test_the_recipe_scripts_refuse_a_stage_they_do_not_have_in_one_line(script, variable, value,
                                                                        expected, tmp_path):
    path = Path(__file__).resolve().parents[1] / "scripts" / script
    env = {**os.environ, variable: value, "RUN_ROOT": str(tmp_path / "runs"),
           "CORPUS_DIR": str(tmp_path / "corpus"), "WORK": str(tmp_path / "work")}
    done = subprocess.run(["bash", str(path), "data"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and done.stderr.strip() == expected
    assert not any(tmp_path.iterdir()), "a refused stage writes nothing"


@pytest.mark.parametrize("eval_gammas", ["2,4,7,15", ""])
def test_the_recipe_passes_eval_gammas_to_distill_only_when_set(eval_gammas, tmp_path):
    """EVAL_GAMMAS adds the blocks the evals measure (stage 22's default session opens at
    15, which distill's default 2,4,7 leaves out); unset, distill keeps its default. DFLASH
    is the command the script runs: `echo` prints the arguments it assembled."""
    path = Path(__file__).resolve().parents[1] / "scripts" / "train_sample_drafter.sh"
    env = {**os.environ, "STAGE": "22", "DFLASH": "echo", "EVAL_GAMMAS": eval_gammas,
           "RUN_ROOT": str(tmp_path / "runs"), "TARGET": str(tmp_path / "model.gguf")}
    done = subprocess.run(["bash", str(path), "eval"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    assert words[0] == "distill" and "--phase" in words
    if eval_gammas:
        assert words[words.index("--eval-gammas") + 1] == eval_gammas
    else:
        assert "--eval-gammas" not in words


def test_the_device_script_refuses_a_call_without_out_before_it_copies_anything(tmp_path):
    """OUT names the folder whose files come back; a call without it used to copy the
    checkout and run, then fail when packing (status 1, nothing returned)."""
    path = Path(__file__).resolve().parents[1] / "scripts" / "device_train_sample.sh"
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    env["TARGET"] = str(tmp_path / "model.gguf")
    done = subprocess.run(["bash", str(path), "train", "10"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == ("OUT: set it to the folder whose files come back "
                                   "(OUT=/tmp/noout for none)")
    assert not any(tmp_path.iterdir()), "a refused call writes nothing"
