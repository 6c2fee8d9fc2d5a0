"""Probes: per-buffer health statistics, declared once, computed on the device.

PIPELINE lists every buffer in the order data flows through a round; the first non-finite
buffer is searched in that order. Forward passes hand tensors to a ProbeSink; the sink
builds each buffer's statistics lazily and the stage evaluates them together with its own
outputs (one wait for the device), then reads them back in one transfer.
"""

from __future__ import annotations

from typing import Iterable, Optional

import mlx.core as mx
import numpy as np

from .records import STAGE_ORDER, ProbeRow

FP16_MAX = 65504.0

Names = tuple[str, ...]
# The buffers each stage probes: (before the layers, per layer, after the layers), each in
# the order data flows. Stages not listed probe nothing.
BUFFERS: dict[str, tuple[Names, Names, Names]] = {
    "context": (("capture", "ctx_combined", "ctx_normed"), ("ctx_k", "ctx_v"), ()),
    "draft": (
        (),
        (
            "x", "normed", "coeffs", "conv_p", "q", "k", "v", "attn_out", "sub_out", "conv_f",
            "x_mid", "normed2", "coeffs2", "conv_p2", "ffn_gate", "ffn_up", "ffn_act",
            "ffn_out", "conv_f2",
        ),
        ("final_normed", "logits", "hproj"),
    ),
    "verify": (("target_logits", "capture"), (), ()),
}
assert set(BUFFERS) <= set(STAGE_ORDER), "BUFFERS names a stage records.STAGES does not have"
# (stage, before the layers, per layer, after the layers) for every stage, in round order.
PIPELINE: tuple[tuple[str, Names, Names, Names], ...] = tuple(
    (stage, *BUFFERS.get(stage, ((), (), ()))) for stage in STAGE_ORDER
)


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


def nonfinite_rows(rows: mx.array) -> mx.array:
    """[m, n] -> [m] bool, unevaluated: the rows holding a NaN or an infinity, from each
    row's float32 sum (NaN and Inf carry through a sum; finite logits would have to pass
    ~1e33 each to overflow it). One pass, probes on or off: the draft stage counts the
    drafter's non-finite logit slots with it every round (~0.6 ms at the sample's
    vocabulary on a CPU, where counting the values, with isfinite, is ~1.5 ms)."""
    return ~mx.isfinite(rows.astype(mx.float32).sum(axis=-1))


def _moments(rows: mx.array) -> mx.array:
    """[m, n] -> [m, 4] float32: sum, sum of squares, min and max of each row. Four passes
    over the values; a row holding a NaN or an infinity has a non-finite sum, which is how
    the host knows to ask for `_stats` (a healthy buffer never needs more)."""
    x = rows.astype(mx.float32)
    return mx.stack([x.sum(axis=1), mx.square(x).sum(axis=1), x.min(axis=1), x.max(axis=1)],
                    axis=1)


def _stats(rows: mx.array) -> mx.array:
    """Exact statistics of each row of [m, n] whatever it holds: [m, 8] float32 columns nan,
    +inf, -inf, finite count, min, max, sum, sum of squares (the last four over the finite
    values; absmax is max(|min|, |max|), worked out on the host)."""
    x = rows.astype(mx.float32)
    finite = mx.isfinite(x)
    safe = mx.where(finite, x, 0.0)
    nan = mx.isnan(x).sum(axis=1)
    posinf = (x == mx.inf).sum(axis=1)
    nonfinite = (~finite).sum(axis=1)
    return mx.stack([
        nan, posinf, nonfinite - nan - posinf, x.shape[1] - nonfinite,
        mx.where(finite, x, mx.inf).min(axis=1),
        mx.where(finite, x, -mx.inf).max(axis=1),
        safe.sum(axis=1),
        mx.square(safe).sum(axis=1),
    ], axis=1).astype(mx.float32)


_DTYPE_NAMES: dict = {}


