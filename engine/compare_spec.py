"""What `--compare SPEC` names: the reference configuration of the compare lab
(docs/COMPARE.md). Pure Python, so the CLI checks a SPEC before loading any model.

SPEC is a drafter directory (another checkpoint, a quantized copy), or comma-separated
overrides of the primary drafter, each unset one being the primary's:

    dtype=float32|float16|bfloat16   the float type the reference computes in
    bits=B[,group=G]                 a copy quantized with MLX's own quantization (G: 64)
    layer-offset=K                   the target layers it reads, shifted by K (as --layer-offset)
    residual-scale=S                 its residual stream divided by S (engine/drafter.py)

e.g. `dtype=float16,residual-scale=8`.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .draft_config import QUANT_BITS, QUANT_GROUP_SIZES
from .errors import InputError, ParameterError

FLOAT_DTYPES = ("float32", "float16", "bfloat16")
KEYS = ("dtype", "bits", "group", "layer-offset", "residual-scale")
DEFAULT_GROUP_SIZE = 64
DEFAULT_TOLERANCE = 1e-2
# residual-scale=S divides the drafter's RMSNorm epsilon by S^2 (engine/drafter.py): within
# these bounds any epsilon from 1e-12 to 1 stays a finite, normal float32 (1e-24 to 1e12).
RESIDUAL_SCALE_RANGE = (1e-6, 1e6)


@dataclass(frozen=True)
class CompareSpec:
    text: str  # as the user wrote it: the record's `spec`
    draft_dir: Optional[Path] = None  # another drafter; None: the primary, overridden
    dtype: Optional[str] = None
    bits: Optional[int] = None
    group_size: Optional[int] = None
    layer_offset: Optional[int] = None
    residual_scale: float = 1.0

    @property
    def copies_primary(self) -> bool:
        """Overrides that change the primary's weights or forward, so the reference needs a
        copy of its own (a layer offset alone shares the primary's modules)."""
        return self.draft_dir is None and (
            self.dtype is not None or self.bits is not None or self.residual_scale != 1.0)


def parse_spec(text: str) -> CompareSpec:
    """A SPEC checked in full: one ParameterError (named `compare`, shown as `--compare`)
    for the first thing wrong with it."""
    if not isinstance(text, str) or not text.strip():
        raise ParameterError("compare", text, "expected a drafter directory or overrides "
                             f"KEY=VALUE[,...] ({', '.join(KEYS)})")
    text = text.strip()
    path = Path(text).expanduser()
    if path.is_dir():
        return CompareSpec(text, draft_dir=path)
    # Commas and no path separator: overrides gone wrong (`,`, `bits4,dtype`), not a folder
    overrides = "," in text and "/" not in text and not path.exists()
    if "=" not in text and not overrides:
        problem = "is a file, not a drafter directory" if path.exists() else "no such directory"
        raise ParameterError("compare", text, f"{problem} (a SPEC is a drafter directory or "
                             f"KEY=VALUE overrides: {', '.join(KEYS)})")
    values: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            raise ParameterError("compare", text, "an empty override: expected KEY=VALUE[,KEY=VALUE...], "
                                 f"one on each side of every comma (keys: {', '.join(KEYS)})")
        key, sep, value = (s.strip() for s in part.partition("="))
        if not sep or not key:
            raise ParameterError("compare", text, f"{part.strip()!r} is not KEY=VALUE "
                                 f"(keys: {', '.join(KEYS)})")
        if key not in KEYS:
            raise ParameterError("compare", text, f"unknown key {key!r} (expected one of "
                                 f"{', '.join(KEYS)})")
        if key in values:
            raise ParameterError("compare", text, f"{key} is given twice")
        values[key] = value
    if "group" in values and "bits" not in values:
        raise ParameterError("compare", text, "group sets the group size of bits=B; give bits too")
    return CompareSpec(
        text,
        dtype=_choice(values, "dtype", FLOAT_DTYPES, str, text),
        bits=_choice(values, "bits", QUANT_BITS, int, text),
        group_size=_choice(values, "group", QUANT_GROUP_SIZES, int, text)
        or (DEFAULT_GROUP_SIZE if "bits" in values else None),
        layer_offset=_integer(values, "layer-offset", text),
        residual_scale=_scale(values, text),
    )


@contextmanager
def named_as_reference(spec: CompareSpec):
    """An InputError raised inside, named as the reference's: `--compare DIR: DIR/config.json:
    missing ...`. The drafter checks and loader are --draft's too, whose folder's line
    starts `--draft DIR:` (paths.named_as_draft)."""
    try:
        yield
    except InputError as error:
        raise InputError(f"--compare {spec.text}: {error}") from None


def check_greedy(temperature: float) -> None:
    """The reference's accepted count is the target's greedy verdict on its proposals; a
    sampled decode has no single one."""
    if temperature > 0:
        raise ParameterError("temperature", temperature,
                             "--compare counts the proposals the target accepts greedily; "
                             "it needs temperature 0")


def check_tolerance(tolerance: float) -> float:
    if not isinstance(tolerance, (int, float)) or not math.isfinite(tolerance) or tolerance < 0:
        raise ParameterError("compare_tol", tolerance,
                             "expected a relative error of 0 or more, e.g. 0.01")
    return float(tolerance)


def _choice(values: dict, key: str, allowed: tuple, kind: type, text: str):
    if key not in values:
        return None
    try:
        value = kind(values[key])
    except ValueError:
        value = None
    if value not in allowed:
        raise ParameterError("compare", text, f"{key}={values[key]}: expected one of "
                             f"{', '.join(map(str, allowed))}")
    return value


def _integer(values: dict, key: str, text: str) -> Optional[int]:
    if key not in values:
        return None
    try:
        return int(values[key])
    except ValueError:
        raise ParameterError("compare", text,
                             f"{key}={values[key]}: expected an integer") from None


def _scale(values: dict, text: str) -> float:
    raw = values.get("residual-scale")
    if raw is None:
        return 1.0
    try:
        scale = float(raw)
    except ValueError:
        scale = math.nan
    if not math.isfinite(scale) or scale <= 0:
        raise ParameterError("compare", text,
                             f"residual-scale={raw}: expected a number above 0, e.g. 8")
    if not RESIDUAL_SCALE_RANGE[0] <= scale <= RESIDUAL_SCALE_RANGE[1]:
        raise ParameterError("compare", text,
                             f"residual-scale={raw}: expected a number from 1e-6 to 1e6, e.g. 8 "
                             "(the drafter's norms divide their epsilon by S^2, which must stay "
                             "a finite, normal float32)")
    return scale
