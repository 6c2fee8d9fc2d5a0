"""Reading the JSON files a run keeps (data manifest, training state): a file that is cut
short, not UTF-8 or not an object is refused in one line naming it, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from dflash_tui.engine.errors import InputError


def read_json_object(path: Path, what: str) -> dict:
    """The object in `path`; InputError naming the file and `what` it should hold."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:  # ValueError: JSON and UTF-8 errors alike
        raise InputError(f"{path}: unreadable {what} ({error})") from None
    if not isinstance(value, dict):
        raise InputError(f"{path}: expected a JSON object ({what}), found {type(value).__name__}")
    return value
