"""Bad input: one line on stderr naming the file/tensor/value and what was expected, exit
code 2, no traceback. Each case breaks a real fixture checkpoint in one way."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import mlx.core as mx
import numpy as np
import pytest

from fixtures import (drafter_tensors, save_numpy_safetensors, shard_safetensors, write_drafter,
                      write_tokenizer, zlab_config)

from dflash_tui.cli import main


def _run(capsys, *argv):
    code = main(["probe", *argv, "--max-tokens", "2"])
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("dflash-tui: error:")]
    return code, errors


def _refused(capsys, *argv, needles):
    code, errors = _run(capsys, *argv)
    assert code == 2
    assert len(errors) == 1, errors
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def _config(path):
    return json.loads((path / "config.json").read_text())


def _rewrite_drafter(draft_dir, config, tensors=None):
    shutil.rmtree(draft_dir)
    write_drafter(draft_dir, config, tensors=tensors)


def test_missing_model_dir(capsys, tmp_path):
    _refused(capsys, str(tmp_path / "nope"), "--prompt", "x", needles=["nope", "no such file"])


def test_target_without_config(capsys, breakable_pair):
    target, _ = breakable_pair
    (target / "config.json").unlink()
    _refused(capsys, str(target), "--prompt", "x", needles=[str(target / "config.json"), "missing"])


def test_target_config_not_json(capsys, breakable_pair):
    target, _ = breakable_pair
    (target / "config.json").write_text("{not json")
    _refused(capsys, str(target), "--prompt", "x", needles=["config.json", "unreadable"])


def test_target_without_weights(capsys, breakable_pair):
    target, _ = breakable_pair
    (target / "model.safetensors").unlink()
    _refused(capsys, str(target), "--prompt", "x", needles=[str(target), "safetensors"])


def test_target_weights_corrupt(capsys, breakable_pair):
    target, _ = breakable_pair
    (target / "model.safetensors").write_bytes(b"\x00\x01garbage")
    _refused(capsys, str(target), "--prompt", "x", needles=["model.safetensors"])


def test_target_weights_cut_short_name_the_file(capsys, breakable_pair):
    """A download cut short: the header is whole, the data is not. mlx-lm's error named no
    file (`TARGET: mlx-lm cannot build this model ([load_safetensors] Tensor ...)`)."""
    target, _ = breakable_pair
    weights = target / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    _refused(capsys, str(target), "--prompt", "x",
             needles=[f"{weights}: unreadable safetensors (", "exceeding the size of the file"])


def test_drafter_without_config(capsys, breakable_pair):
    target, draft = breakable_pair
    (draft / "config.json").unlink()
    _refused(capsys, str(target), "--prompt", "x", needles=[str(draft / "config.json"), "missing"])


def test_drafter_unknown_architecture(capsys, breakable_pair):
    target, draft = breakable_pair
    config = _config(draft)
    config["architectures"] = ["LlamaForCausalLM"]
    (draft / "config.json").write_text(json.dumps(config))
    _refused(capsys, str(target), "--prompt", "x", needles=["architectures", "DFlash2DraftModel"])


def test_drafter_without_weights(capsys, breakable_pair):
    target, draft = breakable_pair
    (draft / "model.safetensors").unlink()
    _refused(capsys, str(target), "--prompt", "x", needles=[str(draft), "safetensors"])


def test_drafter_tensor_missing(capsys, breakable_pair):
    target, draft = breakable_pair
    config = _config(draft)
    tensors = drafter_tensors(config)
    del tensors["layers.1.mlp_conv.base_kernel"]
    _rewrite_drafter(draft, config, tensors)
    _refused(capsys, str(target), "--prompt", "x",
             needles=["'layers.1.mlp_conv.base_kernel'", "missing", "[2, 4, 64]"])


def test_drafter_tensor_wrong_shape(capsys, breakable_pair):
    target, draft = breakable_pair
    config = _config(draft)
    tensors = drafter_tensors(config)
    tensors["layers.0.self_attn.q_proj.weight"] = np.zeros((32, 64), np.float32)
    _rewrite_drafter(draft, config, tensors)
    _refused(capsys, str(target), "--prompt", "x",
             needles=["'layers.0.self_attn.q_proj.weight'", "[32, 64]", "expected [64, 64]"])


def test_drafter_vocab_mismatch(capsys, breakable_pair):
    target, draft = breakable_pair
    config = _config(draft)
    config["vocab_size"] = 999
    _rewrite_drafter(draft, config)
    _refused(capsys, str(target), "--prompt", "x", needles=["vocab_size 999", "vocabulary of"])


def test_drafter_hidden_mismatch(capsys, breakable_pair):
    target, draft = breakable_pair
    config = _config(draft)
    config.update(hidden_size=32)
    _rewrite_drafter(draft, config)
    _refused(capsys, str(target), "--prompt", "x", needles=["hidden_size 32", "hidden size 64"])


def test_mask_token_out_of_range(capsys, breakable_pair):
    target, draft = breakable_pair
    config = _config(draft)
    config["dflash_config"]["mask_token_id"] = 10_000
    (draft / "config.json").write_text(json.dumps(config))
    _refused(capsys, str(target), "--prompt", "x", needles=["mask_token_id 10000", "out of range"])


def test_target_layer_out_of_range(capsys, breakable_pair):
    target, draft = breakable_pair
    config = _config(draft)
    config["dflash_config"]["target_layer_ids"] = [1, 7]
    _rewrite_drafter(draft, config)
    _refused(capsys, str(target), "--prompt", "x", needles=["target_layer_ids[1] = 7", "4 layers", "0..3"])


def test_a_drafter_folder_given_on_the_line_is_named_by_its_option(capsys, breakable_pair, tmp_path):
    """The session's refusal of a drafter that does not fit the target started with the
    folder (`DIR: target_layer_ids[1] = 7 ...`), where every other refusal of a `--draft DIR`
    (the CLI's check, the loader's) starts `--draft DIR: ...`, and of a `--compare DIR`
    `--compare DIR: ...`. Now the same, whichever option named the folder."""
    target, draft = breakable_pair
    config = _config(draft)
    config["dflash_config"]["target_layer_ids"] = [1, 7]
    other = write_drafter(tmp_path / "other", config, tensors=drafter_tensors(config))
    problem = "target_layer_ids[1] = 7 is out of range for a target with 4 layers (expected 0..3)"
    error = _refused(capsys, str(target), "--prompt", "x", "--draft", str(other), needles=[problem])
    assert error == f"dflash-tui: error: --draft {other}: {problem}"
    error = _refused(capsys, str(target), "--prompt", "x", "--compare", str(other), needles=[problem])
    assert error == f"dflash-tui: error: --compare {other}: {problem}"
    config["hidden_size"] = 32  # the other fit checks go the same way
    hidden = write_drafter(tmp_path / "hidden", config, tensors=drafter_tensors(config))
    error = _refused(capsys, str(target), "--prompt", "x", "--draft", str(hidden),
                     needles=["hidden_size 32"])
    assert error.startswith(f"dflash-tui: error: --draft {hidden}: drafter hidden_size 32 "), error


def test_a_drafter_built_for_a_deeper_target_runs_with_a_note(capsys, breakable_pair):
    """num_target_layers past the target's layer count is a note, not a refusal: the ids it
    reads (target_layer_ids, all inside this target) name hidden states that exist, and Z
    Lab's reference never reads num_target_layers (docs/HARDENING.md says why)."""
    target, draft = breakable_pair
    config = _config(draft)
    config["num_target_layers"] = 48
    _rewrite_drafter(draft, config)
    code = main(["probe", str(target), "--prompt", "x", "--max-tokens", "2"])
    err = capsys.readouterr().err
    assert code == 0 and "error" not in err
    assert "note: drafter was built for a 48-layer target; this one has 4\n" in err


