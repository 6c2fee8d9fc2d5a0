"""Z Lab's reference loop (`dflash==0.1.0`, `dflash/model_mlx.py` `stream_generate`) for the
benchmarks: on a drafter read from its directory by Z Lab's own loader, or on the very
arrays of a drafter the engine holds (the synthetic real-scale pair, which has no
directory), optionally with its proposals forced to a given text so that every one is
accepted while the drafter's whole forward and selector walk still run.

Z Lab patches its target's layers for good (`_patch_model`), so it gets a second model
object over the same weight arrays (`target_twin`): no second copy of the weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import mlx.core as mx
from mlx.utils import tree_flatten

from benchmarks.common import Clock
from dflash_tui.engine.draft_config import DraftConfig
from dflash_tui.engine.drafter import DraftModel
from dflash_tui.engine.target import DTYPES


def drafter_from_dir(draft_dir: Path, dtype: str):
    """Z Lab's own loader on a local directory (it fetches from the hub; point it here)."""
    from dflash import model_mlx as zlab

    download = zlab.snapshot_download
    zlab.snapshot_download = lambda *args, **kwargs: str(draft_dir)
    try:
        draft = zlab.load_draft(str(draft_dir))
    finally:
        zlab.snapshot_download = download
    draft.set_dtype(DTYPES[dtype])
    return draft


def drafter_twin(drafter: DraftModel):
    """Z Lab's model of the engine drafter's config, holding the engine drafter's arrays
    (the codebooks renamed to Z Lab's Embedding names, as its loader does)."""
    from dflash import model_mlx as zlab

    c: DraftConfig = drafter.config
    config = zlab.DFlashConfig(
        hidden_size=c.hidden_size, num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads, num_key_value_heads=c.num_key_value_heads,
        head_dim=c.head_dim, intermediate_size=c.intermediate_size, vocab_size=c.vocab_size,
        rms_norm_eps=c.rms_norm_eps, rope_theta=c.rope_theta,
        max_position_embeddings=c.max_position_embeddings, block_size=c.block_size,
        target_layer_ids=tuple(c.target_layer_ids), num_target_layers=c.num_target_layers,
        mask_token_id=c.mask_token_id, rope_scaling=c.rope_scaling,
        layer_types=tuple(c.layer_types), sliding_window=c.sliding_window,
        final_logit_softcapping=c.final_logit_softcapping,
        input_embedding_scale=c.input_embedding_scale, output_multiplier=c.output_multiplier,
        conv_kernel_size=c.conv_kernel_size, conv_group_size=c.conv_group_size,
        selector_rank=c.selector_rank, selector_top_k=c.selector_top_k, is_causal=c.is_causal,
    )
    weights = dict(tree_flatten(drafter.parameters()))
    dflash2 = c.is_dflash2
    if dflash2:
        for name in ("predecessor_codebook", "successor_codebook"):
            key = f"candidate_selector.{name}"
            weights[f"{key}.weight"] = weights.pop(key)
    twin = (zlab.DFlash2DraftModel if dflash2 else zlab.DFlashDraftModel)(config)
    twin.eval()
    twin.load_weights(list(weights.items()))
    return twin


def target_twin(model):
    """A second mlx-lm model object over the same weight arrays (Z Lab's hooks stay on it)."""
    twin = type(model)(model.args)
    twin.update(model.parameters())
    return twin


class _Silent:
    """A detokenizer that makes no text (the synthetic vocabulary has none)."""

    def reset(self):
        pass

    def add_token(self, token):
        pass

    def finalize(self):
        pass

    last_segment = ""


def bare_ids_tokenizer():
    """What Z Lab's loop reads of a tokenizer (a detokenizer, the stop ids), for a vocabulary
    of bare ids: no stop token, no text."""
    from mlx_lm.tokenizer_utils import TokenizerWrapper

    class BareIds(TokenizerWrapper):
        def __init__(self):
            self._detokenizer = _Silent()
            self._eos_token_ids = set()

        @property
        def detokenizer(self):
            return self._detokenizer

    return BareIds()


def loop(target_model, draft, tokenizer, block: int):
    """decode(ids, max_tokens, forced=None, record=False) -> (tokens, (wall s, cpu s),
    rounds) through Z Lab's stream_generate at `block` proposals. With `forced` (the whole text, its first
    token first; a DFlash2 drafter), each round's proposals are replaced by the text's next
    tokens after the drafter's forward and walk have been built, and depend on them, so Z
    Lab's round does all its work and every proposal the target agrees with is accepted."""
    from dflash import model_mlx as zlab

    tokens: list[int] = []
    walks: list[mx.array] = []  # with record=True: each round's own proposals, read at the end
    forcing: dict = {"text": None, "record": False}
    if hasattr(draft, "propose"):
        # Z Lab's own propose, also when an earlier loop over this drafter wrapped it
        propose = draft.__dict__.setdefault("_unforced_propose", draft.propose)

        def forced_propose(inputs, target_hidden, cache, temperature, logits_start=0):
            path, candidates, q = propose(inputs, target_hidden, cache, temperature,
                                          logits_start=logits_start)
            if forcing["record"]:
                walks.append(path)
            if forcing["text"] is None:
                return path, candidates, q
            n = len(tokens)  # Z Lab proposes a round after the consumer took the last one
            text = list(forcing["text"][n:n + path.shape[1]])
            text += [0] * (path.shape[1] - len(text))
            return mx.array([text], dtype=path.dtype) + 0 * path, candidates, q

        draft.propose = forced_propose

    def decode(ids: list[int], max_tokens: int, forced: Optional[Sequence[int]] = None,
               record: bool = False):
        """record: keep the selector walk's own proposals of every round in decode.walks
        (read back after the decode, so the loop waits no more than Z Lab's does)."""
        if (forced is not None or record) and not hasattr(draft, "propose"):
            raise ValueError("forcing or recording proposals needs a DFlash2 drafter (Z Lab's propose)")
        forcing.update(text=forced, record=record)
        tokens.clear()
        walks.clear()
        responses = zlab.stream_generate(target_model, draft, tokenizer, mx.array(ids),
                                         block_size=block + 1, max_tokens=max_tokens)
        tokens.extend(next(responses).tokens)  # the prefill's token
        clock = Clock()
        committed = []
        for response in responses:
            tokens.extend(response.tokens)
            if response.accepted is not None:  # a round's committed count; None: the end
                committed.append(response.accepted)
        elapsed = clock.read()
        decode.committed = committed
        decode.walks = [walk[0].tolist() for walk in walks]
        return list(tokens), elapsed, len(committed)

    decode.committed = []  # the last decode's tokens committed per round
    decode.walks = []  # with record=True, the last decode's proposals per round
    return decode


def accepted(committed: list[int], block: int) -> tuple[int, int]:
    """(accepted, proposed) over a decode's rounds but the last, which max_tokens may cut."""
    rounds = committed[:-1]
    return sum(c - 1 for c in rounds), block * len(rounds)
