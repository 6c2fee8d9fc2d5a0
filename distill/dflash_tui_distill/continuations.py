"""The target's greedy continuations of one data phase, kept in one file for the next.

Each stage of the sample recipe continues the same corpus again (about 32,000 of its
50,000 prompts), identical from stage to stage: the prompt's token ids, the target and
`max_new_tokens` decide the greedy continuation. A data phase given `--continuations-from
FILE` takes those it finds there and decodes only the rest; on a GPU machine that loses
its disk between sessions, that is most of the data phase's time.

    python -m dflash_tui_distill.continuations DATA_DIR FILE [--kinds PREFIX]
        [--exclude-source NAME ...] [--exclude-licence TEXT ...]

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
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dflash_tui.engine.errors import InputError
from dflash_tui.engine.files import write_atomic

from . import dataset

FORMAT = "dflash-tui continuations 1"
# what reading a file that is not one, or a damaged one, raises
NOT_ONE = (ValueError, KeyError, TypeError, AttributeError, EOFError, zipfile.BadZipFile, zlib.error)


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

    def get(self, prompt_ids: list[int]) -> tuple[np.ndarray, bool] | None:
        """The stored continuation of these prompt ids and whether it stopped, if there is one."""
        return self.table.get(prompt_key(prompt_ids))


def export(data_dir: Path, path: Path, kind_prefix: str = "",
           exclude_sources: tuple[str, ...] = (), exclude_licences: tuple[str, ...] = ()) -> int:
    """Write the continuations of `data_dir`'s finished data phase to `path`; how many.
    Prompts from `exclude_sources` (a corpus source's name), or from a corpus source whose
    licence, as the manifest records it, contains one of `exclude_licences` (e.g. "GPL":
    text derived from it does not travel with this repository), are left out."""
    manifest = dataset.read_manifest(data_dir)
    prompts = dataset.read_prompts(data_dir)
    if manifest is None or prompts is None or not manifest.get("complete"):
        raise InputError(f"{data_dir}: no finished data phase here (its manifest.json must say "
                         "\"complete\": true)")
    known = {p.get("source") for p in prompts}
    unknown = [name for name in exclude_sources if name not in known]
    if unknown:
        raise InputError(f"{data_dir}: no prompt comes from source {unknown[0]!r} (--exclude-source "
                         f"takes a source's name as its prompts record it, e.g. {sorted(map(str, known))[0]!r})")
    if exclude_licences:  # a corpus may list sources none of whose prompts were drawn
        exclude_sources = (*exclude_sources, *_sources_under(manifest, exclude_licences, data_dir))
    keys, pieces, stopped = [], [], []
    for index, tokens, plen, stop in dataset.shard_rows(data_dir, manifest["shards"]):
        prompt = prompts[index]
        if prompt["kind"].startswith(kind_prefix) and prompt.get("source") not in exclude_sources:
            keys.append(prompt_key(tokens[:plen].tolist()))
            pieces.append(tokens[plen:])
            stopped.append(stop)
    if not keys:
        matched = any(p["kind"].startswith(kind_prefix) for p in prompts)
        left_out = f" once {', '.join(exclude_sources)} is left out" if matched and exclude_sources else ""
        raise InputError(f"{data_dir}: no sequence's prompt kind starts with {kind_prefix!r}"
                         f"{left_out}; nothing to keep")
    vocab = int(manifest["target"]["vocab"])
    dtype = np.uint16 if vocab <= 1 << 16 else np.int32
    meta = {"format": FORMAT, "target": manifest["target"],
            "max_new_tokens": manifest["settings"]["max_new_tokens"],
            "data_dtype": manifest["settings"]["data_dtype"], "kinds": kind_prefix,
            "excluded_sources": list(exclude_sources), "sequences": len(keys)}
    arrays = {
        "meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
        "keys": np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 32),
        "offsets": np.concatenate([[0], np.cumsum([len(p) for p in pieces])]).astype(np.int64),
        "tokens": np.concatenate(pieces).astype(dtype),
        "stopped": np.array(stopped, dtype=bool),
    }
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    try:
        write_atomic(path, buffer.getvalue())
    except OSError as error:
        raise InputError(f"{path}: cannot write it ({error.strerror or error})") from None
    return len(keys)


def _sources_under(manifest: dict, licences: tuple[str, ...], data_dir: Path) -> list[str]:
    """The corpus sources whose recorded licence contains one of `licences`; refused when
    the manifest records none (an exclusion that cannot be checked must not pass as done)."""
    sources = (manifest.get("prompts_from") or {}).get("sources")
    if not isinstance(sources, dict) or not sources:
        raise InputError(f"{data_dir}: its manifest records no corpus sources with their licences "
                         "(prompts_from.sources), so --exclude-licence cannot tell which to leave out")
    return [name for name, source in sources.items()
            if any(word in str(source.get("licence", "")) for word in licences)]


def load(path: str) -> Continuations:
    """Read a continuations file, refusing in one line one that is damaged or not one."""
    try:
        meta, keys, offsets, tokens, stopped = _read(path)
    except FileNotFoundError:
        raise InputError(f"--continuations-from {path}: no such file (expected the .npz "
                         "python -m dflash_tui_distill.continuations writes)") from None
    except OSError as error:
        raise InputError(f"--continuations-from {path}: unreadable ({error.strerror or error})") from None
    except NOT_ONE as error:  # a part missing from a file carried in parts lands here too
        raise InputError(f"--continuations-from {path}: not a continuations file, or a damaged one "
                         f"({error})") from None
    table = {bytes(key): (tokens[offsets[i]:offsets[i + 1]], bool(stopped[i]))
             for i, key in enumerate(keys)}
    return Continuations(path, meta, table)


def _read(path: str):
    """The file's arrays, checked against each other (ValueError says what is wrong)."""
    data = np.load(path, allow_pickle=False)
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError("one array, not an .npz")
    with data:
        meta = json.loads(bytes(data["meta"]).decode())
        keys, offsets, tokens, stopped = (data[k] for k in ("keys", "offsets", "tokens", "stopped"))
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else meta
        raise ValueError(f"format {found!r}; expected {FORMAT!r}")
    n = len(keys) if keys.ndim == 2 else -1
    vocab = (meta.get("target") or {}).get("vocab", 0)
    if (keys.dtype != np.uint8 or keys.ndim != 2 or keys.shape[1] != 32
            or offsets.ndim != 1 or offsets.dtype.kind not in "iu" or len(offsets) != n + 1
            or offsets[0] != 0 or np.any(np.diff(offsets) < 0) or offsets[-1] != len(tokens)
            or tokens.ndim != 1 or tokens.dtype.kind not in "iu" or (len(tokens) and tokens.max() >= vocab)
            or stopped.dtype != bool or stopped.shape != (n,)):
        raise ValueError(f"arrays that do not fit together: keys {keys.dtype}{keys.shape}, offsets "
                         f"{offsets.dtype}{offsets.shape}, tokens {tokens.dtype}{tokens.shape}, stopped "
                         f"{stopped.dtype}{stopped.shape}, vocabulary {vocab}")
    return meta, keys, offsets, tokens, stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dflash_tui_distill.continuations",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="a --data DIR whose data phase is complete")
    parser.add_argument("out", type=Path, help="the .npz to write")
    parser.add_argument("--kinds", default="", metavar="PREFIX",
                        help="only prompts whose kind starts with PREFIX (e.g. real-)")
    parser.add_argument("--exclude-source", action="append", default=[], metavar="NAME",
                        help="leave out the prompts of this source (as the prompts record it; "
                             "repeatable)")
    parser.add_argument("--exclude-licence", action="append", default=[], metavar="TEXT",
                        help="leave out the prompts of every corpus source whose licence (as the "
                             "manifest records it) contains TEXT, e.g. GPL (repeatable)")
    args = parser.parse_args(argv)
    try:
        count = export(args.data, args.out, args.kinds, tuple(args.exclude_source),
                       tuple(args.exclude_licence))
    except InputError as error:
        print(f"continuations: error: {error}", file=sys.stderr)
        return 2
    size = args.out.stat().st_size / 1e6
    print(f"continuations: {count} sequences from {args.data} in {args.out} ({size:.1f} MB)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
