"""Where results go: checked before any work starts, and written so a failure names the file.

A bench that decodes for minutes and then cannot write its --json has lost everything, so
every output flag (probe --out, bench --json/--csv, the TUI's --trace and --export-dir) is
checked first: the right kind of place (a folder where a folder is needed, never a folder
where a file is), and a trial file really created there and removed (permission bits say
nothing for root or a read-only mount). A write that fails later anyway (a disk that fills
up mid-run) becomes one line naming the file through `writing`.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from .engine.errors import InputError

# What `probe --out` writes (snapshot.export_round, write_atomic's temp files, the summary):
# the only files `--force` removes.
RUN_FILES = ("round-*.json", "round-*.npz", "summary.json", ".round-*.tmp", ".summary.json.*.tmp")


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def _try_write(flag: str, shown: Path, directory: Path) -> None:
    try:
        fd, trial = tempfile.mkstemp(dir=directory, prefix=".dflash-tui-write-check-")
        os.close(fd)
        os.unlink(trial)
    except OSError as error:
        raise InputError(f"{flag} {shown}: cannot write in {directory} ({_reason(error)})") from None


def _existing_ancestor(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path.cwd()


def output_file(flag: str, value: Optional[str]) -> Optional[Path]:
    """A file the run will write at its end (atomically: a temp file beside it, renamed)."""
    if value is None:
        return None
    path = Path(value).expanduser()
    if path.is_dir():
        raise InputError(f"{flag} {path}: is a directory (expected a file name)")
    parent = path.parent
    if not parent.exists():
        raise InputError(f"{flag} {path}: directory {parent} does not exist")
    if not parent.is_dir():
        raise InputError(f"{flag} {path}: {parent} is not a directory")
    _try_write(flag, path, parent)
    return path


def append_file(flag: str, value: Optional[str]) -> Optional[Path]:
    """A file the run appends to as it goes (a trace): opened for appending once, here."""
    path = output_file(flag, value)
    if path is not None:
        try:
            with open(path, "a", encoding="utf-8"):
                pass
        except OSError as error:
            raise InputError(f"{flag} {path}: cannot append to it ({_reason(error)})") from None
    return path


def output_dir(flag: str, value: str) -> Path:
    """A folder written into later, on request (the TUI's `x`): checked, not created, so a
    session that exports nothing leaves nothing behind."""
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise InputError(f"{flag} {path}: exists and is not a directory")
    ancestor = _existing_ancestor(path)
    if not ancestor.is_dir():
        raise InputError(f"{flag} {path}: {ancestor} is not a directory")
    _try_write(flag, path, ancestor)
    return path


def run_dir(flag: str, value: str, force: bool) -> Path:
    """A folder for one run's files, made now. A folder holding anything is refused (an
    earlier run's round files beside a new summary would describe neither run) unless
    `force`, which first removes that run's own files (RUN_FILES) and nothing else."""
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise InputError(f"{flag} {path}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"{flag} {path}: cannot create it ({_reason(error)})") from None
    if force:
        for pattern in RUN_FILES:
            for old in path.glob(pattern):
                try:
                    old.unlink()
                except OSError as error:
                    raise InputError(f"--force: cannot remove {old} ({_reason(error)})") from None
    present = sorted(p.name for p in path.iterdir())
    if present and not force:
        raise InputError(
            f"{flag} {path}: not empty ({len(present)} entries, e.g. {present[0]}); give an empty "
            "or new folder, or --force to replace an earlier run's round-*.json/npz and summary.json")
    _try_write(flag, path, path)
    return path


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: the same file on disk where both exist (hard and
    symbolic links, ./x and x), else the same absolute path once resolved."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them is not there (yet)
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn a failed write (full disk, file size limit, a folder gone) into one line naming
    the file."""
    try:
        yield
    except OSError as error:
        raise InputError(f"{path}: cannot write ({_reason(error)})") from None
