"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every writer in the project (checkpoints, snapshots, traces' neighbours, bench tables,
training state) goes through here, so "no data lost on a full disk or a kill" is one
piece of code.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_atomic(path: Path | str, data: bytes | str) -> None:
    """Write to a temp file beside `path`, fsync, then rename it over `path`."""
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; these are ordinary files
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json_atomic(path: Path | str, obj: Any, indent: int = 2) -> None:
    write_atomic(path, json.dumps(obj, indent=indent) + "\n")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
