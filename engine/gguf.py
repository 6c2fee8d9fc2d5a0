"""Load a llama-family GGUF file as an mlx-lm llama model plus a tokenizer.

`mx.load` reads GGUF natively and keeps Q4_0 / Q4_1 / Q8_0 tensors quantized, as
(weight, scales, biases) triples with group size 32. The bits differ per tensor (the
sample's embedding is Q8_0, the rest Q4_1), so they are derived per tensor from the packed
width. llama.cpp's converter permutes the q/k projections for its interleaved rope, which
is why the model runs with `rope_traditional=True`. The tokenizer is rebuilt from the
file's own vocabulary and merges; nothing is downloaded.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Optional

import mlx.core as mx
import mlx.nn as nn

from .config_fields import DIM, INT, POSITIVE, STRINGS, short
from .errors import InputError, strict_load_names

GGUF_GROUP_SIZE = 32

# GGUF tensor names -> mlx-lm llama parameter names.
_LAYER_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}

# Pre-tokenizer splits used by llama.cpp, by `tokenizer.ggml.pre`.
_GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_SPLIT_DIGITS = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone"}
EOS_ID = "tokenizer.ggml.eos_token_id"


def _scalar(metadata: dict, key: str, default=None):
    """A metadata value as Python: a one-element array as its number, a longer one as a list
    (which the checks below then refuse by name, where .item() raised a bare ValueError)."""
    value = metadata.get(key, default)
    if isinstance(value, mx.array):
        value = value.item() if value.size == 1 else value.tolist()
    return value


def _gguf_name(name: str) -> str:
    """An mlx-lm llama parameter name as the GGUF tensor it is read from (_rename reversed)."""
    layer = {v: k for k, v in _LAYER_NAMES.items()}
    top = {v: k for k, v in _TOP_NAMES.items()}
    stem, _, suffix = name.rpartition(".")
    if stem.startswith("model.layers."):
        _, _, index, part = stem.split(".", 3)
        return f"blk.{index}.{layer[part]}.{suffix}" if part in layer else name
    return f"{top[stem]}.{suffix}" if stem in top else name


def note_name(name: str) -> str:
    """How a note names an mlx-lm parameter of a GGUF target, quoted: by its GGUF tensor.
    mx.load reads a Q4_0, Q4_1 or Q8_0 tensor as packed weights, scales and biases, which
    the file holds only inside that tensor's blocks: they are named by it, saying which."""
    stem, _, suffix = name.rpartition(".")
    if suffix in ("scales", "biases"):
        return f"{_gguf_name(stem + '.weight')!r} (the {suffix} of its quantized blocks)"
    return repr(_gguf_name(name))


def _rename(name: str) -> str:
    stem, _, suffix = name.rpartition(".")
    if stem.startswith("blk."):
        _, index, part = stem.split(".", 2)
        if part not in _LAYER_NAMES:
            raise KeyError(part)
        return f"model.layers.{index}.{_LAYER_NAMES[part]}.{suffix}"
    if stem not in _TOP_NAMES:
        raise KeyError(stem)
    return f"{_TOP_NAMES[stem]}.{suffix}"


# GGML tensor types by number (llama.cpp's ggml.h). mx.load keeps Q4_0, Q4_1 and Q8_0
# quantized, dequantizes Q2_K, Q4_K, Q6_K and BF16 to float16 and reads the floats and small
# integers as they are (integers are refused below unless packed); any other type fails with
# "gguf_tensor_to_f16 failed", naming neither the tensor nor its type, and a type past 30
# ends its tensor list early, so the tensors after it read as missing.
GGML_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
              9: "Q8_1", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K",
              16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S",
              22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64",
              29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4"}
