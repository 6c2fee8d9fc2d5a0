"""Probes: per-buffer health statistics, declared once, computed on the device.

PIPELINE lists every buffer in the order data flows through a round; the first non-finite
buffer is searched in that order. Forward passes hand tensors to a ProbeSink; the sink
builds each buffer's statistics lazily and the stage evaluates them together with its own
outputs in one `mx.eval`, then reads them back in one transfer.
"""

from __future__ import annotations

import math
from typing import Iterable, Optional

import mlx.core as mx
import numpy as np

from .records import ProbeRow

FP16_MAX = 65504.0

# (stage, buffer names before the layers, per-layer names, names after the layers)
PIPELINE: tuple[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...] = (
    ("context", ("capture", "ctx_combined", "ctx_normed"), ("ctx_k", "ctx_v"), ()),
    (
        "draft",
        (),
        (
            "x", "normed", "coeffs", "conv_p", "q", "k", "v", "attn_out", "sub_out", "conv_f",
            "x_mid", "normed2", "coeffs2", "conv_p2", "ffn_gate", "ffn_up", "ffn_act",
            "ffn_out", "conv_f2",
        ),
        ("final_normed", "logits", "hproj"),
    ),
    ("select", (), (), ()),
    ("verify", ("target_logits", "capture"), (), ()),
    ("commit", (), (), ()),
)
STAGES = tuple(stage for stage, *_ in PIPELINE)


def pipeline_key(row: ProbeRow) -> tuple:
    """Sort key placing a probe row at its place in the round's data flow."""
    for s, (stage, before, per_layer, after) in enumerate(PIPELINE):
        if stage != row.stage:
            continue
        if row.layer is None:
            if row.name in before:
                return (s, 0, 0, before.index(row.name))
            if row.name in after:
                return (s, 2, 0, after.index(row.name))
            return (s, 3, 0, 0)
        order = per_layer.index(row.name) if row.name in per_layer else len(per_layer)
        return (s, 1, row.layer, order)
    return (len(PIPELINE), 0, 0, 0)


def first_nonfinite(rows: Iterable[ProbeRow]) -> Optional[ProbeRow]:
    bad = [r for r in rows if r.nonfinite]
    return min(bad, key=pipeline_key) if bad else None


def _stats(x: mx.array) -> mx.array:
    """[nan, +inf, -inf, finite count, min, max, absmax, sum, sum of squares] in float32."""
    x = x.astype(mx.float32).reshape(-1)
    finite = mx.isfinite(x)
    zero = mx.zeros_like(x)
    safe = mx.where(finite, x, zero)
    return mx.stack([
        mx.isnan(x).sum().astype(mx.float32),
        mx.isposinf(x).sum().astype(mx.float32),
        mx.isneginf(x).sum().astype(mx.float32),
        finite.sum().astype(mx.float32),
        mx.where(finite, x, mx.inf).min(),
        mx.where(finite, x, -mx.inf).max(),
        mx.abs(safe).max(),
        safe.sum(),
        (safe * safe).sum(),
    ])


class ProbeSink:
    """Collects (name, layer, tensor) from a forward pass. Disabled, it records nothing."""

    def __init__(self, stage: str, enabled: bool = True, keep_raw: bool = False):
        self.stage = stage
        self.enabled = enabled
        self.keep_raw = keep_raw
        self._meta: list[tuple[str, Optional[int], tuple, str]] = []
        self._stats: list[mx.array] = []
        self._raw: list[mx.array] = []

    def __call__(self, name: str, layer: Optional[int], tensor: mx.array) -> None:
        if not self.enabled:
            return
        self._meta.append((name, layer, tuple(tensor.shape), str(tensor.dtype).replace("mlx.core.", "")))
        self._stats.append(_stats(tensor))
        if self.keep_raw:
            self._raw.append(tensor)

    def pending(self) -> list[mx.array]:
        """The arrays to evaluate with the stage's outputs (one mx.eval for the stage)."""
        if not self._stats:
            return []
        self._stacked = mx.stack(self._stats)
        return [self._stacked, *self._raw]

    def rows(self) -> list[ProbeRow]:
        if not self._stats:
            return []
        table = np.array(self._stacked)  # one device->host transfer for the whole stage
        return [_row(self.stage, meta, stats) for meta, stats in zip(self._meta, table)]

    def raw(self) -> dict[str, np.ndarray]:
        out = {}
        for (name, layer, _, _), tensor in zip(self._meta, self._raw):
            key = f"{self.stage}/{name}" if layer is None else f"{self.stage}/L{layer}/{name}"
            out[key] = np.array(tensor.astype(mx.float32))
        return out


def _row(stage: str, meta, s: np.ndarray) -> ProbeRow:
    name, layer, shape, dtype = meta
    nan, posinf, neginf, count = (int(v) for v in s[:4])
    lo, hi, absmax, total, squares = (float(v) for v in s[4:])
    has = count > 0
    # null when there is no nonzero finite value (all zero: headroom is unbounded)
    headroom = math.log2(FP16_MAX / absmax) if has and absmax > 0 else None
    return ProbeRow(
        stage=stage, layer=layer, name=name, shape=shape, dtype=dtype,
        nan=nan, posinf=posinf, neginf=neginf,
        min=lo if has else None, max=hi if has else None,
        absmax=absmax if has else None,
        mean=total / count if has else None,
        rms=math.sqrt(squares / count) if has else None,
        fp16_headroom_bits=headroom,
    )