def test_layer_offset_out_of_range(capsys, breakable_pair):
    target, _ = breakable_pair
    _refused(capsys, str(target), "--prompt", "x", "--layer-offset", "-2",
             needles=["target_layer_ids[0] = 1 + layer offset -2", "out of range"])


def test_block_larger_than_sliding_window(capsys, breakable_pair, make_pair):
    target, draft = breakable_pair
    config = _config(draft)
    config["layer_types"][0] = "sliding_attention"
    config["sliding_window"] = 8
    (draft / "config.json").write_text(json.dumps(config))
    _refused(capsys, str(target), "--prompt", "x", "--block", "9", needles=["--block 9", "sliding_window 8"])


def test_block_zero(capsys, breakable_pair):
    target, _ = breakable_pair
    _refused(capsys, str(target), "--prompt", "x", "--block", "0", needles=["--block 0", "at least 1"])


def test_target_with_vision_tower(capsys, breakable_pair):
    target, _ = breakable_pair
    weights = mx.load(str(target / "model.safetensors"))
    weights["vision_tower.patch_embed.weight"] = mx.zeros((4, 4))
    mx.save_safetensors(str(target / "model.safetensors"), weights)
    _refused(capsys, str(target), "--prompt", "x", needles=["vision tower", "vision_tower.patch_embed.weight"])


