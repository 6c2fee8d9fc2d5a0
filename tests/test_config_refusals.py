"""Config and metadata values that pass a type check but used to crash later (a RMSNorm
ValueError, a division by zero in the rope, a segmentation fault), refused where the config
is parsed: one line naming the file, the field and its value. Also chat templates that fail
to render and prompts that are not UTF-8."""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import pytest

from fixtures import write_llama_gguf
from one_line import refusal

from dflash_tui.cli import main

PROBE = ["--prompt", "Hi", "--raw", "--max-tokens", "2", "--no-probes"]


def _edit(config_path: Path, edit) -> None:
    config = json.loads(config_path.read_text())
    edit(config)
    config_path.write_text(json.dumps(config))


def _probe(target: Path, draft: Path, *extra: str) -> list:
    return ["probe", target, "--draft", draft, *PROBE, *extra]


# ---- 1. a drafter's config.json --------------------------------------------------------------


@pytest.mark.parametrize("eps", [-1.0, 0])
def test_drafter_rms_norm_eps_of_zero_or_below_is_refused(breakable_pair, capsys, eps):
    target, draft = breakable_pair
    _edit(draft / "config.json", lambda c: c.update(rms_norm_eps=eps))
    refusal(capsys, _probe(target, draft), str(draft / "config.json"),
            f"rms_norm_eps = {eps!r}", "expected a number above 0")


@pytest.mark.parametrize("field, value, expected", [
    ("final_logit_softcapping", 0, "expected a number above 0, or null for none"),
    ("final_logit_softcapping", -30.0, "expected a number above 0, or null for none"),
    ("output_multiplier", 0, "expected a finite number other than 0"),
    # every block row embedded as 0 (the anchor too): it used to run, accepting nothing
    ("input_embedding_scale", 0, "expected a finite number other than 0"),
])
def test_drafter_logit_scales_that_ruin_every_logit_are_refused(breakable_pair, capsys, field,
                                                               value, expected):
    target, draft = breakable_pair
    _edit(draft / "config.json", lambda c: c.setdefault("dflash_config", {}).update({field: value}))
    refusal(capsys, _probe(target, draft), str(draft / "config.json"),
            f"dflash_config.{field} = {float(value)}", expected)


