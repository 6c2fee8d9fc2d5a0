"""The real sample target end to end: GGUF loading (mixed Q8_0/Q4_1), the tokenizer rebuilt
from the GGUF's metadata, chat template, and a few speculative rounds. Kept short."""

from __future__ import annotations

import pytest

from fixtures import write_sample_shaped_drafter
from greedy import greedy_tokens

from dflash_tui.engine import SessionOptions

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sample_pair(sample_pair_for, tmp_path_factory):
    return sample_pair_for(write_sample_shaped_drafter(tmp_path_factory.mktemp("sample-drafter")))


def test_gguf_target_decodes_sensible_english(sample_pair):
    target = sample_pair.target
    assert target.num_layers == 30 and target.hidden_size == 576 and target.vocab_size == 49152
    session = sample_pair.open("What is the capital of France?",
                               options=SessionOptions(gamma=4, max_tokens=10))
    assert session.prompt_ids[:1] == [1]  # <|im_start|> from the GGUF's chat template
    records = list(session.run())
    text = records[-1].committed_text
    assert "Paris" in text, text
    assert all(r.first_nonfinite is None for r in records)
    # Speculative output equals the target's own one-token-at-a-time greedy decode.
    target.unhook()
    plain = greedy_tokens(target.model, session.prompt_ids, len(session.generated), session.eos_ids)
    assert plain == session.generated
    session.close()


def test_tokenizer_round_trips_text(sample_pair):
    tok = sample_pair.target.tokenizer
    text = "Speculative decoding: 12 + 30 = 42, isn't it?\n    return x"
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids) == text
    assert tok.convert_ids_to_tokens(tok.encode(" the", add_special_tokens=False)) == ["Ġthe"]
    # digits split one by one (llama.cpp's smollm pre-tokenizer)
    assert len(tok.encode("12345", add_special_tokens=False)) == 5
