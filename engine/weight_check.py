"""Non-finite drafter weights, found once when a checkpoint loads.

A NaN in one weight makes every buffer computed from it NaN, so the probes show where the
NaN starts (`draft L2 normed2`) but not which tensor holds it; and a weight too large for
float16 becomes Inf only when `--dtype float16` casts it, so the stored checkpoint looks
fine. Either way the run is worth stepping (the probes show what follows), so these are
notes that name the file and the tensor, not refusals.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx

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
    counts = mx.stack([mx.stack([mx.isnan(cast[n]).sum(), mx.isinf(cast[n]).sum()])
                       for n in names]).tolist()
    bad = [(n, nans, infs) for n, (nans, infs) in zip(names, counts) if nans or infs]
    notes = []
    for name, nans, infs in bad[:NAMED]:
        where = f"{sources[name].name}: tensor {name!r}" if name in sources else f"tensor {name!r}"
        held = " and ".join(_count(k, what) for k, what in ((nans, "NaN"), (infs, "Inf")) if k)
        of = f"of {cast[name].size:,} values"
        as_stored = stored[name]
        if not mx.all(mx.isfinite(as_stored)).item():
            notes.append(f"{where} holds {held} ({of}): the buffers computed from it will be "
                         "non-finite")
        else:
            absmax = mx.abs(as_stored.astype(mx.float32)).max().item()
            notes.append(f"{where} holds {held} ({of}) once cast to {dtype_name}: its largest "
                         f"value, {absmax:.4g}, is beyond {dtype_name}'s range")
    if len(bad) > NAMED:
        notes.append(f"{len(bad) - NAMED} more drafter tensors hold NaN or Inf")
    return WeightNotes(tuple(notes))
