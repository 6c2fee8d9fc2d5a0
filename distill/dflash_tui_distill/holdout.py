"""The test sets are held out: the drafter is judged on them, so they are never trained on.

Two test sets by default: sample_prompts/ (what the bench reports) and test_prompts/ (real
prompts from sources the training corpus does not read; test_prompts/README.md). Neither
decides anything during training: model selection uses the validation split of the data.

Prompt files are laid out as sample_prompts/README.md says: one prompt per *.txt file in a
workload folder; hidden files and folders are not prompts. A held-out "unit" is each
file's whole text and each of its non-blank lines of at least MIN_CHARS characters (whatever the bench cuts a file into, every piece is covered).
A training prompt clashes with a unit when, after lower-casing and collapsing whitespace,
one contains the other. Short units are only compared for equality, so a one-word line
does not rule out every prompt that uses the word.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Optional, Sequence

from dflash_tui.engine.errors import InputError

MIN_CHARS = 20


def normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


class Holdout:
    def __init__(self, units: Iterable[str], source: str = ""):
        self.source = source
        self.units = sorted({normalize(u) for u in units if normalize(u)})

    def __len__(self) -> int:
        return len(self.units)

    def clashes(self, text: str) -> Optional[str]:
        """The held-out unit `text` clashes with, or None."""
        norm = normalize(text)
        if not norm:
            return None
        for unit in self.units:
            if unit == norm:
                return unit
            if len(unit) >= MIN_CHARS and len(norm) >= MIN_CHARS and (unit in norm or norm in unit):
                return unit
        return None


def default_test_sets() -> list[Path]:
    """The repository's two test sets (absent from an installed copy without the prompts)."""
    from dflash_tui.sample import PROMPTS_DIR

    return [d for d in (PROMPTS_DIR, PROMPTS_DIR.parent / "test_prompts") if d.is_dir()]


def read_holdouts(directories: Optional[Sequence[str | Path]]) -> Holdout:
    """Every prompt under each directory (default: the repository's two test sets)."""
    chosen = list(directories) if directories else default_test_sets()
    parts = [read_holdout(d) for d in chosen]
    return Holdout([u for part in parts for u in part.units], ", ".join(str(d) for d in chosen))


def read_holdout(directory: str | Path) -> Holdout:
    """Every prompt under `directory`."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"--holdout {directory}: no such directory (expected a folder of prompt files)")
    units = []
    for path in sorted(directory.rglob("*.txt")):
        hidden = any(part.startswith(".") for part in path.relative_to(directory).parts)
        if hidden or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"{path}: unreadable held-out prompt ({error})") from None
        units.append(text)
        units.extend(line for line in text.splitlines() if len(line.strip()) >= MIN_CHARS)
    return Holdout(units, str(directory))


def refuse_clashes(texts: Iterable[tuple[str, str]], holdout: Holdout) -> None:
    """Raise if any (where, text) clashes with a test prompt."""
    for where, text in texts:
        unit = holdout.clashes(text)
        if unit is not None:
            raise InputError(
                f"{where}: prompt {text[:60]!r} matches the test prompt {unit[:60]!r} from "
                f"{holdout.source} (test prompts are never trained on nor used to select a model)")
