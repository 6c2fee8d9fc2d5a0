"""Writes real, tiny checkpoints to disk: targets mlx-lm loads and drafters in Z Lab's format.

Nothing here is a mock: the tokenizer is a trained byte-level BPE saved with
`save_pretrained`, targets are mlx-lm's own model classes with random weights saved as
safetensors beside a config.json, and drafters are random tensors under exactly the names
and shapes of Z Lab's published checkpoints. Every file is read back through the same
loaders a user's model goes through.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "def add(a, b):\n    return a + b\n",
    "What is 12 plus 30? It is 42.",
    "A speculative decoder drafts a block of tokens and the target verifies them.",
    "for i in range(10):\n    print(i * i)\n",
    "The rain in Spain stays mainly in the plain.",
    "Seven times eight is fifty-six; nine squared is eighty-one.",
]
HIDDEN = 64


def write_tokenizer(directory: Path, vocab_size: int = 320) -> int:
    """Train a tiny byte-level BPE and save it as real tokenizer files. Returns its size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", bos_token=None, unk_token=None,
        pad_token="<|endoftext|>", additional_special_tokens=["<|im_start|>", "<|mask|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(directory))
    return tok.get_vocab_size()


def _save_model(model, directory: Path, config: dict) -> None:
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(directory / "model.safetensors"), weights, metadata={"format": "mlx"})
    (directory / "config.json").write_text(json.dumps(config, indent=2))


def write_llama_target(directory: Path, seed: int = 0, layers: int = 4) -> Path:
    """A llama-style attention target (untied lm_head), loadable with mlx_lm.load."""
    from mlx_lm.models import llama

    directory.mkdir(parents=True, exist_ok=True)
    vocab = write_tokenizer(directory)
    config = {
        "model_type": "llama", "hidden_size": HIDDEN, "num_hidden_layers": layers,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "rms_norm_eps": 1e-5, "vocab_size": vocab, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "max_position_embeddings": 2048,
    }
    mx.random.seed(seed)
    model = llama.Model(llama.ModelArgs.from_dict(config))
    _sharpen(model.model.embed_tokens, 4.0)
    _sharpen(model.lm_head, 4.0)
    _save_model(model, directory, config)
    return directory


def write_quantized_llama_target(directory: Path, seed: int = 0, bits: int = 4) -> Path:
    """The llama fixture quantized the way mlx-lm's convert does (mlx-community format)."""
    from mlx_lm.models import llama
    from mlx_lm.utils import quantize_model

    write_llama_target(directory, seed=seed)
    config = json.loads((directory / "config.json").read_text())
    model = llama.Model(llama.ModelArgs.from_dict(config))
    model.load_weights(str(directory / "model.safetensors"))
    model, config = quantize_model(model, config, group_size=32, bits=bits)
    _save_model(model, directory, config)
    return directory


def write_qwen35_target(directory: Path, seed: int = 0, layers: int = 4, tied: bool = True) -> Path:
    """A qwen3_5-style hybrid target: gated DeltaNet layers (recurrent state that cannot be
    trimmed) interleaved with full attention; tied embeddings unless `tied=False` (then an
    lm_head of its own, which mlx-lm's shard splits by vocabulary)."""
    from mlx_lm.models import qwen3_5

    directory.mkdir(parents=True, exist_ok=True)
    vocab = write_tokenizer(directory)
    config = {
        "model_type": "qwen3_5", "hidden_size": HIDDEN, "num_hidden_layers": layers,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "rms_norm_eps": 1e-6, "vocab_size": vocab,
        "linear_num_value_heads": 4, "linear_num_key_heads": 2, "linear_key_head_dim": 16,
        "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "full_attention_interval": 2,
        "tie_word_embeddings": tied, "max_position_embeddings": 2048,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                            "partial_rotary_factor": 0.5},
    }
    mx.random.seed(seed)
    model = qwen3_5.Model(qwen3_5.ModelArgs.from_dict(config))
    _sharpen(model.language_model.model.embed_tokens, 4.0)
    if not tied:
        _sharpen(model.language_model.lm_head, 4.0)
    _save_model(model, directory, config)
    return directory


def write_mlx_lm_target(directory: Path, config: dict, seed: int = 0) -> Path:
    """Any mlx-lm model class (`config["model_type"]` names its module) with random weights
    and the fixture tokenizer: for targets the engine refuses."""
    from importlib import import_module

    directory.mkdir(parents=True, exist_ok=True)
    config = {**config, "vocab_size": write_tokenizer(directory)}
    module = import_module(f"mlx_lm.models.{config['model_type']}")
    mx.random.seed(seed)
    _save_model(module.Model(module.ModelArgs.from_dict(config)), directory, config)
    return directory


def _sharpen(module, factor: float) -> None:
    """Scale a weight up. A larger embedding makes the random model's next token depend on
    its input (so greedy text varies instead of repeating one token) and a larger lm_head
    gives greedy choices clear margins (near ties, float noise between batched and
    one-token forwards could flip an argmax)."""
    module.weight = module.weight * factor
    mx.eval(module.weight)