MLX_GGML_TYPES = (0, 1, 30, 2, 3, 8, 10, 12, 14, 24, 25, 26)
# GGUF metadata value types (number: bytes); 8 is a string, 9 an array
_VALUE_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def tensor_types(path: Path) -> Optional[list[tuple[str, int]]]:
    """(name, GGML type) of every tensor a GGUF's header lists, read without its data; None
    where the header cannot be read this way (mx.load then says what is wrong)."""

    def take(f, fmt: str):
        size = struct.calcsize(fmt)
        data = f.read(size)
        if len(data) != size:
            raise ValueError("cut short")
        return struct.unpack("<" + fmt, data)[0]

    def skip(f, kind: int) -> None:
        if kind == 8:
            f.seek(take(f, "Q"), 1)
        elif kind == 9:
            item, count = take(f, "I"), take(f, "Q")
            if item in _VALUE_BYTES:
                f.seek(count * _VALUE_BYTES[item], 1)
            else:
                for _ in range(count):
                    skip(f, item)
        else:
            f.seek(_VALUE_BYTES[kind], 1)

    try:
        with open(path, "rb") as f:
            if f.read(4) != b"GGUF" or take(f, "I") not in (2, 3):
                return None
            tensors, entries = take(f, "Q"), take(f, "Q")
            for _ in range(entries):
                f.seek(take(f, "Q"), 1)  # the key
                skip(f, take(f, "I"))
            found = []
            for _ in range(tensors):
                length = take(f, "Q")
                if length > 1 << 16:  # a damaged length, not a tensor name
                    return None
                name = f.read(length).decode()
                f.seek(8 * take(f, "I"), 1)  # the dimensions
                found.append((name, take(f, "I")))
                f.seek(8, 1)  # the data offset
            return found
    except (OSError, ValueError, KeyError, UnicodeDecodeError, RecursionError, OverflowError):
        return None


def check_tensor_types(path: Path) -> None:
    """Refuse a tensor of a GGML type mx.load cannot read, naming it and its type."""
    unreadable = [(name, kind) for name, kind in tensor_types(path) or ()
                  if kind not in MLX_GGML_TYPES]
    if not unreadable:
        return
    name, kind = unreadable[0]
    types = sorted({GGML_TYPES.get(k, f"type {k}") for _, k in unreadable})
    more = (f" (and {len(unreadable) - 1} more, of {', '.join(types)})"
            if len(unreadable) > 1 else "")
    readable = [GGML_TYPES[k] for k in MLX_GGML_TYPES if not GGML_TYPES[k].startswith("I")]
    readable = f"{', '.join(readable[:-1])} or {readable[-1]}"
    raise InputError(f"{path}: tensor {name!r} is {GGML_TYPES.get(kind, f'of GGML type {kind}')}"
                     f"{more}, a type MLX cannot read; expected {readable} (quantize the model "
                     "again to one of these)")


def read_gguf(path: Path) -> tuple[dict, dict]:
    # the header's tensor types are read only where mx.load failed or came back short (a
    # type past 30 ends its list early): walking the header costs ~35 ms on the sample, most
    # of it the vocabulary, which a good file need not pay
    try:
        tensors, metadata = mx.load(str(path), return_metadata=True)
    except Exception as error:  # mlx raises RuntimeError/ValueError with its own text
        check_tensor_types(path)
        raise InputError(f"{path}: cannot read as GGUF ({error})") from None
    # a quantized tensor comes back as its weight, scales and biases: count the weights
    if len([n for n in tensors if not n.endswith((".scales", ".biases"))]) != _tensor_count(path):
        check_tensor_types(path)
    return tensors, metadata


def _tensor_count(path: Path) -> Optional[int]:
    """The tensor count a GGUF (v2 or v3) header declares, or None."""
    with open(path, "rb") as f:
        head = f.read(16)
    if len(head) < 16 or head[:4] != b"GGUF" or struct.unpack("<I", head[4:8])[0] not in (2, 3):
        return None
    return struct.unpack("<Q", head[8:16])[0]


