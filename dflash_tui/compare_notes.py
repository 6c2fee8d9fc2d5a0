"""One-line notes about a --compare reference that the TUI and probe show (pure Python: the
SPEC and the session's info are enough).

- TOL_HINT: a reference that computes with other numbers (quantized weights, another float
  type) sits about 1% off in every buffer, so at the default --compare-tol (0.01) it
  "diverges" in every round (docs/COMPARE.md: 8-bit in 521 of 521 bench rounds). The
  diverge breakpoint then stops every round; the tolerance is the user's to raise.
- slow_on_cpu: MLX's CPU quantized matmul in float16 runs some 35 times slower than in
  float32 (docs/COMPARE.md, "What it costs"): on the sample a quantized float16
  reference makes a round of about half a second take ten.
"""

from __future__ import annotations

from typing import Optional

from .engine.compare_spec import DEFAULT_TOLERANCE, CompareSpec, parse_spec
from .engine.errors import ParameterError
from .engine.records import SessionInfo

TOL_HINT_AFTER = 3  # diverge stops in consecutive rounds before TOL_HINT is said
TOL_HINT = ("--compare-tol sets the bar: at the default 0.01 a quantized or other-dtype "
            "reference diverges every round (try --compare-tol 0.05)")
SLOW_ON_CPU = ("a quantized float16 reference is slow on a CPU: MLX's float16 quantized "
               "matmul runs ~35x slower than float32 there (docs/COMPARE.md)")


def _spec(info: Optional[SessionInfo]) -> Optional[CompareSpec]:
    if info is None or info.compare is None:
        return None
    try:
        return parse_spec(info.compare)
    except ParameterError:  # replay: a reference directory that is not here any more
        return None


def _quantized(info: SessionInfo, spec: CompareSpec) -> bool:
    """The reference's drafter computes with packed weights: the engine says so
    (compare_quantization); a replay of a trace older than that field has only `bits=`."""
    return info.compare_quantization is not None or spec.bits is not None


def _other_weights(info: SessionInfo, spec: CompareSpec) -> bool:
    """The reference's weights hold other values than the drafter's: quantized again
    (`bits=`), or packed otherwise. A copy of a quantized drafter (residual-scale=,
    layer-offset=) holds the very same packed values: its label is the drafter's."""
    return spec.bits is not None or (info.compare_quantization is not None
                                     and info.compare_quantization != info.drafter_quantization)


def tol_hint_applies(info: Optional[SessionInfo]) -> bool:
    """The default tolerance against a reference computing with other numbers."""
    spec = _spec(info)
    if spec is None or info.compare_tol != DEFAULT_TOLERANCE:
        return False
    return _other_weights(info, spec) or (spec.dtype is not None and spec.dtype != info.dtype)


def slow_on_cpu(info: Optional[SessionInfo]) -> Optional[str]:
    """SLOW_ON_CPU where the reference runs quantized float16 on a CPU (its dtype unset is
    the drafter's) with MLX's quantized kernels: not where the loader dequantized it
    (compare_dequantized, the CPU's default without --keep-quantized)."""
    spec = _spec(info)
    if spec is None or info.backend != "cpu" or (spec.dtype or info.dtype) != "float16" \
            or info.compare_dequantized:
        return None
    return SLOW_ON_CPU if _quantized(info, spec) else None