def zlab_config(kind: str, *, vocab: int, target_layers: int, layer_ids, mask_token_id: int,
                layers: int = 2, block_size: int = 16, top_k: int = 8, sliding: bool = False) -> dict:
    """A config.json laid out as Z Lab publishes it (DFlash fields under dflash_config)."""
    dflash = {"target_layer_ids": list(layer_ids), "mask_token_id": mask_token_id,
              "block_size": block_size}
    if kind == "DFlash2DraftModel":
        dflash.update(conv_kernel_size=4, conv_group_size=16, selector_rank=8,
                      selector_top_k=top_k)
    config = {
        "architectures": [kind], "model_type": "qwen3", "hidden_size": HIDDEN,
        "num_hidden_layers": layers, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "intermediate_size": 128, "vocab_size": vocab, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "max_position_embeddings": 4096,
        "num_target_layers": target_layers, "dflash_config": dflash,
        "layer_types": ["full_attention"] * layers,
    }
    if sliding:
        config["layer_types"][0] = "sliding_attention"
        config["sliding_window"] = 24
    return config


def drafter_tensors(config: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """Random tensors under every name and shape a Z Lab checkpoint of `config` holds."""
    from dflash_tui.engine.checkpoint import expected_shapes
    from dflash_tui.engine.draft_config import parse_config

    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in expected_shapes(parse_config(config)).items():
        if name.endswith("norm.weight"):
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name.endswith("base_kernel"):
            value = 0.2 * rng.standard_normal(shape)
            value[:, 0, :] += 1.0  # tap 0 near identity, as a trained drafter starts
        elif name.endswith("codebook"):
            value = 0.5 * rng.standard_normal(shape)
        else:
            value = rng.standard_normal(shape) / math.sqrt(shape[-1])
        out[name] = value.astype(np.float32)
    return out


def write_drafter(directory: Path, config: dict, seed: int = 0, prefix: str = "",
                  tensors: dict | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    tensors = tensors if tensors is not None else drafter_tensors(config, seed)
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    mx.save_safetensors(
        str(directory / "model.safetensors"),
        {prefix + name: mx.array(value) for name, value in tensors.items()},
    )
    return directory


def target_facts(target_dir: Path) -> dict:
    config = json.loads((target_dir / "config.json").read_text())
    vocab = json.loads((target_dir / "tokenizer.json").read_text())
    added = {t["content"]: t["id"] for t in vocab["added_tokens"]}
    return {"vocab": config["vocab_size"], "layers": config["num_hidden_layers"],
            "mask": added["<|mask|>"]}


def write_pair(root: Path, target: str = "llama", drafter: str = "DFlash2DraftModel",
               seed: int = 0, **drafter_kwargs) -> tuple[Path, Path]:
    """A target directory with its drafter at target/draft (the default place)."""
    target_dir = root / f"{target}-target"
    if not (target_dir / "config.json").exists():
        writers = {"llama": write_llama_target, "qwen35": write_qwen35_target,
                   "qwen35-untied": lambda d, seed: write_qwen35_target(d, seed, tied=False)}
        writers[target](target_dir, seed=seed)
    facts = target_facts(target_dir)
    layer_ids = drafter_kwargs.pop("layer_ids", [1, 2, 3][: facts["layers"] - 1])
    config = zlab_config(drafter, vocab=facts["vocab"], target_layers=facts["layers"],
                         layer_ids=layer_ids, mask_token_id=facts["mask"], **drafter_kwargs)
    draft_dir = write_drafter(target_dir / "draft", config, seed=seed + 1)
    return target_dir, draft_dir


SMOLLM2 = {"hidden": 576, "heads": 9, "kv_heads": 3, "head_dim": 64, "intermediate": 1536,
           "vocab": 49152, "layers": 30}


def write_sample_shaped_drafter(directory: Path, kind: str = "DFlash2DraftModel", seed: int = 0,
                                layers: int = 1) -> Path:
    """A random drafter shaped for the real sample target (SmolLM2-135M-Instruct)."""
    s = SMOLLM2
    config = zlab_config(kind, vocab=s["vocab"], target_layers=s["layers"],
                         layer_ids=[1, 8, 14, 20, 27], mask_token_id=4, layers=layers)
    config.update(hidden_size=s["hidden"], num_attention_heads=s["heads"],
                  num_key_value_heads=s["kv_heads"], head_dim=s["head_dim"],
                  intermediate_size=s["intermediate"])
    if kind == "DFlash2DraftModel":
        config["dflash_config"].update(conv_group_size=64, selector_top_k=16)
    return write_drafter(directory, config, seed=seed)


# GGUF tensor names of the llama fixture's parameters (engine/gguf.py reads them back).
_GGUF_LAYER_NAMES = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}
_GGUF_TOP_NAMES = {"model.embed_tokens.weight": "token_embd.weight",
                   "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}


def _u32(n: int) -> mx.array:
    """A GGUF integer field as mx.save_gguf writes one."""
    return mx.array(n, dtype=mx.uint32)


def gguf_of_llama_target(target_dir: Path) -> tuple[dict, dict]:
    """The llama fixture target as a GGUF's (tensors, metadata): float tensors under GGUF
    names, its vocabulary and merges, the llama.* sizes of its config.json."""
    config = json.loads((target_dir / "config.json").read_text())
    tensors = {}
    for name, value in mx.load(str(target_dir / "model.safetensors")).items():
        if name in _GGUF_TOP_NAMES:
            tensors[_GGUF_TOP_NAMES[name]] = value
        else:  # model.layers.I.MODULE.weight
            _, _, index, rest = name.split(".", 3)
            module, _, suffix = rest.rpartition(".")
            tensors[f"blk.{index}.{_GGUF_LAYER_NAMES[module]}.{suffix}"] = value
    tok = json.loads((target_dir / "tokenizer.json").read_text())
    tokens = [""] * config["vocab_size"]
    for token, i in tok["model"]["vocab"].items():
        tokens[i] = token
    for added in tok["added_tokens"]:
        tokens[added["id"]] = added["content"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    metadata = {
        "general.architecture": "llama",
        "llama.attention.head_count": _u32(config["num_attention_heads"]),
        "llama.attention.head_count_kv": _u32(config["num_key_value_heads"]),
        "llama.embedding_length": _u32(config["hidden_size"]),
        "llama.block_count": _u32(config["num_hidden_layers"]),
        "llama.feed_forward_length": _u32(config["intermediate_size"]),
        "llama.rope.dimension_count": _u32(config["head_dim"]),
        "llama.attention.layer_norm_rms_epsilon": mx.array(config["rms_norm_eps"], dtype=mx.float32),
        "llama.context_length": _u32(config["max_position_embeddings"]),
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.eos_token_id": _u32(tok["model"]["vocab"].get("<|im_end|>", 2)),
    }
    return tensors, metadata


def write_llama_gguf(path: Path, target_dir: Path, metadata: dict | None = None,
                     drop: tuple[str, ...] = (), tensors: dict | None = None) -> Path:
    """The llama fixture target written as a GGUF file at `path`, with `metadata` entries
    replaced or added, the keys in `drop` left out, and `tensors` in place of its own."""
    own_tensors, own_metadata = gguf_of_llama_target(target_dir)
    own_metadata.update(metadata or {})
    for key in drop:
        own_metadata.pop(key)
    mx.save_gguf(str(path), tensors if tensors is not None else own_tensors, own_metadata)
    return path


_SAFETENSORS_DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64",
                       "int32": "I32", "uint8": "U8"}


def save_numpy_safetensors(path: Path, arrays: dict[str, np.ndarray],
                           stored: dict[str, str] | None = None) -> Path:
    """A safetensors file written byte by byte from numpy arrays, in their own dtypes (mlx
    cannot write float64, which a checkpoint saved from numpy or torch may hold), or as
    `stored` labels a tensor (`F8_E4M3` for a uint8 array of its bytes, as an FP8
    checkpoint holds them)."""
    import struct

    header, blobs, offset = {}, [], 0
    for name, array in arrays.items():
        data = np.ascontiguousarray(array).tobytes()
        dtype = (stored or {}).get(name, _SAFETENSORS_DTYPES[array.dtype.name])
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))
    return path