@pytest.mark.parametrize("theta", ["abc", None])
def test_drafter_rope_theta_under_rope_parameters_must_be_a_number(breakable_pair, capsys, theta):
    target, draft = breakable_pair

    def edit(config):
        config.pop("rope_theta")
        config["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}

    _edit(draft / "config.json", edit)
    refusal(capsys, _probe(target, draft), str(draft / "config.json"),
            f"rope_parameters.rope_theta = {theta!r}", "expected a number above 0")


@pytest.mark.parametrize("scaling, needle", [
    ({"type": "yarn", "factor": "x"}, "rope_scaling.factor = 'x'"),
    ({"type": "linear", "factor": 0}, "rope_scaling.factor = 0"),
    ({"rope_type": "dynamic", "factor": -2}, "rope_scaling.factor = -2"),
    ({"rope_type": "linear"}, "rope_scaling has no factor"),
])
def test_drafter_rope_scaling_factor_must_be_a_number_above_zero(breakable_pair, capsys,
                                                                  scaling, needle):
    target, draft = breakable_pair
    _edit(draft / "config.json", lambda c: c.update(rope_scaling=scaling))
    refusal(capsys, _probe(target, draft), str(draft / "config.json"), needle, "above 0")


@pytest.mark.parametrize("key", ["rope_type", "type"])
def test_drafter_rope_type_mlx_lm_cannot_build_is_refused(breakable_pair, capsys, key):
    target, draft = breakable_pair
    _edit(draft / "config.json", lambda c: c.update(rope_scaling={key: "weird", "factor": 2.0}))
    refusal(capsys, _probe(target, draft), str(draft / "config.json"),
            f"rope_scaling.{key} = 'weird'", "expected one of default, linear")


def test_a_drafter_sliding_window_beyond_its_positions_runs(breakable_pair, capsys):
    """A window no context can fill is full attention (it ended in a segmentation fault
    when the cache was sized by the window)."""
    target, draft = breakable_pair
    _edit(draft / "config.json", lambda c: c.update(
        layer_types=["sliding_attention", "full_attention"], sliding_window=10**9))
    assert main([str(a) for a in _probe(target, draft)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("architectures", [["DFlash2DrafModel"], []])
def test_a_drafter_with_an_unknown_architecture_is_not_called_a_target(breakable_pair, capsys,
                                                                     architectures):
    """Its dflash_config says it is a drafter (Z Lab's set model_type "qwen3", the sample's
    "dflash"): a typo in architectures used to read `looks like a target model`, pointing
    at the wrong folder rather than the field."""
    target, draft = breakable_pair
    _edit(draft / "config.json", lambda c: c.update(architectures=architectures))
    line = refusal(capsys, _probe(target, draft), str(draft / "config.json"),
                   f"architectures = {architectures!r}", "expected")
    assert "looks like a target" not in line, line


def test_a_sliding_layer_allocates_what_it_holds_not_its_window():
    """A window as large as the drafter's positions may be is not allocated before the
    context fills it (a window of 10**9 rows ended in a segmentation fault)."""
    from dflash_tui.engine.context_cache import STEP, ContextCache

    cache = ContextCache(keep=10**6)
    rows = mx.ones((1, 1, 5, 1))
    cache.append(rows, rows)
    cache.with_block(rows, rows)
    assert cache.capacity <= 2 * STEP


# ---- 2. a target's config.json and weights ---------------------------------------------------


@pytest.mark.parametrize("scaling", [[1, 2], "linear"])
def test_target_rope_scaling_of_the_wrong_shape_is_refused(breakable_pair, capsys, scaling):
    target, draft = breakable_pair
    _edit(target / "config.json", lambda c: c.update(rope_scaling=scaling))
    refusal(capsys, _probe(target, draft), str(target / "config.json"),
            f"rope_scaling = {scaling!r}", "expected an object")


@pytest.mark.parametrize("scaling, needle", [
    ({"type": "linear", "factor": 0}, "rope_scaling.factor = 0; expected a number above 0"),
    ({"type": "dynamic", "factor": "2"}, "rope_scaling.factor = '2'; expected a number above 0"),
    ({"rope_type": "yarn"}, "rope_scaling has no factor"),
])
def test_target_rope_scaling_factor_must_be_a_number_above_zero(breakable_pair, capsys,
                                                                 scaling, needle):
    target, draft = breakable_pair
    _edit(target / "config.json", lambda c: c.update(rope_scaling=scaling))
    refusal(capsys, _probe(target, draft), str(target / "config.json"), needle)


def test_target_config_transformers_refuses_is_not_blamed_on_the_tokenizer(breakable_pair, capsys):
    """transformers checks config.json again while it loads the tokenizer: its complaint
    names config.json and the field, not the tokenizer files."""
    target, draft = breakable_pair
    _edit(target / "config.json", lambda c: c.update(
        rope_scaling={"rope_type": "llama3", "factor": 8.0}))
    line = refusal(capsys, _probe(target, draft), str(target / "config.json"),
                   "rope_parameters", "low_freq_factor")
    assert "tokenizer" not in line


def test_target_tie_word_embeddings_not_a_bool_names_the_field(breakable_pair, capsys):
    target, draft = breakable_pair
    _edit(target / "config.json", lambda c: c.update(tie_word_embeddings="no"))
    line = refusal(capsys, _probe(target, draft), str(target / "config.json"),
                   "tie_word_embeddings = 'no'", "true or false")
    assert "tokenizer" not in line


@pytest.mark.parametrize("dtype", [mx.int32, mx.bool_])
def test_target_integer_or_bool_weights_are_refused(breakable_pair, capsys, dtype):
    target, draft = breakable_pair
    weights = target / "model.safetensors"
    tensors = mx.load(str(weights))
    mx.save_safetensors(str(weights), {k: v.astype(dtype) for k, v in tensors.items()})
    name = str(dtype).removeprefix("mlx.core.")
    refusal(capsys, _probe(target, draft), str(weights),
            f"tensor 'model.embed_tokens.weight' is {name}", "expected floating-point weights")


# ---- 3. a GGUF target's metadata -------------------------------------------------------------


@pytest.fixture(scope="module")
def llama(make_pair):
    return make_pair("llama", "DFlash2DraftModel")


def test_the_fixture_gguf_runs(llama, tmp_path, capsys):
    """The GGUF the refusals below break, unbroken: it loads and decodes."""
    target, draft = llama
    gguf = write_llama_gguf(tmp_path / "ok.gguf", target)
    from dflash_tui.cli import main

    assert main([str(a) for a in _probe(gguf, draft)]) == 0, capsys.readouterr().err


def _u32(n):
    return mx.array(n, dtype=mx.uint32)


@pytest.mark.parametrize("metadata, needle", [
    ({"llama.attention.head_count": _u32(0)}, "llama.attention.head_count = 0; expected a whole"),
    ({"llama.attention.head_count": "four"}, "llama.attention.head_count = 'four'; expected"),
    ({"llama.attention.layer_norm_rms_epsilon": mx.array(-1.0)},
     "llama.attention.layer_norm_rms_epsilon = -1.0; expected a number above 0"),
    ({"llama.attention.layer_norm_rms_epsilon": mx.array(0.0)},
     "llama.attention.layer_norm_rms_epsilon = 0.0; expected a number above 0"),
    ({"llama.context_length": _u32(0)}, "llama.context_length = 0; expected a whole number"),
    ({"tokenizer.ggml.tokens": mx.array([1, 2, 3])},
     "tokenizer.ggml.tokens = array([1, 2, 3], dtype=int32); expected a non-empty list of strings"),
    ({"tokenizer.ggml.merges": ["abc"]},
     "tokenizer.ggml.merges[0] = 'abc'; expected two tokens joined by a space"),
])
def test_gguf_metadata_values_are_checked(llama, tmp_path, capsys, metadata, needle):
    target, draft = llama
    gguf = write_llama_gguf(tmp_path / "t.gguf", target, metadata)
    refusal(capsys, _probe(gguf, draft), str(gguf), needle)


def test_gguf_without_tokens_names_the_key(llama, tmp_path, capsys):
    target, draft = llama
    gguf = write_llama_gguf(tmp_path / "t.gguf", target, drop=("tokenizer.ggml.tokens",))
    refusal(capsys, _probe(gguf, draft), str(gguf), "lacks tokenizer.ggml.tokens")


@pytest.mark.parametrize("beyond", [0, 1000, None])
def test_an_eos_id_beyond_the_gguf_vocabulary_is_refused(llama, tmp_path, capsys, beyond):
    """It used to be dropped without a word: no decode stopped at EOS (and -1 named the
    vocabulary's last token)."""
    target, draft = llama
    vocab = json.loads((target / "config.json").read_text())["vocab_size"]
    eos = mx.array(-1, dtype=mx.int32) if beyond is None else _u32(vocab + beyond)
    gguf = write_llama_gguf(tmp_path / "t.gguf", target, {"tokenizer.ggml.eos_token_id": eos})
    refusal(capsys, _probe(gguf, draft), str(gguf),
            f"GGUF metadata tokenizer.ggml.eos_token_id = {eos.item()}; expected a token id from "
            f"0 to {vocab - 1}: the vocabulary (tokenizer.ggml.tokens) holds {vocab} tokens")


@pytest.mark.parametrize("extra", [1, -1])
def test_gguf_token_types_that_do_not_match_the_vocabulary_are_refused(llama, tmp_path, capsys,
                                                                      extra):
    """One more type than tokens was an IndexError with a traceback; one fewer left a token
    without a type."""
    target, draft = llama
    vocab = json.loads((target / "config.json").read_text())["vocab_size"]
    types = mx.ones((vocab + extra,), dtype=mx.int32)
    gguf = write_llama_gguf(tmp_path / "t.gguf", target, {"tokenizer.ggml.token_type": types})
    refusal(capsys, _probe(gguf, draft), str(gguf),
            f"tokenizer.ggml.token_type holds {vocab + extra} types; expected one per token "
            f"of tokenizer.ggml.tokens ({vocab})")


def test_a_gguf_vocabulary_is_checked_once_per_load(llama, tmp_path, monkeypatch):
    """The model's config and the tokenizer are built from the one checked vocabulary (each
    checked it again: 49k strings on the sample)."""
    from dflash_tui.engine import gguf, load_target

    target, _ = llama
    path = write_llama_gguf(tmp_path / "t.gguf", target)
    checks = []
    real = gguf.gguf_tokens
    monkeypatch.setattr(gguf, "gguf_tokens", lambda *args: checks.append(args) or real(*args))
    load_target(path)
    assert len(checks) == 1


def test_gguf_missing_layers_names_the_first_tensor_and_counts_the_rest(llama, tmp_path, capsys):
    target, draft = llama
    gguf = write_llama_gguf(tmp_path / "t.gguf", target, {"llama.block_count": _u32(6)})
    line = refusal(capsys, _probe(gguf, draft), str(gguf),
                   "tensor 'blk.4.attn_norm.weight' is missing", "(and 17 more)",
                   "llama.block_count")
    assert "blk.5" not in line and "model.layers" not in line


def test_gguf_integer_tensor_is_refused(llama, tmp_path, capsys):
    from fixtures import gguf_of_llama_target

    target, draft = llama
    tensors, _ = gguf_of_llama_target(target)
    tensors["token_embd.weight"] = tensors["token_embd.weight"].astype(mx.int32)
    gguf = write_llama_gguf(tmp_path / "t.gguf", target, tensors=tensors)
    refusal(capsys, _probe(gguf, draft), str(gguf), "tensor 'token_embd.weight' is int32")


@pytest.mark.parametrize("ggml_type, name", [(13, "Q5_K"), (20, "IQ4_NL"), (28, "F64"),
                                              (39, "MXFP4")])
def test_a_gguf_tensor_of_a_type_mlx_cannot_read_is_named(llama, tmp_path, capsys, ggml_type,
                                                          name):
    """A Q5_K_M or IQ4 file (common llama.cpp quantizations) failed as `cannot read as GGUF
    ([load_gguf] gguf_tensor_to_f16 failed)`, naming neither the tensor nor its type; a type
    past 30 (MXFP4) ended mlx's tensor list early, so the line blamed another tensor as
    missing (`tensor 'token_embd.weight' is missing from the GGUF (and 34 more)`)."""
    from fixtures import set_gguf_tensor_type

    target, draft = llama
    gguf = set_gguf_tensor_type(write_llama_gguf(tmp_path / "t.gguf", target),
                                "blk.0.ffn_down.weight", ggml_type)
    refusal(capsys, _probe(gguf, draft), f"{gguf}: tensor 'blk.0.ffn_down.weight' is {name}, "
            "a type MLX cannot read; expected F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q2_K, Q4_K or Q6_K")


def test_gguf_tensors_mlx_cannot_read_are_counted_with_their_types(llama, tmp_path, capsys):
    from fixtures import set_gguf_tensor_type

    target, draft = llama
    gguf = write_llama_gguf(tmp_path / "t.gguf", target)
    for tensor, ggml_type in (("blk.0.ffn_down.weight", 13), ("blk.1.ffn_down.weight", 13),
                              ("blk.1.attn_q.weight", 11)):
        set_gguf_tensor_type(gguf, tensor, ggml_type)
    refusal(capsys, _probe(gguf, draft), "(and 2 more, of Q3_K, Q5_K), a type MLX cannot read")


# ---- 4. a block on a target that declares no context -----------------------------------------


def test_a_block_on_a_target_without_a_context_is_bounded_by_the_drafter(breakable_pair):
    from dflash_tui.engine.errors import InputError
    from dflash_tui.engine.target import load_target

    target, _ = breakable_pair
    _edit(target / "config.json", lambda c: c.pop("max_position_embeddings"))
    loaded = load_target(target)
    loaded.check_block(4095, drafter_positions=4096)  # fits
    with pytest.raises(InputError, match="exceeds the drafter's max_position_embeddings of 4096"):
        loaded.check_block(100000, drafter_positions=4096)


@pytest.mark.parametrize("command", [["probe", "--rounds", "1"], ["bench", "--max-tokens", "2"]])
def test_a_huge_block_on_a_target_without_a_context_is_refused_not_a_crash(breakable_pair, capsys,
                                                                           command):
    target, draft = breakable_pair
    _edit(target / "config.json", lambda c: c.pop("max_position_embeddings"))
    argv = [command[0], target, "--draft", draft, "--prompt", "Hi", "--block", "100000", *command[1:]]
    if command[0] == "bench":
        argv = [command[0], target, "--draft", draft, "--blocks", "100000", *command[1:]]
    refusal(capsys, argv, "a block of 100000 proposals",
            "exceeds the drafter's max_position_embeddings of")


# ---- 5. chat templates and the prompt's bytes ------------------------------------------------


@pytest.mark.parametrize("template, needle", [
    ("{% for x in %}", "TemplateSyntaxError"),
    ('{{ raise_exception("no system turn") }}', "no system turn"),
    ("{{ messages[5].content }}", "UndefinedError"),
])
def test_a_chat_template_that_fails_names_its_file_and_raw(breakable_pair, capsys, template, needle):
    target, draft = breakable_pair
    (target / "chat_template.jinja").write_text(template)
    argv = ["probe", target, "--draft", draft, "--prompt", "Hi", "--max-tokens", "2"]
    refusal(capsys, argv, str(target / "chat_template.jinja"), "the chat template cannot render",
            needle, "--raw")


def test_a_template_in_tokenizer_config_is_named_there(breakable_pair, capsys):
    target, draft = breakable_pair
    (target / "chat_template.jinja").unlink()
    _edit(target / "tokenizer_config.json", lambda c: c.update(chat_template="{% for x in %}"))
    argv = ["probe", target, "--draft", draft, "--prompt", "Hi", "--max-tokens", "2"]
    refusal(capsys, argv, str(target / "tokenizer_config.json"), "cannot render", "--raw")


def test_a_gguf_template_is_named_by_its_key(llama, tmp_path, capsys):
    target, draft = llama
    gguf = write_llama_gguf(tmp_path / "t.gguf", target, {"tokenizer.chat_template": "{% for %}"})
    argv = ["probe", gguf, "--draft", draft, "--prompt", "Hi", "--max-tokens", "2"]
    refusal(capsys, argv, f"{gguf} (tokenizer.chat_template)", "cannot render", "--raw")


def test_an_empty_chat_template_says_it_renders_nothing(breakable_pair, capsys):
    target, draft = breakable_pair
    (target / "chat_template.jinja").write_text("")
    argv = ["probe", target, "--draft", draft, "--prompt", "Hi", "--max-tokens", "2"]
    line = refusal(capsys, argv, str(target / "chat_template.jinja"), "renders nothing", "--raw")
    assert "prompt is empty" not in line


@pytest.mark.parametrize("chat", ["--chat", "--raw"])
def test_a_prompt_that_is_not_utf8_is_refused(make_pair, capsys, chat):
    """`--prompt $'ab\\xffcd'`: Python hands the byte over as a lone surrogate."""
    target, draft = make_pair("llama", "DFlash2DraftModel")
    argv = ["probe", target, "--draft", draft, "--prompt", b"ab\xffcd".decode("utf-8", "surrogateescape"),
            chat, "--max-tokens", "2"]
    refusal(capsys, argv, "--prompt: not valid UTF-8 (byte 0xff after 'ab')")


@pytest.mark.parametrize("scaling", [
    None,
    {"rope_type": "default"},
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 8192},
    {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 1.0,
     "original_max_position_embeddings": 8192},  # low == high, as Llama 4 ships it
    {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
     "beta_fast": 32, "beta_slow": 1, "mscale": 1, "mscale_all_dim": 0},
])
def test_real_rope_scalings_still_load(breakable_pair, capsys, scaling):
    """The checks refuse what would crash, never what real checkpoints ship."""
    target, draft = breakable_pair
    for config in (target / "config.json", draft / "config.json"):
        _edit(config, lambda c: c.update(rope_scaling=scaling))
    assert main([str(a) for a in _probe(target, draft)]) == 0, capsys.readouterr().err
