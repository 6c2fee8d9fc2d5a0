"""Whether a drafter can run on a target: the refusals a session (and --compare's reference)
makes at open, one line each naming where the drafter came from and the value that does not
fit."""

from __future__ import annotations

from .draft_config import DraftConfig
from .errors import InputError
from .target import Target


def check_pair(target: Target, config: DraftConfig, layer_offset: int, where: str) -> tuple[int, ...]:
    """Refuse a drafter that cannot run on this target; returns the capture layer ids."""
    if config.hidden_size != target.hidden_size:
        raise InputError(
            f"{where}: drafter hidden_size {config.hidden_size} does not match the target's "
            f"hidden size {target.hidden_size}"
        )
    if config.vocab_size != target.vocab_size:
        raise InputError(
            f"{where}: drafter vocab_size {config.vocab_size} does not match the target's "
            f"vocabulary of {target.vocab_size}"
        )
    if not 0 <= config.mask_token_id < target.vocab_size:
        raise InputError(
            f"{where}: mask_token_id {config.mask_token_id} is out of range for a vocabulary "
            f"of {target.vocab_size} (expected 0..{target.vocab_size - 1})"
        )
    ids = tuple(i + layer_offset for i in config.target_layer_ids)
    for n, (given, shifted) in enumerate(zip(config.target_layer_ids, ids)):
        if not 0 <= shifted < target.num_layers:
            shift = f" + layer offset {layer_offset}" if layer_offset else ""
            raise InputError(
                f"{where}: target_layer_ids[{n}] = {given}{shift} is out of range for a target "
                f"with {target.num_layers} layers (expected 0..{target.num_layers - 1})"
            )
    return ids