def test_target_the_capture_cannot_hook(capsys, tmp_path):
    from mlx.utils import tree_flatten
    from mlx_lm.models import gpt2

    target = tmp_path / "gpt2"
    target.mkdir()
    vocab = write_tokenizer(target)
    config = {"model_type": "gpt2", "n_ctx": 64, "n_embd": 64, "n_head": 4, "n_layer": 2,
              "n_positions": 64, "layer_norm_epsilon": 1e-5, "vocab_size": vocab}
    model = gpt2.Model(gpt2.ModelArgs.from_dict(config))
    mx.save_safetensors(str(target / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (target / "config.json").write_text(json.dumps(config))
    draft_config = zlab_config("DFlash2DraftModel", vocab=vocab, target_layers=2, layer_ids=[0],
                               mask_token_id=3)
    write_drafter(target / "draft", draft_config)
    _refused(capsys, str(target), "--prompt", "x", needles=["capture cannot hook", "gpt2", "embed_tokens"])


def test_prompt_file_missing(capsys, breakable_pair, tmp_path):
    target, _ = breakable_pair
    _refused(capsys, str(target), "--prompt-file", str(tmp_path / "p.txt"),
             needles=["p.txt", "no such prompt file"])


def test_bad_flag_value(capsys, breakable_pair):
    target, _ = breakable_pair
    _refused(capsys, str(target), "--prompt", "x", "--dtype", "float64", needles=["--dtype", "float64"])


def test_refusal_in_a_real_process_has_no_traceback(breakable_pair):
    target, draft = breakable_pair
    config = _config(draft)
    config["dflash_config"]["mask_token_id"] = -5
    (draft / "config.json").write_text(json.dumps(config))
    proc = subprocess.run([sys.executable, "-m", "dflash_tui", "probe", str(target), "--prompt", "x"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    errors = [l for l in proc.stderr.splitlines() if l.startswith("dflash-tui: error:")]
    assert len(errors) == 1 and "mask_token_id -5" in errors[0]


def test_target_tensor_missing_is_named(capsys, breakable_pair):
    target, _ = breakable_pair
    weights = dict(mx.load(str(target / "model.safetensors")))
    del weights["model.layers.0.mlp.down_proj.weight"]
    mx.save_safetensors(str(target / "model.safetensors"), weights)
    _refused(capsys, str(target), "--prompt", "x",
             needles=["'model.layers.0.mlp.down_proj.weight'", "missing from the weights"])


def test_target_config_with_more_layers_than_its_weights(capsys, breakable_pair):
    target, _ = breakable_pair
    config = _config(target)
    config["num_hidden_layers"] += 2
    (target / "config.json").write_text(json.dumps(config))
    line = _refused(capsys, str(target), "--prompt", "x", needles=["missing from the weights", "more)"])
    assert f"model.layers.{config['num_hidden_layers'] - 2}." in line  # the first layer it lacks


def test_target_config_field_of_the_wrong_type(capsys, breakable_pair):
    target, _ = breakable_pair
    config = _config(target)
    config["hidden_size"] = str(config["hidden_size"])
    (target / "config.json").write_text(json.dumps(config))
    _refused(capsys, str(target), "--prompt", "x",
             needles=[str(target / "config.json"), f"hidden_size = '{config['hidden_size']}'",
                      "expected a whole number"])


def test_drafter_rope_theta_not_above_zero(capsys, breakable_pair):
    target, draft = breakable_pair
    config = _config(draft)
    config["rope_theta"] = -1
    (draft / "config.json").write_text(json.dumps(config))
    _refused(capsys, str(target), "--prompt", "x", needles=["rope_theta = -1", "above 0"])


def test_drafter_selector_top_k_above_the_vocabulary(capsys, breakable_pair):
    target, draft = breakable_pair
    config = _config(draft)
    config["dflash_config"]["selector_top_k"] = 100000
    (draft / "config.json").write_text(json.dumps(config))
    _refused(capsys, str(target), "--prompt", "x",
             needles=["selector_top_k = 100000", f"vocab_size ({config['vocab_size']})"])


@pytest.mark.parametrize("model, tensor", [("target", "model.norm.weight"), ("drafter", "norm.weight")])
def test_a_float64_tensor_is_named_with_its_dtype(capsys, breakable_pair, model, tensor):
    """A checkpoint saved from numpy or torch in float64: mlx's `[safetensor] unsupported
    dtype F64` named the file, not the tensor."""
    folder = breakable_pair[0] if model == "target" else breakable_pair[1]
    weights = {n: np.array(w) for n, w in mx.load(str(folder / "model.safetensors")).items()}
    weights[tensor] = weights[tensor].astype(np.float64)
    save_numpy_safetensors(folder / "model.safetensors", weights)
    _refused(capsys, str(breakable_pair[0]), "--prompt", "x",
             needles=[f"{folder / 'model.safetensors'}: tensor {tensor!r} is stored as F64, a "
                      "dtype MLX cannot load; expected F32, F16 or BF16"])


@pytest.mark.parametrize("model, tensor", [("target", "model.norm.weight"),
                                           ("drafter", "norm.weight")])
def test_an_fp8_tensor_is_named_with_the_dtype_its_file_stores(capsys, breakable_pair, model,
                                                               tensor):
    """mx.load reads an F8_E4M3 tensor as its raw bytes, uint8, and the refusal said `is
    uint8`, a dtype no file held: it names the file's F8_E4M3."""
    folder = breakable_pair[0] if model == "target" else breakable_pair[1]
    weights = {n: np.array(w) for n, w in mx.load(str(folder / "model.safetensors")).items()}
    weights[tensor] = np.full(weights[tensor].shape, 0x38, np.uint8)  # 1.0 in E4M3
    save_numpy_safetensors(folder / "model.safetensors", weights, stored={tensor: "F8_E4M3"})
    line = _refused(capsys, str(breakable_pair[0]), "--prompt", "x",
                    needles=[f"{folder / 'model.safetensors'}: tensor {tensor!r} is stored as "
                             "F8_E4M3 (8-bit floats), which MLX loads as their raw bytes (uint8)"])
    assert "is uint8" not in line


def test_a_cut_short_file_holding_e8m0_scales_is_not_blamed_on_their_dtype(capsys,
                                                                           breakable_pair):
    """mx.load reads F8_E8M0 (MX formats' scales) as uint8, as it does F8_E4M3: a file cut
    short that holds one was refused as `stored as F8_E8M0, a dtype MLX cannot load`."""
    draft = breakable_pair[1]
    weights = {n: np.array(w) for n, w in mx.load(str(draft / "model.safetensors")).items()}
    weights["scales"] = np.full((4,), 127, np.uint8)
    path = save_numpy_safetensors(draft / "model.safetensors", weights,
                                  stored={"scales": "F8_E8M0"})
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    line = _refused(capsys, str(breakable_pair[0]), "--prompt", "x",
                    needles=[f"{path}: unreadable safetensors ("])
    assert "F8_E8M0" not in line


@pytest.mark.parametrize("model", ["target", "drafter"])
def test_a_shard_the_index_lists_but_the_folder_lacks_is_named(capsys, breakable_pair, model):
    """A sharded download that stopped: the line named the first tensor of the lost shard as
    missing (`tensor 'model.layers.0.mlp.up_proj.weight' is missing from the weights (and 16
    more)`), never the shard."""
    folder = breakable_pair[0] if model == "target" else breakable_pair[1]
    _, lost = shard_safetensors(folder)
    lost.unlink()
    _refused(capsys, str(breakable_pair[0]), "--prompt", "x",
             needles=[f"{folder / 'model.safetensors.index.json'}: lists shard {lost.name!r}",
                      f"which is not in {folder}"])


def test_a_sharded_target_loads(capsys, breakable_pair):
    target, _ = breakable_pair
    shard_safetensors(target)
    assert main(["probe", str(target), "--prompt", "x", "--max-tokens", "2"]) == 0


@pytest.mark.parametrize("model", ["target", "drafter"])
def test_an_index_left_beside_whole_weights_is_not_refused(capsys, breakable_pair, model):
    """Shards merged back into one model.safetensors, the old index kept: every tensor it
    lists is in the folder (the loaders read the files, not the index), so it loads as it
    did before the index was checked; only a tensor no file holds makes a shard missing."""
    folder = breakable_pair[0] if model == "target" else breakable_pair[1]
    whole = dict(mx.load(str(folder / "model.safetensors")))
    shard_safetensors(folder)
    for shard in folder.glob("model-*.safetensors"):
        shard.unlink()
    mx.save_safetensors(str(folder / "model.safetensors"), whole)
    assert main(["probe", str(breakable_pair[0]), "--prompt", "x", "--max-tokens", "2"]) == 0, \
        capsys.readouterr().err


def test_a_drafter_saved_under_a_prefix_says_what_its_file_holds(capsys, breakable_pair):
    """A training wrapper's state dict (`model.fc.weight`): the line said `fc.weight` is
    missing, as if the file lacked it."""
    target, draft = breakable_pair
    config = _config(draft)
    tensors = {f"model.{name}": value for name, value in drafter_tensors(config).items()}
    _rewrite_drafter(draft, config, tensors)
    _refused(capsys, str(target), "--prompt", "x",
             needles=["tensor 'fc.weight' is missing", "model.safetensors holds 'model.fc.weight'",
                      "without a prefix"])


def test_a_prompt_token_past_the_target_embedding_is_refused(capsys, breakable_pair):
    """A tokenizer that does not belong to the weights (its ids run past the embedding's
    rows) used to decode on whatever the embedding read past its end, exit 0."""
    target, draft = breakable_pair
    rows = 300
    config = _config(target)
    config["vocab_size"] = rows
    (target / "config.json").write_text(json.dumps(config))
    weights = dict(mx.load(str(target / "model.safetensors")))
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        weights[name] = weights[name][:rows]
    mx.save_safetensors(str(target / "model.safetensors"), weights)
    config = _config(draft)
    config["vocab_size"] = rows
    tensors = drafter_tensors(config)
    _rewrite_drafter(draft, config, tensors)
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(target / "tokenizer.json"))
    prompt = next(text for text in map(tokenizer.decode, ([i] for i in range(rows, 320)))
                  if max(tokenizer.encode(text).ids) >= rows)  # a word past the embedding
    _refused(capsys, str(target), "--prompt", prompt, "--raw",
             needles=["--prompt: the tokenizer of", "gives the prompt token id 3",
                      "the target's embedding has 300 rows (expected ids 0..299)"])
