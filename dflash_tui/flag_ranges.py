"""The range of every numeric flag the TUI, `probe`, `bench`, `replay` and `export` share,
checked in one place.

argparse only knows a flag's type: `--temperature nan`, `--max-tokens 0` or `--rounds -3`
parse fine and used to fail late (a NumPy traceback), run zero rounds, or be read as "use
the default". cli.parse calls check() right after parsing, so each command refuses the same
value with the same line before anything loads.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Callable

from .engine.errors import InputError


@dataclass(frozen=True)
class Range:
    flag: str
    holds: Callable[[float], bool]
    expected: str


def _at_least_one(value) -> bool:
    return value >= 1


RANGES = {  # argparse dest -> range; a flag a command lacks (or left unset) is skipped
    "temperature": Range("--temperature", lambda v: math.isfinite(v) and v >= 0,
                         "a finite number: 0 for greedy, or more to sample"),
    "seed": Range("--seed", lambda v: v >= 0, "0 or more"),
    "block": Range("--block", _at_least_one, "at least 1 proposal per round"),
    "max_tokens": Range("--max-tokens", _at_least_one, "at least 1 token"),
    "rounds": Range("--rounds", _at_least_one, "at least 1 round"),
    "limit": Range("--limit", _at_least_one, "at least 1 prompt per workload"),
    "compare_tol": Range("--compare-tol", lambda v: math.isfinite(v) and v >= 0,
                         "a relative error of 0 or more, e.g. 0.01"),
    "keep_rounds": Range("--keep-rounds", _at_least_one, "at least 1 full record in memory"),
}


def check(args: argparse.Namespace) -> None:
    """Refuse the first flag whose value is out of its range, naming flag, value and range."""
    for dest, allowed in RANGES.items():
        value = getattr(args, dest, None)
        if value is not None and not allowed.holds(value):
            raise InputError(f"{allowed.flag} {value}: expected {allowed.expected}")
