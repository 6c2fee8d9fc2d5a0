"""Workloads: one sub-folder per workload, one prompt per `.txt` file (sample_prompts/README.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..engine.errors import InputError
from ..prompt_file import read_prompt_file

# The tables list these first, in this order; any other workload follows by name.
KNOWN_ORDER = ("prose", "code", "math")
SUFFIX = ".txt"
ALL = "all"  # the tables' pooled row over every workload (stats.py): no workload's name


@dataclass(frozen=True)
class Prompt:
    workload: str
    name: str  # file stem, e.g. "03-binary-search"
    text: str
    path: Path

    @property
    def id(self) -> str:
        return f"{self.workload}/{self.name}"


@dataclass(frozen=True)
class Workload:
    name: str
    prompts: tuple[Prompt, ...]


def _order(name: str) -> tuple:
    return (KNOWN_ORDER.index(name), "") if name in KNOWN_ORDER else (len(KNOWN_ORDER), name)


def load_workloads(directory: Path, limit: Optional[int] = None) -> tuple[Workload, ...]:
    """Every workload under `directory`, its prompts sorted by file name, at most `limit` each."""
    directory = Path(directory).expanduser()
    if not directory.is_dir():
        raise InputError(
            f"--prompts {directory}: no such directory (expected one sub-folder per workload, "
            f"each holding *{SUFFIX} prompt files)"
        )
    workloads = []
    folders = [d for d in directory.iterdir() if d.is_dir() and not d.name.startswith(".")]
    for folder in sorted(folders, key=lambda d: _order(d.name)):
        if folder.name == ALL:  # its numbers would sit beside the pooled row's, under one name
            raise InputError(f"{folder}: a workload cannot be named {ALL!r} (the tables' pooled "
                             "row); rename the folder")
        # Not only regular files: a broken link or a folder named *.txt is reported when
        # read, like an empty file, rather than silently leaving the workload smaller.
        files = sorted(f for f in folder.iterdir() if f.suffix == SUFFIX and not f.name.startswith("."))
        if not files:
            raise InputError(f"{folder}: workload folder has no *{SUFFIX} prompt files")
        if limit is not None:
            files = files[:limit]
        prompts = tuple(Prompt(folder.name, f.stem, read_prompt_file(f), f) for f in files)
        workloads.append(Workload(folder.name, prompts))
    if not workloads:
        raise InputError(
            f"--prompts {directory}: no workload sub-folders (expected e.g. prose/, code/, "
            f"math/ holding *{SUFFIX} prompt files)"
        )
    return tuple(workloads)
