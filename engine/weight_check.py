"""Non-finite weights of a drafter or a target, found once when a checkpoint loads.

A NaN in one weight makes every buffer computed from it NaN, so the probes show where the
NaN starts (`draft L2 normed2`) but not which tensor holds it; and a weight too large for
float16 becomes Inf only when `--dtype float16` casts it, so the stored checkpoint looks
fine. Either way the run is worth stepping (the probes show what follows), so these are
notes that name the file and the tensor, not refusals. A target's weights get the same
notes (a NaN in its layers shows in the probes first as the context capture the drafter
reads, a NaN in its lm_head or embedding as the drafter's own buffers, which borrow them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import mlx.core as mx
import numpy as np

NAMED = 3  # tensors named one by one; the rest are counted (a bad cast can hit hundreds)


@dataclass(frozen=True)
class WeightNotes:
    """What load_drafter found; a frozen object rather than a tuple, since an mlx Module keeps
    a tuple it is given as a child of its parameter tree."""

    notes: tuple[str, ...] = ()


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}" if n == 1 else f"{n:,} {what}s"


def nonfinite_weights(stored: dict[str, mx.array], cast: dict[str, mx.array],
                      sources: dict[str, Path], dtype_name: str) -> WeightNotes:
    """A note per float tensor of `cast` (the weights as the drafter computes with them) that
    holds a NaN or an Inf, naming its file; where the stored tensor was finite, the cast made
    it so, and the note gives the stored absmax. Packed quantized values (uint32) cannot be
    non-finite; their float scales and biases are checked."""
    names = [n for n, w in cast.items() if mx.issubdtype(w.dtype, mx.floating)]
    if not names:
        return WeightNotes()
    return WeightNotes(_notes(_counted(cast, names), cast, stored.get, sources, dtype_name,
                              whose="drafter"))


def nonfinite_target_weights(weights: dict[str, mx.array], sources: dict[str, Path],
                             dtype_name: str, stored: Callable[[str], Optional[mx.array]],
                             label: Callable[[str], str] = repr) -> WeightNotes:
    """The drafter's notes for a target's weights, as loaded and cast (evaluated already):
    a note per float tensor holding a NaN or an Inf, naming its file. `stored(name)` gives
    the tensor as its file holds it, where it can be found (None: a GGUF, a tensor mlx-lm
    renamed), to tell a weight non-finite as stored from one the cast overflowed; `label(name)`
    the tensor as the note names it, quoted, by its name in its file (a GGUF's
    `'blk.1.ffn_norm.weight'`).

    A target is up to thousands of times the drafter's size, so not every value is
    counted: one sum per tensor finds the suspects (a NaN or an Inf carries through a sum;
    a finite tensor's float32 sum overflows only past ~3e38, and the exact count then
    clears it), and only they are counted. On the CPU that sum runs in numpy on the
    weights' own memory (no copy): ~60 ms for 135M float32 values (the sample dequantized,
    measured on 2 CPU cores), where MLX's CPU sum took ~210 ms and counting NaNs and Infs
    ~420 ms, against a load of ~1.2 s (load_target checks a layer it dequantized in its
    scales and biases instead: ~8 ms on the sample). On a GPU it is one reduction per
    tensor at memory speed. Either way it reads the weights once more, as the load just
    read them from disk, which costs more."""
    suspects = _suspects(weights)
    if not suspects:
        return WeightNotes()
    bad = _counted(weights, suspects)
    return WeightNotes(_notes(bad, weights, stored, sources, dtype_name, whose="target",
                              label=label))


def _suspects(weights: dict[str, mx.array]) -> list[str]:
    """The float tensors whose sum is not finite (every one holding a NaN or an Inf, and
    the rare finite one whose sum overflows)."""
    names = [n for n, w in weights.items() if mx.issubdtype(w.dtype, mx.floating)]
    on_host = mx.default_device() == mx.cpu
    sums: dict[str, float] = {}
    lazy = []
    with np.errstate(over="ignore", invalid="ignore"):  # a NaN sum is the answer sought
        for name in names:
            w = weights[name]
            if on_host and w.dtype in (mx.float32, mx.float16):  # numpy has no bfloat16
                try:
                    sums[name] = float(np.asarray(w).sum(dtype=np.float32))
                    continue
                except (TypeError, ValueError, RuntimeError):  # no buffer to view: MLX sums it
                    pass
            lazy.append(name)
    if lazy:  # in the tensor's own dtype: a float16 sum that overflows is counted exactly
        sums.update(zip(lazy, mx.stack([weights[n].sum().astype(mx.float32)
                                        for n in lazy]).tolist()))
    return [n for n in names if not math.isfinite(sums[n])]


def _counted(weights: dict[str, mx.array], names: list[str]) -> list[tuple[str, int, int]]:
    """(name, NaNs, Infs) of each of `names` that holds either."""
    counts = mx.stack([mx.stack([mx.isnan(weights[n]).sum(), mx.isinf(weights[n]).sum()])
                       for n in names]).tolist()
    return [(n, nans, infs) for n, (nans, infs) in zip(names, counts) if nans or infs]


def _notes(bad: list[tuple[str, int, int]], cast: dict[str, mx.array],
           stored: Callable[[str], Optional[mx.array]], sources: dict[str, Path],
           dtype_name: str, whose: str, label: Callable[[str], str] = repr) -> tuple[str, ...]:
    lead = "the target's " if whose == "target" else ""
    notes = []
    for name, nans, infs in bad[:NAMED]:
        where = (f"{lead}{sources[name].name}: tensor {label(name)}" if name in sources
                 else f"{lead}tensor {label(name)}")
        held = " and ".join(_count(k, what) for k, what in ((nans, "NaN"), (infs, "Inf")) if k)
        of = f"of {cast[name].size:,} values"
        as_stored = stored(name)
        # no tensor as stored to look at (a GGUF's): an Inf in float16 may be the file's or
        # the cast's (or MLX's, which reads a GGUF's K-quants and BF16 as float16)
        if as_stored is None and infs and cast[name].dtype == mx.float16:
            notes.append(f"{where} holds {held} ({of}) as loaded in float16, whose range ends "
                         "at 65504 (the file's values may be finite beyond it): the buffers "
                         "computed from it will be non-finite")
        # the cast is to blame only where it changed the dtype of a tensor finite as stored
        elif (as_stored is None or as_stored.dtype == cast[name].dtype
                or not mx.all(mx.isfinite(as_stored)).item()):
            notes.append(f"{where} holds {held} ({of}): the buffers computed from it will be "
                         "non-finite")
        else:
            absmax = mx.abs(as_stored.astype(mx.float32)).max().item()
            notes.append(f"{where} holds {held} ({of}) once cast to {dtype_name}: its largest "
                         f"value, {absmax:.4g}, is beyond {dtype_name}'s range")
    if len(bad) > NAMED:
        notes.append(f"{len(bad) - NAMED} more {whose} tensors hold NaN or Inf")
    return tuple(notes)
