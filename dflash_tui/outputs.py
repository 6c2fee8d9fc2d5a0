"""Where results go: checked before any work starts, and written so a failure names the file.

A bench that decodes for minutes and then cannot write its --json has lost everything, so
every output flag (probe --out, bench --json/--csv, the TUI's --trace and --export-dir) is
checked first: the right kind of place (a folder where a folder is needed, never a folder
where a file is), and a trial file really created there and removed (permission bits say
nothing for root or a read-only mount). A write that fails later anyway (a disk that fills
up mid-run) becomes one line naming the file through `writing`. No output is an existing
file of the model (`not_a_model_file`): a bench's --csv on the drafter's config.json would
overwrite it, a --trace on it append to it.
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
    `force`, whose removal of that run's own files waits for `clear_run`: a run refused
    while loading (a bad drafter, prompt or block) leaves the earlier run whole."""
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise InputError(f"{flag} {path}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"{flag} {path}: cannot create it ({_reason(error)})") from None
    present = sorted(p.name for p in path.iterdir())
    if present and not force:
        raise InputError(
            f"{flag} {path}: not empty ({len(present)} entries, e.g. {present[0]}); give an empty "
            "or new folder, or --force to replace an earlier run's round-*.json/npz and summary.json")
    _try_write(flag, path, path)
    return path


def clear_run(path: Path) -> None:
    """`--force`: remove an earlier run's own files (RUN_FILES) from a run folder, and nothing
    else. Called once the new run has opened (everything checked), before its first round."""
    for pattern in RUN_FILES:
        for old in path.glob(pattern):
            try:
                old.unlink()
            except OSError as error:
                raise InputError(f"--force: cannot remove {old} ({_reason(error)})") from None


# ---- the model's own files are never an output ------------------------------------------

def model_parts(target: Optional[Path], drafter: Optional[Path],
                reference: Optional[Path] = None) -> tuple[tuple[str, Path], ...]:
    """(what, path) of each part of the model a run reads, most specific first: the drafter
    (given, or the `draft/` folder beside a target folder), a --compare drafter, the target
    (a folder or a .gguf)."""
    parts = []
    if drafter is None and target is not None and (Path(target) / "draft").is_dir():
        drafter = Path(target) / "draft"
    for what, path in (("the drafter", drafter), ("the --compare drafter", reference),
                       ("the target", target)):
        if path is not None:
            parts.append((what, Path(path).expanduser()))
    return tuple(parts)


# What the loaders read from a model folder (mlx-lm's and ours): a user's own results file
# beside them is theirs to overwrite.
MODEL_FILES = ("config.json", "*.safetensors", "*.safetensors.index.json", "tokenizer*",
               "*.jinja", "generation_config.json", "special_tokens_map.json",
               "added_tokens.json", "vocab*", "merges.txt", "*.model", "*.gguf")


def _model_file(path: Path) -> bool:
    return any(path.match(pattern) for pattern in MODEL_FILES)


def _inside(path: Path, folder: Path) -> bool:
    """A model file at the top of `folder` (where the loaders read), through any link."""
    try:
        path = path.resolve()
        return path.parent == folder.resolve() and _model_file(path)
    except OSError:
        return False


def _linked_into(path: Path, folder: Path) -> bool:
    """A hard link elsewhere to a model file at the top of `folder` (config.json, the weights)."""
    try:
        mine = path.stat()
        return any(f.is_file() and _model_file(f) and os.path.samestat(mine, f.stat())
                   for f in folder.iterdir())
    except OSError:
        return False


def not_a_model_file(flag: str, path: Optional[Path], parts) -> None:
    """Refuse an output that is an existing file of the model (a config.json, weights,
    tokenizer files, the .gguf): writing or appending to it would damage the model. A new
    file or folder inside a model folder is fine, and so is a file of the user's own there
    (results.json)."""
    if path is None:
        return
    path = Path(path).expanduser()
    if not path.is_file():
        return
    for what, part in parts:
        if part.is_dir():
            if _inside(path, part) or _linked_into(path, part):
                raise InputError(f"{flag} {path}: a file of {what} ({part}); write elsewhere")
        elif part.is_file() and same_file(path, part):
            raise InputError(f"{flag} {path}: is {what} itself ({part}); write elsewhere")


def not_a_model_folder(flag: str, path: Path, parts) -> None:
    """Refuse a run folder (probe --out) that is a model's own folder: its round files and
    summary would sit among the model's files, and --force would remove files there. A new
    folder inside a model folder is fine."""
    not_a_model_file(flag, path, parts)
    path = Path(path).expanduser()
    for what, part in parts:
        if part.is_dir() and path.is_dir() and same_file(path, part):
            raise InputError(f"{flag} {path}: is the folder of {what}; give the run a folder "
                             "of its own (a new one inside it is fine)")


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
