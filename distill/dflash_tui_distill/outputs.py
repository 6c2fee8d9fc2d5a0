"""The folders a distill command writes, checked before any work (a target load, a data
phase) so that a bad --out or --data costs nothing and nothing unrelated is written into.

--out must be new, empty, or a run this command can continue: one with a saved training
state or a data manifest (then settings.merge refuses flags that differ from the recorded
ones), or one killed before its first save (its logs alone, which the new start drops).
`--phase eval` only reads OUT's checkpoint and writes its results beside it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from dflash_tui.engine.errors import InputError

from . import dataset, state


def _resumable(out: Path) -> bool:
    return ((out / state.TRAINING / state.LATEST).is_file() or (out / "data" / dataset.MANIFEST).is_file()
            or _killed_before_its_first_save(out))


def _killed_before_its_first_save(out: Path) -> bool:
    """A training command killed before its first save leaves its log lines (and perhaps a
    half-written save under training/, without latest.json): the same command must start
    again there, not be refused. Only a log of ours counts (its first line a record with a
    step), so another tool's train.jsonl is not taken for one."""
    entries = {p.name: p for p in out.iterdir()}
    if not entries or not set(entries) <= {*state.LOGS, state.TRAINING}:
        return False
    if state.TRAINING in entries and not entries[state.TRAINING].is_dir():
        return False
    logs = [entries[name] for name in state.LOGS if name in entries]
    return bool(logs) and all(state.is_our_log(log) for log in logs)


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
