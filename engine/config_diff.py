"""What a `--compare DIR` drafter's config.json says otherwise than the drafter's.

A reference whose rope_theta, mask_token_id or target_layer_ids differ from the drafter's
parts from it at the first buffer the field touches (ctx_k, the embedded block `x`, the
capture), and the drift table can name only that buffer. Naming the field too turns "the
two part at context L0 ctx_k" into "rope_theta differs". Pure Python: no MLX.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from .draft_config import DFLASH_KEYS, DraftConfig

# Not the model's arithmetic: a quantized reference says so itself (its quantization, in
# the session's info); `extra` is the training recipe and the like; `conflicts` are notes.
SKIPPED = frozenset({"quantization", "extra", "conflicts"})
NAMED = 4  # fields named one by one; a reference of another shape differs in many


def _field_name(name: str) -> str:
    if name == "kind":
        return "architectures"
    return f"dflash_config.{name}" if name in DFLASH_KEYS else name


def _shown(value: Any) -> str:
    return repr(list(value)) if isinstance(value, tuple) else repr(value)


def config_differences(drafter: DraftConfig, reference: DraftConfig) -> tuple[str, ...]:
    """`field = reference's value (the drafter: its value)`, for every field of the model
    that differs, in config.json's names."""
    out = []
    for f in fields(DraftConfig):
        if f.name in SKIPPED:
            continue
        mine, theirs = getattr(drafter, f.name), getattr(reference, f.name)
        if mine != theirs:
            out.append(f"{_field_name(f.name)} = {_shown(theirs)} (the drafter: {_shown(mine)})")
    return tuple(out)


def differences_note(drafter: DraftConfig, reference: DraftConfig, layer_offset: int = 0,
                     drafter_reads: tuple[int, ...] = (),
                     reference_reads: tuple[int, ...] = ()) -> str | None:
    """One line for the session's notes, or None where the configs agree. A directory
    reference runs at the session's --layer-offset too: where that makes the two read other
    target layers, the layers read are said as well (a drafter whose wrong ids the offset
    corrects, compared with the right one, then differs from a reference shifted past them)."""
    found = config_differences(drafter, reference)
    if layer_offset and drafter_reads != reference_reads:
        found += (f"with --layer-offset {layer_offset:+d} applied to it too, it reads target "
                  f"layers {list(reference_reads)} (the drafter: {list(drafter_reads)})",)
    if not found:
        return None
    more = f"; and {len(found) - NAMED} more" if len(found) > NAMED else ""
    return f"its config.json differs from the drafter's: {'; '.join(found[:NAMED])}{more}"
