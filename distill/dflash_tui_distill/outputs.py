"""The folders a distill command writes, checked before any work (a target load, a data
phase) so that a bad --out or --data costs nothing and nothing unrelated is written into.

--out must be new, empty, or a run this command can continue: one with a saved training
state or a data manifest (then settings.merge refuses flags that differ from the recorded
ones). `--phase eval` only reads OUT's checkpoint and writes its results beside it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from dflash_tui.engine.errors import InputError

from . import dataset, state


def _resumable(out: Path) -> bool:
    return (out / state.TRAINING / state.LATEST).is_file() or (out / "data" / dataset.MANIFEST).is_file()


def check_out(out: Path, phase: str) -> None:
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a directory")
    if phase != "eval" and out.is_dir():
        # an empty folder is what a command stopped before its first write leaves
        found = sorted(p.name for p in out.iterdir() if not (p.is_dir() and not any(p.iterdir())))
        if found and not _resumable(out):
            raise InputError(
                f"--out {out}: not empty ({found[0]}{', ...' if len(found) > 1 else ''}) and not a "
                "distill run to continue (no training state or data manifest); give a new or empty folder")
    writable_dir(out, "--out")


def writable_dir(path: Path, flag: str) -> None:
    """Make `path` if needed and prove a file can be written in it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as error:
        raise InputError(f"{flag} {path}: cannot write there ({error.strerror or error})") from None
