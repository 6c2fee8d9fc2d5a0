"""The target's greedy continuations of one data phase, kept in one file for the next.

Each stage of the sample recipe continues the same corpus again (about 32,000 of its
50,000 prompts), identical from stage to stage: the prompt's token ids, the target and
`max_new_tokens` decide the greedy continuation. A data phase given `--continuations-from
FILE` takes those it finds there and decodes only the rest; on a GPU machine that loses
its disk between sessions, that is most of the data phase's time.

    python -m dflash_tui_distill.continuations DATA_DIR FILE [--kinds PREFIX]

writes FILE (.npz, compressed) from a finished data phase: for each sequence whose prompt
kind starts with PREFIX (default: every kind), the SHA-256 of its prompt ids, its
continuation (uint16 when the vocabulary fits) and whether it stopped; with them the
target's fingerprint, `max_new_tokens` and `data_dtype`, which must match the run that
reads it. A continuation is the batch decode's (generate.py): a batch of another shape may
break a float near-tie the other way, so a reused sequence is the target's greedy choice
as much as a decoded one is, not necessarily the one a fresh decode on that machine gives.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dflash_tui.engine.errors import InputError
from dflash_tui.engine.files import write_atomic

from . import dataset

FORMAT = "dflash-tui continuations 1"


def prompt_key(prompt_ids: list[int]) -> bytes:
    return hashlib.sha256(np.asarray(prompt_ids, dtype=np.int64).tobytes()).digest()


@dataclass
class Continuations:
    """Stored continuations by prompt key, with what they were decoded under."""

    path: str
    meta: dict
    table: dict[bytes, tuple[np.ndarray, bool]]

    def check(self, max_new_tokens: int, data_dtype: str, fingerprint: dict | None = None) -> None:
        """Refuse continuations other settings or (once it is loaded) another target decoded."""
        wanted = {"max_new_tokens": max_new_tokens, "data_dtype": data_dtype}
        if fingerprint is not None:
            wanted["target"] = fingerprint
        for name, value in wanted.items():
            if self.meta.get(name) != value:
                raise InputError(
                    f"--continuations-from {self.path}: decoded with {name} {self.meta.get(name)!r}; "
                    f"this data phase uses {value!r}")

    def get(self, prompt_ids: list[int]) -> tuple[list[int], bool] | None:
        found = self.table.get(prompt_key(prompt_ids))
        return None if found is None else (found[0].astype(np.int64).tolist(), found[1])


def export(data_dir: Path, path: Path, kind_prefix: str = "") -> int:
    """Write the continuations of `data_dir`'s finished data phase to `path`; how many."""
    manifest = dataset.read_manifest(data_dir)
    prompts = dataset.read_prompts(data_dir)
    if manifest is None or prompts is None or not manifest.get("complete"):
        raise InputError(f"{data_dir}: no finished data phase here (its manifest.json must say "
                         "\"complete\": true)")
    keys, pieces, stopped = [], [], []
    for index, tokens, plen, stop in dataset.shard_rows(data_dir, manifest["shards"]):
        if prompts[index]["kind"].startswith(kind_prefix):
            keys.append(prompt_key(tokens[:plen].tolist()))
            pieces.append(tokens[plen:])
            stopped.append(stop)
    vocab = int(manifest["target"]["vocab"])
    dtype = np.uint16 if vocab <= 1 << 16 else np.int32
    meta = {"format": FORMAT, "target": manifest["target"],
            "max_new_tokens": manifest["settings"]["max_new_tokens"],
            "data_dtype": manifest["settings"]["data_dtype"], "kinds": kind_prefix or "all",
            "sequences": len(keys)}
    arrays = {
        "meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
        "keys": np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 32),
        "offsets": np.concatenate([[0], np.cumsum([len(p) for p in pieces])]).astype(np.int64),
        "tokens": np.concatenate(pieces).astype(dtype) if pieces else np.zeros(0, dtype),
        "stopped": np.array(stopped, dtype=bool),
    }
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    try:
        write_atomic(path, buffer.getvalue())
    except OSError as error:
        raise InputError(f"{path}: cannot write it ({error.strerror or error})") from None
    return len(keys)


def load(path: str) -> Continuations:
    try:
        with np.load(path) as data:
            meta = json.loads(bytes(data["meta"]).decode())
            keys, offsets, tokens, stopped = data["keys"], data["offsets"], data["tokens"], data["stopped"]
    except FileNotFoundError:
        raise InputError(f"--continuations-from {path}: no such file (expected the .npz "
                         "python -m dflash_tui_distill.continuations writes)") from None
    except (OSError, ValueError, KeyError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"--continuations-from {path}: not a continuations file ({error})") from None
    if meta.get("format") != FORMAT or len(offsets) != len(keys) + 1 or len(stopped) != len(keys):
        raise InputError(f"--continuations-from {path}: not a continuations file (format "
                         f"{meta.get('format')!r}, {len(keys)} keys, {len(offsets)} offsets; "
                         f"expected {FORMAT!r} and one offset more than keys)")
    table = {bytes(key): (tokens[offsets[i]:offsets[i + 1]], bool(stopped[i]))
             for i, key in enumerate(keys)}
    return Continuations(path, meta, table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dflash_tui_distill.continuations",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="a --data DIR whose data phase is complete")
    parser.add_argument("out", type=Path, help="the .npz to write")
    parser.add_argument("--kinds", default="", metavar="PREFIX",
                        help="only prompts whose kind starts with PREFIX (e.g. real-)")
    args = parser.parse_args(argv)
    try:
        count = export(args.data, args.out, args.kinds)
    except InputError as error:
        print(f"continuations: error: {error}", file=sys.stderr)
        return 2
    size = args.out.stat().st_size / 1e6
    print(f"continuations: {count} sequences from {args.data} in {args.out} ({size:.1f} MB)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
