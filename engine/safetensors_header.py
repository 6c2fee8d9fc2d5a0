"""A safetensors file's header (tensor names, dtypes, shapes), read without its data.

mx.load refuses a dtype it has no type for (`[safetensor] unsupported dtype F64`) without
naming the tensor; the loaders of a drafter (checkpoint.py) and of a target folder
(target.py) name it from the header instead. Both read every *.safetensors file of the
folder, not the sharded index, so a shard the index lists but the folder lacks (a download
that stopped) is named from the index before they do: otherwise the first tensor it held
reads as missing from the weights.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Optional

from .errors import InputError

# The dtypes mx.load reads (mlx's safetensors loader); FP8 E4M3 and E8M0 (MX formats'
# scales) come back as uint8.
MLX_DTYPES = ("F32", "F16", "BF16", "F8_E4M3", "F8_E8M0", "C64", "BOOL",
              "I8", "I16", "I32", "I64", "U8", "U16", "U32", "U64")
# Those it reads as another type than the file stores: the raw bytes of an 8-bit float.
LOADED_AS = {"F8_E4M3": "uint8", "F8_E8M0": "uint8"}


def read_header(path: Path) -> dict:
    """The header's entries by tensor name (`__metadata__` left out)."""
    try:
        with open(path, "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            if size > os.fstat(f.fileno()).st_size - 8:
                raise ValueError(f"header length {size} exceeds the file")
            header = json.loads(f.read(size))
        if not isinstance(header, dict):
            raise ValueError("the header is not a JSON object")
    except (OSError, struct.error, ValueError, UnicodeDecodeError, RecursionError) as error:
        raise InputError(f"{path}: not a readable safetensors file ({error})") from None
    return {k: v for k, v in header.items() if k != "__metadata__"}


def unloadable_dtype(path: Path) -> Optional[str]:
    """A one-line refusal naming the first tensor of `path` stored in a dtype mx.load cannot
    read, or None (no such tensor, or no header to read: the caller's error stands)."""
    try:
        header = read_header(path)
    except InputError:
        return None
    for name, entry in header.items():
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        if isinstance(dtype, str) and dtype not in MLX_DTYPES:
            return (f"{path}: tensor {name!r} is stored as {dtype}, a dtype MLX cannot load; "
                    "expected F32, F16 or BF16 weights (convert the tensor, e.g. to float32)")
    return None


def stored_dtype(path: Optional[Path], names: tuple[str, ...]) -> Optional[str]:
    """The dtype `path`'s header gives the first of `names` it holds (`F8_E4M3`), or None:
    no such tensor, no file, or no header to read."""
    if path is None or path.suffix != ".safetensors":
        return None
    try:
        header = read_header(path)
    except InputError:
        return None
    entry = next((header[n] for n in names if n in header), None)
    dtype = entry.get("dtype") if isinstance(entry, dict) else None
    return dtype if isinstance(dtype, str) else None


def dtype_words(path: Optional[Path], names: tuple[str, ...], loaded: str) -> str:
    """A refused tensor's dtype as its refusal says it: `is int32`, or where mx.load read
    the file's dtype as another (`loaded`), the dtype the file stores: `is stored as
    F8_E4M3 (8-bit floats), which MLX loads as their raw bytes (uint8)`; an FP8 checkpoint
    used to read `is uint8`, which no file said."""
    stored = stored_dtype(path, names)
    if stored is not None and LOADED_AS.get(stored) == loaded:
        return (f"is stored as {stored} (8-bit floats), which MLX loads as their raw bytes "
                f"({loaded}); dequantize it to BF16 or F16 first")
    return f"is {loaded}"


INDEX = "model.safetensors.index.json"


def check_shards(directory: Path) -> None:
    """Refuse a folder whose sharded index lists a shard it does not hold, naming the shard.
    An index that cannot be read is left alone: the loaders do not need it. So is one whose
    absent shards' tensors the folder's files hold all the same (shards merged back into one
    model.safetensors, the old index kept): the loaders read the files, not the index."""
    index = directory / INDEX
    try:
        weight_map = json.loads(index.read_text()).get("weight_map")
    except (OSError, ValueError, UnicodeDecodeError, AttributeError, RecursionError):
        return
    if not isinstance(weight_map, dict):
        return
    shards = sorted({v for v in weight_map.values() if isinstance(v, str)})
    missing = [s for s in shards if not (directory / s).is_file()]
    if missing and _held(directory) >= {n for n, v in weight_map.items() if v in missing}:
        return
    if missing:
        held = sum(1 for v in weight_map.values() if v == missing[0])
        more = f" (and {len(missing) - 1} more of its {len(shards)} shards)" if len(missing) > 1 else ""
        raise InputError(f"{index}: lists shard {missing[0]!r} ({held} tensors), which is not in "
                         f"{directory}{more}; expected every shard the index lists (a download "
                         "that stopped?)")


def _held(directory: Path) -> set[str]:
    """The tensor names the headers of a folder's *.safetensors files give (unreadable ones
    give none: their loader names them)."""
    held: set[str] = set()
    for file in directory.glob("*.safetensors"):
        if file.name.startswith("."):  # a save's temporary file, which the loaders skip
            continue
        try:
            held.update(read_header(file))
        except InputError:
            pass
    return held