def llama_config(path: Path, metadata: dict, tokens: Optional[list[str]] = None) -> dict:
    """The config.json of the llama model the metadata describes, every field checked.
    `tokens`: the vocabulary as gguf_tokens checked it (checked here when not given)."""
    arch = _scalar(metadata, "general.architecture")
    if arch != "llama":
        raise InputError(
            f"{path}: GGUF architecture is {arch!r}; dflash-tui reads llama-family GGUF files "
            "(convert other targets to an mlx-lm directory)"
        )

    def field(key, kind, default=None):
        """llama.KEY checked against its kind: a head count of 0 divided by zero, a string
        failed in int(), an epsilon of 0 or below failed in RMSNorm."""
        value = _scalar(metadata, f"llama.{key}")
        if value is None:
            if default is None:
                raise InputError(f"{path}: GGUF metadata lacks llama.{key}")
            return default
        if not kind.holds(value):
            raise InputError(f"{path}: GGUF metadata llama.{key} = {short(value)}; expected "
                             f"{kind.expected}")
        return value

    heads = field("attention.head_count", DIM)
    hidden = field("embedding_length", DIM)
    if tokens is None:
        tokens = gguf_tokens(path, metadata)
    return {
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": field("block_count", DIM),
        "intermediate_size": field("feed_forward_length", DIM),
        "num_attention_heads": heads,
        "num_key_value_heads": field("attention.head_count_kv", DIM, heads),
        "head_dim": field("rope.dimension_count", DIM, hidden // heads),
        "rms_norm_eps": float(field("attention.layer_norm_rms_epsilon", POSITIVE)),
        "vocab_size": field("vocab_size", DIM, len(tokens)),
        "rope_theta": float(field("rope.freq_base", POSITIVE, 10000.0)),
        "rope_traditional": True,
        # 0 is refused as max_position_embeddings = 0 is in a folder's config.json (it
        # used to read as "no limit"); a file without the key gets llama's usual 4096.
        "max_position_embeddings": field("context_length", DIM, 4096),
        "tie_word_embeddings": True,
    }


def gguf_tokens(path: Path, metadata: dict) -> list[str]:
    """The vocabulary, checked: the tokenizer and the vocabulary size are built from it. A
    load checks it once and hands it to both (the check visits each of ~49k strings)."""
    tokens = metadata.get("tokenizer.ggml.tokens")
    if tokens is None:
        raise InputError(f"{path}: GGUF metadata lacks tokenizer.ggml.tokens (the vocabulary); "
                         "expected a list of strings")
    if not STRINGS.holds(tokens) or not tokens:
        raise InputError(f"{path}: GGUF metadata tokenizer.ggml.tokens = {short(tokens)}; "
                         f"expected a non-empty list of strings")
    return tokens


def _merges(path: Path, metadata: dict) -> list[tuple[str, str]]:
    """BPE merges, each two tokens joined by one space (byte-level tokens hold no spaces)."""
    merges = metadata.get("tokenizer.ggml.merges", [])
    if not STRINGS.holds(merges):
        raise InputError(f"{path}: GGUF metadata tokenizer.ggml.merges = {short(merges)}; "
                         "expected a list of strings")
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    for i, pair in enumerate(pairs):
        if len(pair) != 2 or not all(pair):
            raise InputError(f"{path}: GGUF metadata tokenizer.ggml.merges[{i}] = "
                             f"{merges[i]!r}; expected two tokens joined by a space")
    return pairs


def load_gguf_model(path: Path, dtype: mx.Dtype):
    """Build the mlx-lm llama model and the tokenizer of a GGUF file. Returns (model, config
    dict, tokenizer)."""
    from mlx_lm.models import llama

    tensors, metadata = read_gguf(path)
    tokens = gguf_tokens(path, metadata)
    config = llama_config(path, metadata, tokens)
    weights = {}
    for name, value in tensors.items():
        # Whole numbers only as a quantized tensor's packed weight beside its scales: an
        # int embedding or norm loads, then fails or computes nonsense.
        quantized = name.rpartition(".")[0] + ".scales" in tensors
        if not mx.issubdtype(value.dtype, mx.floating) and not quantized:
            dtype = str(value.dtype).removeprefix("mlx.core.")
            raise InputError(f"{path}: tensor {name!r} is {dtype}; expected floating-point or "
                             "quantized (Q4_0, Q4_1, Q8_0) weights")
        try:
            weights[_rename(name)] = value
        except KeyError:
            raise InputError(f"{path}: unexpected GGUF tensor {name!r} for a llama model") from None
    config["tie_word_embeddings"] = "lm_head.weight" not in weights

    model = llama.Model(llama.ModelArgs.from_dict(config))

    def quantized_as(module_path: str, module: nn.Module):
        scales = weights.get(f"{module_path}.scales")
        if scales is None or not hasattr(module, "to_quantized"):
            return False
        packed = weights[f"{module_path}.weight"].shape[-1]
        in_features = scales.shape[-1] * GGUF_GROUP_SIZE
        return {"group_size": GGUF_GROUP_SIZE, "bits": packed * 32 // in_features}

    nn.quantize(model, class_predicate=quantized_as)
    # Q4_0 / Q8_0 are symmetric: mlx gives them biases too, but be safe if it does not.
    for name in list(weights):
        if name.endswith(".scales") and name[: -len("scales")] + "biases" not in weights:
            weights[name[: -len("scales")] + "biases"] = mx.zeros_like(weights[name])
    weights = {
        k: v.astype(dtype) if mx.issubdtype(v.dtype, mx.floating) else v for k, v in weights.items()
    }
    try:
        model.load_weights(list(weights.items()), strict=True)
    except ValueError as error:
        raise InputError(_fit_error(path, config, error)) from None
    model.eval()
    mx.eval(model.parameters())
    return model, config, gguf_tokenizer(path, metadata, tokens)


def _fit_error(path: Path, config: dict, error: ValueError) -> str:
    """mlx's strict load error in one line: the first tensor it lists, as the GGUF names it,
    and how many more (it lists every one: 18 names for two layers too many)."""
    found = strict_load_names(error)
    if not found:
        return f"{path}: GGUF tensors do not fit a llama model ({' '.join(str(error).split())})"
    which, count, name = found
    first, more = _gguf_name(name), f" (and {count - 1} more)" if count > 1 else ""
    layers = config["num_hidden_layers"]
    if which == "Missing":
        return (f"{path}: tensor {first!r} is missing from the GGUF{more}; expected every "
                f"tensor of the {layers} layers llama.block_count declares")
    return (f"{path}: tensor {first!r} is not in the llama model the metadata describes{more}; "
            "check llama.block_count and the other sizes")


def gguf_tokenizer(path: Path, metadata: dict, tokens: Optional[list[str]] = None):
    """A Hugging Face fast tokenizer rebuilt from the GGUF's own vocabulary and merges.
    `tokens`: the vocabulary as gguf_tokens checked it (checked here when not given)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if metadata.get("tokenizer.ggml.model") != "gpt2":
        raise InputError(
            f"{path}: tokenizer.ggml.model is {metadata.get('tokenizer.ggml.model')!r}; "
            "only byte-level BPE ('gpt2') GGUF tokenizers are supported"
        )
    if tokens is None:
        tokens = gguf_tokens(path, metadata)
    merges = _merges(path, metadata)
    vocab = {token: i for i, token in enumerate(tokens)}
    try:
        tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    except Exception as error:  # tokenizers' own checks (a merge of tokens not in the vocabulary)
        raise InputError(f"{path}: tokenizer.ggml.merges do not fit tokenizer.ggml.tokens "
                         f"({' '.join(str(error).split())})") from None

    gpt2_split = pre_tokenizers.Split(Regex(_GPT2_PATTERN), behavior="isolated")
    steps = [gpt2_split, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    if metadata.get("tokenizer.ggml.pre") in _SPLIT_DIGITS:
        steps.insert(0, pre_tokenizers.Digits(individual_digits=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tokenizer.decoder = decoders.ByteLevel()

    types = metadata.get("tokenizer.ggml.token_type")
    types = types.tolist() if isinstance(types, mx.array) else list(types or [])
    if types and len(types) != len(tokens):  # one type per token, as llama.cpp reads them
        raise InputError(f"{path}: GGUF metadata tokenizer.ggml.token_type holds {len(types)} "
                         f"types; expected one per token of tokenizer.ggml.tokens ({len(tokens)})")
    control = [tokens[i] for i, t in enumerate(types) if t == 3]  # GGUF CONTROL tokens

    def token_at(key):
        """The token a special-token id names. An id the vocabulary lacks is refused for
        EOS, where every decode stops (dropped, each decode ran on to --max-tokens and
        nothing said why), and dropped for the others, as llama.cpp runs such a file."""
        index = _scalar(metadata, key)
        if INT.holds(index) and 0 <= index < len(tokens):
            return tokens[index]
        if index is not None and key == EOS_ID:
            raise InputError(f"{path}: GGUF metadata {key} = {short(index)}; expected a token id "
                             f"from 0 to {len(tokens) - 1}: the vocabulary (tokenizer.ggml.tokens) "
                             f"holds {len(tokens)} tokens")
        return None

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=token_at("tokenizer.ggml.bos_token_id"),
        eos_token=token_at(EOS_ID),
        unk_token=token_at("tokenizer.ggml.unknown_token_id"),
        pad_token=token_at("tokenizer.ggml.padding_token_id"),
        additional_special_tokens=control,
        name_or_path=str(path),  # names the file when its chat template fails (target.py)
    )
    fast.chat_template = metadata.get("tokenizer.chat_template")
    if not bool(_scalar(metadata, "tokenizer.ggml.add_bos_token", False)):
        fast.add_bos_token = False
    return fast
