"""The compare lab on the real sample: the shipped drafter against its own 4-bit copy. Every
round's reference count equals what the target's own greedy decode (mlx-lm's generate_step
on the same model) says of the reference's proposals. Kept short."""

from __future__ import annotations

import pytest

from greedy import greedy_tokens

from dflash_tui.engine import SessionOptions, load_pair
from dflash_tui.engine.compare import greedy_prefix
from dflash_tui.sample import DEFAULT_PROMPT, sample_drafter

pytestmark = pytest.mark.slow
GAMMA = 7


def test_a_4_bit_reference_counts_what_the_targets_greedy_decode_accepts(sample_gguf):
    pair = load_pair(sample_gguf, sample_drafter(), compare="bits=4")
    session = pair.open(DEFAULT_PROMPT, options=SessionOptions(gamma=GAMMA, max_tokens=40,
                                                               probes=False, ranks=False))
    records = list(session.run())
    session.close()
    n = len(session.prompt_ids)
    truth = greedy_tokens(pair.target.model, session.prompt_ids, len(session.generated) + GAMMA)
    assert session.generated == truth[:len(session.generated)]
    for record in records:
        done = record.position - n + 1
        assert record.compare.accepted == greedy_prefix(list(record.compare.proposals),
                                                        truth[done:done + record.gamma])
    assert any(r.compare.proposals != r.proposals for r in records)  # 4 bits change something
