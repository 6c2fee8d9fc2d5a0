"""What --out holds, and resuming from it.

    OUT/config.json, OUT/model.safetensors   the drafter in Z Lab's format (bfloat16),
                                             rewritten at every save: always loadable
    OUT/training/latest.json                 {"step": N, "dir": "step-000N"}
    OUT/training/step-000N/params.safetensors    float32 master weights
    OUT/training/step-000N/optimizer.safetensors AdamW moments and step
    OUT/training/step-000N/state.json        step, sampler state (epoch, cursor, RNG),
                                             settings, data shards, drafter config, clock
    OUT/train.jsonl, OUT/eval.jsonl          the logs (eval.jsonl is the validation
                                             acceptance curve)

A save writes a new step directory, then points latest.json at it (atomic rename), then
removes older step directories: a command killed mid-save resumes from the previous save.

The Z Lab checkpoint is written here rather than with engine.checkpoint.save_drafter,
which (at the time of writing) replaces model.safetensors with an empty file: its temp
name does not end in .safetensors, so mx.save_safetensors writes elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

import mlx.core as mx
from mlx.utils import tree_flatten, tree_unflatten

from dflash_tui.engine.errors import InputError
from dflash_tui.engine.files import write_atomic, write_json_atomic

from .json_files import read_json_object

TRAINING = "training"
LATEST = "latest.json"
LOGS = ("train.jsonl", "eval.jsonl")
# what a resumed run reads of state.json, and the JSON kind each must be
STATE_FIELDS = {"sampler": dict, "shards": list, "train_settings": dict, "drafter_config": dict}


def write_drafter_checkpoint(directory: Path, weights: dict[str, mx.array], config_json: dict) -> None:
    """config.json + model.safetensors, each replaced atomically (weights first)."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(dir=directory, prefix=".save-"))
    try:
        mx.save_safetensors(str(tmp_dir / "model.safetensors"), weights, metadata={"format": "mlx"})
        os.replace(tmp_dir / "model.safetensors", directory / "model.safetensors")
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    write_json_atomic(directory / "config.json", config_json)


def _save_tree(path: Path, tree) -> None:
    flat = dict(tree_flatten(tree))
    tmp = path.with_name(path.stem + ".tmp.safetensors")
    mx.save_safetensors(str(tmp), flat)
    os.replace(tmp, path)


def _load_tree(path: Path):
    try:
        return tree_unflatten(list(mx.load(str(path)).items()))
    except Exception as error:  # mlx raises RuntimeError/ValueError with its own text
        raise InputError(f"{path}: unreadable training state ({error})") from None


def save_state(out: Path, step: int, params, optimizer_state, state: dict) -> Path:
    training = out / TRAINING
    training.mkdir(parents=True, exist_ok=True)
    name = f"step-{step:07d}"
    final = training / name
    tmp = Path(tempfile.mkdtemp(dir=training, prefix=f".{name}-"))
    _save_tree(tmp / "params.safetensors", params)
    _save_tree(tmp / "optimizer.safetensors", optimizer_state)
    write_json_atomic(tmp / "state.json", {**state, "step": step})
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    write_json_atomic(training / LATEST, {"step": step, "dir": name})
    for old in training.iterdir():
        if old.is_dir() and old.name != name:
            shutil.rmtree(old, ignore_errors=True)
    return final


def latest_state(out: Path) -> Optional[dict]:
    """The saved state.json of the latest save in `out`, or None if there is none."""
    pointer = out / TRAINING / LATEST
    if not pointer.is_file():
        return None
    name = read_json_object(pointer, "training state").get("dir")
    if not isinstance(name, str) or not name or Path(name).name != name:
        raise InputError(f"{pointer}: \"dir\" = {json.dumps(name)}; expected the name of a step "
                         f"folder in {out / TRAINING}")
    directory = out / TRAINING / name
    if not directory.is_dir():
        raise InputError(f"{pointer}: names {directory}, which is missing")
    state = read_json_object(directory / "state.json", "training state")
    for key, kind in STATE_FIELDS.items():
        if not isinstance(state.get(key), kind):
            raise InputError(f"{directory / 'state.json'}: unreadable training state ({key!r} is "
                             f"{json.dumps(state.get(key))[:40]}; expected a JSON {kind.__name__})")
    state["_dir"] = str(directory)
    return state


def load_arrays(state: dict):
    """(params, optimizer state) trees of a state from latest_state."""
    directory = Path(state["_dir"])
    return (_load_tree(directory / "params.safetensors"),
            _load_tree(directory / "optimizer.safetensors"))


def append_jsonl(path: Path, record: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()


def _records(path: Path):
    """(line, record) for each line of a JSON-lines log that holds an object; a damaged line
    (cut short by a kill, bytes that are not UTF-8, another kind of value) is skipped."""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield line, record


def last_jsonl(path: Path, keep=lambda record: True) -> Optional[dict]:
    """The last record of a JSON-lines log that `keep` accepts, or None."""
    if not path.is_file():
        return None
    last = None
    for _, record in _records(path):
        if keep(record):
            last = record
    return last


def is_our_log(path: Path) -> bool:
    """Whether `path` is a log this trainer wrote: its first line a record with a step."""
    try:
        with open(path, encoding="utf-8") as f:
            first = json.loads(f.readline())
    except (OSError, ValueError):  # ValueError: JSON and UTF-8 errors alike
        return False
    return isinstance(first, dict) and isinstance(first.get("step"), int)


def truncate_jsonl(path: Path, max_step: int) -> None:
    """Drop log lines past `max_step` (written after the save a resumed run starts from),
    so the logged curve has each step once. Damaged lines go too."""
    if not path.is_file():
        return
    kept = [line for line, record in _records(path)
            if isinstance(step := record.get("step", 0), (int, float)) and step <= max_step]
    write_atomic(path, "".join(line + "\n" for line in kept))
