"""Where a session's files go: one directory per session under the export directory, named
by when the session started and never reused, holding its trace and every round exported
from it. A restart (`r`, `p`) is a new session with a new directory, so nothing an earlier
session wrote is ever overwritten; exporting the same round twice adds `-2`, `-3`, ...

    dflash-snapshots/20250301-142233/trace.jsonl
    dflash-snapshots/20250301-142233/round-0003.json   (+ round-0003.npz)
    dflash-snapshots/20250301-142233/round-0003-2.json

The directory is made when something is first written to it: the trace, handed to the engine
as `make_trace`, once a session has opened (a restart the engine refuses makes none), or the
first export.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Optional

TRACE_NAME = "trace.jsonl"
# _make's names: 20250301-142233, then 20250301-142233-2, ... within that second
_NAME = re.compile(r"(\d{8}-\d{6})(?:-(\d+))?")


def session_order(directory: Path) -> tuple[str, int]:
    """A sort key that puts the session directories in the order they were made: by the
    time in their name, then the `-2`, `-3`, ... added within one second, as numbers (name
    order put `-10` before `-2`)."""
    name = _NAME.fullmatch(directory.name)
    if name is None:  # not one of the app's names
        return directory.name, 1
    return name[1], int(name[2] or 1)


class SessionDir:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._path: Optional[Path] = None
        self._taken: set[str] = set()  # stems handed out (their files may still be writing)
        self._making = threading.Lock()  # the engine thread may make it (the trace) as an export does

    @property
    def created(self) -> bool:
        return self._path is not None

    @property
    def path(self) -> Path:
        """The directory, created on first use (OSError when it cannot be)."""
        with self._making:
            return self._path if self._path is not None else self._make()

    def _make(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        name = time.strftime("%Y%m%d-%H%M%S")
        for n in range(1, 1000):
            candidate = self.root / (name if n == 1 else f"{name}-{n}")
            try:
                candidate.mkdir()
            except FileExistsError:
                continue
            self._path = candidate
            return candidate
        raise FileExistsError(f"{self.root}/{name}: 999 session directories this second")

    def make_trace(self) -> Path:
        """The trace's path, the directory made now (the engine calls it once the session
        has opened: engine_thread.TraceTarget)."""
        return self.path / TRACE_NAME

    def round_stem(self, round_number: int) -> str:
        """A file stem for exporting a round that no earlier export used."""
        base = f"round-{round_number:04d}"
        for n in range(1, 10_000):
            stem = base if n == 1 else f"{base}-{n}"
            if stem not in self._taken and not any(
                    (self.path / f"{stem}{suffix}").exists() for suffix in (".json", ".npz")):
                self._taken.add(stem)
                return stem
        raise FileExistsError(f"{self.path}/{base}: 9999 exports of this round")
