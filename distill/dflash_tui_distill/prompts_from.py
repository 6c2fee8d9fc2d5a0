"""`--prompts-from FILE`: prompts of real text, with their kind, split and source.

FILE is JSON lines, one prompt each: {"text", "kind", "split"} and optionally "source",
"item" and "form" (corpus.py writes such files). "split" is "train" or "validation": the
file decides which of its prompts select the model, so a corpus keeps related items on one
side. Kinds are short names (real-code, real-math, real-prose) that the per-kind
numbers are reported under. A line that is not such an object is refused, naming the line.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from dflash_tui.engine.errors import InputError

SPLITS = ("train", "validation")
_KIND = re.compile(r"^[a-z][a-z0-9-]{0,31}$")


def read_prompts_from(path: str) -> list[dict]:
    """[{"text", "kind", "split", "source"}] in file order."""
    where = f"--prompts-from {path}"
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(f"{where}: no such file (expected JSON lines of prompts)") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{where}: unreadable ({error})") from None
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{where} line {n}: not JSON ({error.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("text"), str) or not row["text"].strip():
            raise InputError(f"{where} line {n}: expected an object with a non-empty \"text\"")
        if not isinstance(row.get("kind"), str) or not _KIND.match(row["kind"]):
            raise InputError(f"{where} line {n}: \"kind\" {row.get('kind')!r} is not a short lower-case name")
        if row.get("split") not in SPLITS:
            raise InputError(f"{where} line {n}: \"split\" {row.get('split')!r}: expected train or validation")
        rows.append({"text": row["text"], "kind": row["kind"], "split": row["split"],
                     "source": str(row.get("source") or Path(path).name)})
    if not rows:
        raise InputError(f"{where}: no prompts in the file")
    return rows


def describe(path: str) -> dict:
    """What the drafter's record keeps of the file: its hash and, when corpus.py's
    sources.json lies beside it, each source's archive, archive hash and licence."""
    out = {"sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest()}
    beside = Path(path).with_name("sources.json")
    try:
        sources = json.loads(beside.read_text(encoding="utf-8"))["sources"]
    except (OSError, ValueError, KeyError, TypeError):
        return out
    out["sources"] = {name: {k: v for k, v in s.items() if k in ("archive", "sha256", "licence", "note")}
                      for name, s in sources.items()}
    return out
