"""The range of every numeric flag the TUI, `probe`, `bench`, `replay` and `export` share,
checked in one place.

argparse only knows a flag's type: `--temperature nan`, `--max-tokens 0` or `--rounds -3`
parse fine and used to fail late (a NumPy traceback), run zero rounds, or be read as "use
the default". cli.parse calls check() right after parsing, so each command refuses the same
value with the same line before anything loads.

A refused value is echoed as it was typed (`--compare-tol -1: ...`): the float flags parse
with typed_float, which keeps the text beside the number (Python's `-1.0` read as something
the user had not written); plain() turns them back into floats once every check is done.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Callable

from .engine.errors import InputError


class TypedFloat(float):
    """A float flag's value and the text it was typed as (`typed`)."""

    typed: str


def typed_float(text: str) -> float:
    """argparse's type= for a float flag: float(text), keeping `text` for the echo."""
    value = TypedFloat(text)  # a ValueError as float()'s: argparse says `invalid float value`
    value.typed = text
    return value


typed_float.__name__ = "float"  # argparse's `invalid float value: 'x'` names the type by it


def shown(value) -> str:
    """A flag's value as an error line echoes it: as typed where it was kept."""
    return getattr(value, "typed", None) or str(value)


def plain(args: argparse.Namespace) -> None:
    """Every TypedFloat in `args` back to a plain float: what runs never sees the wrapper."""
    for dest, value in vars(args).items():
        if isinstance(value, TypedFloat):
            setattr(args, dest, float(value))


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
            raise InputError(f"{allowed.flag} {shown(value)}: expected {allowed.expected}")