def _dtype_name(dtype) -> str:
    """'bfloat16' for mx.bfloat16 (remembered: a sink is called ~100 times a stage)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("mlx.core.", "")
    return name


class ProbeSink:
    """Collects (name, layer, tensor) from a forward pass. Disabled, it records nothing.

    Most buffers of a stage are small and many share a size, so the statistics are built
    per size group (the buffers stacked as rows) rather than per buffer: on a CPU, where
    each op's dispatch costs more than its arithmetic, that halves the probes' share of a
    round (benchmarks/bench_engine.py). The device computes four moments per buffer
    (`_moments`); only a buffer whose sums come back non-finite (a NaN, an infinity, or
    squares past float32's range) is measured again exactly (`_stats`), at the cost of one
    more wait, in a round where something has already gone wrong.
    """

    def __init__(self, stage: str, enabled: bool = True, keep_raw: bool = False):
        self.stage = stage
        self.enabled = enabled
        self.keep_raw = keep_raw
        self._meta: list[tuple[str, Optional[int], tuple, str]] = []
        self._tensors: list[mx.array] = []
        self._order: list[int] = []  # row of each buffer in the stacked table
        self._raw: list[mx.array] = []

    def __call__(self, name: str, layer: Optional[int], tensor: mx.array) -> None:
        if not self.enabled:
            return
        self._meta.append((name, layer, tuple(tensor.shape), _dtype_name(tensor.dtype)))
        self._tensors.append(tensor)

    def pending(self) -> list[mx.array]:
        """The arrays to evaluate with the stage's outputs (one wait for the stage)."""
        if not self._tensors:
            return []
        groups: dict[int, list[int]] = {}
        for i, tensor in enumerate(self._tensors):
            groups.setdefault(tensor.size, []).append(i)
        tables, self._order = [], [0] * len(self._tensors)
        row = 0
        for members in groups.values():
            rows = [self._tensors[i].reshape(1, -1) for i in members]
            tables.append(_moments(mx.concatenate(rows) if len(rows) > 1 else rows[0]))
            for i in members:
                self._order[i] = row
                row += 1
        self._stacked = mx.concatenate(tables) if len(tables) > 1 else tables[0]
        # float32 copies, evaluated in the same wait (numpy has no bfloat16)
        self._raw = [t.astype(mx.float32) for t in self._tensors] if self.keep_raw else []
        return [self._stacked, *self._raw]

    def rows(self) -> list[ProbeRow]:
        if not self._tensors:
            return []
        moments = np.array(self._stacked)[self._order]  # one device->host transfer per stage
        sizes = np.array([t.size for t in self._tensors], dtype=np.float64)
        # as _stats lays them out: nan, +inf, -inf, finite count, min, max, sum, squares
        table = np.column_stack([np.zeros((len(sizes), 3)), sizes, moments[:, 2],
                                 moments[:, 3], moments[:, 0], moments[:, 1]])
        unhealthy = np.flatnonzero(~np.isfinite(moments[:, :2]).all(axis=1))
        if unhealthy.size:
            exact = [_stats(self._tensors[i].reshape(1, -1)) for i in unhealthy]
            table[unhealthy] = np.array(mx.concatenate(exact))
        return _rows(self.stage, self._meta, table)

    def raw(self) -> dict[str, np.ndarray]:
        if not self.keep_raw:
            return {}
        out = {}
        for (name, layer, _, _), tensor in zip(self._meta, self._raw):
            key = f"{self.stage}/{name}" if layer is None else f"{self.stage}/L{layer}/{name}"
            out[key] = np.array(tensor)
        return out


def _rows(stage: str, metas: list, table: np.ndarray) -> list[ProbeRow]:
    """ProbeRows from _stats' columns, one row per buffer. The derived columns are worked
    out for the whole table at once: a stage has ~100 buffers at real scale, and building
    the rows one by one took 1.3 ms of the 4.4 ms the probes added to an H200 round."""
    counts = table[:, 3]
    has = counts > 0
    lo, hi = table[:, 4], table[:, 5]
    with np.errstate(divide="ignore", invalid="ignore"):
        absmax = np.where(has, np.maximum(np.abs(lo), np.abs(hi)), 0.0)
        mean = table[:, 6] / counts
        rms = np.sqrt(table[:, 7] / counts)
        headroom = np.log2(FP16_MAX / absmax)
    # null when there is no finite value; headroom also when every finite value is zero
    present = has.tolist()
    bounded = (has & (absmax > 0)).tolist()
    # plain ints and floats: a row built from lists is a fifth cheaper than from numpy scalars
    flags = table[:, :3].astype(np.int64).tolist()
    columns = zip(metas, flags, present, bounded, lo.tolist(), hi.tolist(), absmax.tolist(),
                  mean.tolist(), rms.tolist(), headroom.tolist())
    return [ProbeRow(
        stage=stage, layer=layer, name=name, shape=shape, dtype=dtype,
        nan=nan, posinf=posinf, neginf=neginf,
        min=l if ok else None, max=h if ok else None, absmax=a if ok else None,
        mean=m if ok else None, rms=r if ok else None, fp16_headroom_bits=hr if bound else None,
    ) for (name, layer, shape, dtype), (nan, posinf, neginf), ok, bound, l, h, a, m, r, hr in columns]