def shard_safetensors(directory: Path, shards: int = 2) -> list[Path]:
    """Split a folder's model.safetensors into `shards` files with the index that lists them,
    as save_pretrained writes a large checkpoint."""
    weights = mx.load(str(directory / "model.safetensors"))
    names = sorted(weights)
    files, weight_map = [], {}
    for i in range(shards):
        file = directory / f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = names[i::shards]
        mx.save_safetensors(str(file), {n: weights[n] for n in part}, metadata={"format": "mlx"})
        weight_map.update({n: file.name for n in part})
        files.append(file)
    (directory / "model.safetensors").unlink()
    (directory / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}, indent=2))
    return files


def set_gguf_tensor_type(path: Path, name: str, ggml_type: int) -> Path:
    """Relabel one tensor of a GGUF (as mx.save_gguf writes one) as another GGML type in its
    header, its bytes left as they are: a file of a quantization type MLX may not read."""
    import struct

    data = bytearray(path.read_bytes())
    pos = 24  # magic, version, tensor count, metadata count

    def take(fmt):
        nonlocal pos
        (value,) = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize(fmt)
        return value

    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip(kind):
        nonlocal pos
        if kind == 8:
            length = take("Q")  # (pos += take() would add to pos as it was before the take)
            pos += length
        elif kind == 9:
            item, count = take("I"), take("Q")
            for _ in range(count):
                skip(item)
        else:
            pos += sizes[kind]

    tensors, entries = struct.unpack_from("<QQ", data, 8)
    for _ in range(entries):
        length = take("Q")
        pos += length
        skip(take("I"))
    for _ in range(tensors):
        length = take("Q")
        tensor = data[pos:pos + length].decode()
        pos += length
        dims = take("I")
        pos += 8 * dims
        if tensor == name:
            struct.pack_into("<I", data, pos, ggml_type)
            path.write_bytes(bytes(data))
            return path
        pos += 12  # the type and the data offset
    raise KeyError(name)
