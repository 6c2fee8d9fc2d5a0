"""Distillation data: exact greedy continuations, the held-out check, prompts, batches."""

from __future__ import annotations


import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.cache import BatchKVCache, make_prompt_cache

from dflash_tui_distill.architecture import choose_mask_token
from dflash_tui_distill.batches import BatchSampler, make_batch
from dflash_tui_distill.data_phase import assign_splits
from dflash_tui_distill.dataset import Sequences
from dflash_tui_distill.generate import ROW_TOKENS, batches, decode_continuations, stop_token_ids
from dflash_tui_distill.holdout import Holdout, read_holdout, read_holdouts, refuse_clashes
from dflash_tui_distill.prompts import make_prompts, split_counts
from dflash_tui_distill.settings import DataSettings
from dflash_tui.engine.errors import InputError
from dflash_tui.engine.target import encode_prompt, load_target
from dflash_tui.sample import PROMPTS_DIR


def greedy_one(model, ids, max_new, stops):
    """The plainest greedy decode: one sequence, argmax every step."""
    cache = make_prompt_cache(model)
    logits = model(mx.array([ids]), cache=cache)
    out = []
    for _ in range(max_new):
        token = int(mx.argmax(logits[0, -1]))
        out.append(token)
        if token in stops:
            break
        logits = model(mx.array([[token]]), cache=cache)
    return out


@pytest.mark.parametrize("kind", ["llama", "qwen35"])
def test_batched_continuations_are_exactly_greedy(make_pair, kind):
    target = load_target(make_pair(kind)[0])
    texts = ["hello", "The quick brown fox jumps over", "def add(a, b): return a + b", "x",
             "What is 12 plus 30?"]
    prompts = [encode_prompt(target.tokenizer, t, True) for t in texts]
    assert len({len(p) for p in prompts}) > 2, "prompts of different lengths exercise the padding"
    stops = stop_token_ids(target.tokenizer)
    got = {c.index: c for c in decode_continuations(target.model, prompts, 24, stops, batch_size=3)}
    assert sorted(got) == list(range(len(prompts)))
    for i, prompt in enumerate(prompts):
        assert got[i].tokens == greedy_one(target.model, prompt, 24, set(stops)), texts[i]
    # A stop token ends a continuation (and is kept), whatever the rest of its batch does.
    reference = greedy_one(target.model, prompts[0], 24, set())
    stop = reference[4]
    cut = reference[:reference.index(stop) + 1]
    got = {c.index: c for c in decode_continuations(target.model, prompts, 24, [stop], batch_size=3)}
    assert got[0].tokens == cut and got[0].stopped


def test_long_prompts_go_in_smaller_batches():
    rng = np.random.default_rng(0)
    lengths = [int(n) for n in rng.integers(5, 3 * ROW_TOKENS, size=300)] + [20 * ROW_TOKENS]
    got = list(batches(lengths, 64, batch_size=16))
    flat = [i for chunk in got for i in chunk]
    assert sorted(flat) == list(range(len(lengths)))  # every prompt once
    assert [lengths[i] for i in flat] == sorted(lengths)  # shortest first
    for chunk in got:
        longest = max(lengths[i] for i in chunk) + 64
        assert len(chunk) <= 16
        assert len(chunk) == 1 or len(chunk) * longest <= 16 * ROW_TOKENS
    assert got[-1] == [len(lengths) - 1]  # over the budget alone: a batch of its own
    assert len(got[0]) == 16  # short prompts still fill a batch


def test_holdout_clash_rules():
    holdout = Holdout(["Explain why the sky is blue in two sentences.", "Hi"])
    assert holdout.clashes("explain why the  sky is blue in two sentences.") is not None
    assert holdout.clashes("Please explain why the sky is blue in two sentences. Thanks") is not None
    assert holdout.clashes("Hi") is not None
    assert holdout.clashes("Hi there, how do magnets work?") is None  # short units: equality only
    assert holdout.clashes("Explain why grass is green.") is None


def test_sample_prompts_are_read_and_never_generated(tmp_path):
    held = tmp_path / "held"
    (held / "math").mkdir(parents=True)
    made = make_prompts({"math": 50, "prose": 50}, seed=3)
    (held / "math" / "one.txt").write_text(made[0].text + "\n")
    holdout = read_holdout(held)
    again = make_prompts({"math": 50, "prose": 50}, seed=3,
                         reject=lambda t: holdout.clashes(t) is not None)
    assert made[0].text not in {p.text for p in again}
    assert len(again) == 100
    with pytest.raises(InputError, match="test prompt"):
        refuse_clashes([("extra.txt", made[0].text)], holdout)
    assert len(read_holdouts(None)) > len(read_holdout(PROMPTS_DIR)) > 0, "both test sets are held out"


def test_prompts_are_deterministic_distinct_and_of_every_kind():
    counts = split_counts(300, {"math": 0.35, "code": 0.35, "prose": 0.2, "self": 0.1})
    assert counts == {"math": 105, "code": 105, "prose": 60, "self": 30}
    a, b = make_prompts(counts, seed=0), make_prompts(counts, seed=0)
    assert [p.text for p in a] == [p.text for p in b]
    assert len({p.text for p in a}) == 300
    assert make_prompts(counts, seed=1)[0].text != a[0].text or make_prompts(counts, seed=1)[-1].text != a[-1].text


def test_ident_prompts_name_fresh_identifiers_and_leave_other_kinds_alone():
    import re

    from dflash_tui_distill.settings import parse_mix

    base = make_prompts({"math": 50, "code": 50}, seed=0)
    mixed = make_prompts({"math": 50, "code": 50, "ident": 400}, seed=0)
    assert [p.text for p in mixed if p.kind != "ident"] == [p.text for p in base]
    ident = [p.text for p in mixed if p.kind == "ident"]
    assert len(set(ident)) == 400
    # Each prompt defines names in backticks; across prompts they keep changing.
    names = [set(re.findall(r"`([^`]+)`", text)) for text in ident]
    assert all(names)
    assert len(set().union(*names)) > 300
    assert parse_mix("code=0.5,ident=0.5") == {"code": 0.5, "ident": 0.5}


def test_literal_prompts_quote_fresh_strings_and_leave_other_kinds_alone():
    import re

    # The shipped recipe's stages draw math, code, prose, self and ident: adding a kind
    # must not change one of their prompts, or the shipped weights stop being reproducible.
    kinds = {"math": 40, "code": 40, "prose": 40, "ident": 40}
    base = make_prompts(kinds, seed=1)
    mixed = make_prompts({**kinds, "literal": 400}, seed=1)
    assert [p.text for p in mixed if p.kind != "literal"] == [p.text for p in base]
    literal = [p.text for p in mixed if p.kind == "literal"]
    assert len(set(literal)) == 400
    # Each quotes at least two strings for the answer to repeat; they keep changing.
    quoted = [re.findall(r"`([^`]+)`", text) for text in literal]
    assert all(len(q) >= 2 for q in quoted)
    assert len({s for q in quoted for s in q}) > 700


def test_eval_split_covers_every_kind():
    items = [{"kind": k, "text": f"{k} {i}"} for k in ("math", "code", "prose") for i in range(100)]
    assign_splits(items, DataSettings(seed=0))
    held = [i for i in items if i["split"] == "validation"]
    assert 8 <= len(held) <= 16
    assert {i["kind"] for i in held} == {"math", "code", "prose"}


def test_mask_token_is_an_unused_special(make_pair, sample_gguf):
    fixture = load_target(make_pair("llama")[0])
    assert choose_mask_token(fixture.tokenizer, fixture.vocab_size) == \
        fixture.tokenizer.convert_tokens_to_ids("<|mask|>")
    from dflash_tui.engine.gguf import gguf_tokenizer, read_gguf

    _, metadata = read_gguf(sample_gguf)
    smol = gguf_tokenizer(sample_gguf, metadata)
    # SmolLM2: 0-2 are endoftext / im_start / im_end; the highest unused control token is 16.
    assert choose_mask_token(smol, 49152) == 16
    assert smol.convert_ids_to_tokens(16) == "<empty_output>"
    assert choose_mask_token(smol, 49152, used=[16]) == 15


def toy_sequences(n=6, seed=0) -> Sequences:
    rng = np.random.default_rng(seed)
    tokens = [rng.integers(10, 99, size=int(rng.integers(30, 60))).astype(np.int32) for _ in range(n)]
    return Sequences(tokens, np.full(n, 8), ["math"] * n, np.arange(n), ["t"] * n)


def test_blocks_take_anchors_in_the_continuation_and_the_next_tokens_as_labels():
    seqs = toy_sequences()
    gamma = 4
    batch = make_batch(seqs, np.arange(6), anchors_per_seq=16, seq_len=48, gamma=gamma,
                       mask_token_id=3, rng=np.random.default_rng(0), short_block_fraction=0.5)
    for n, anchor in enumerate(batch.anchors):
        row = n // 16
        tokens = seqs.tokens[row]
        if batch.lengths[n] == 0:
            continue
        assert 8 <= anchor <= min(len(tokens), 48) - 1 - gamma
        assert batch.block[n, 0] == tokens[anchor] and (batch.block[n, 1:] == 3).all()
        assert batch.labels[n].tolist() == tokens[anchor + 1:anchor + 1 + gamma].tolist()
    assert set(batch.lengths.tolist()) - {0, gamma}, "no short blocks were drawn"


def test_sampler_state_restores_the_same_batches():
    seqs = toy_sequences(9)
    a = BatchSampler(seqs, 4, 5, 48, 4, 3, seed=7, short_block_fraction=0.5)
    for _ in range(3):
        a.next()
    saved = a.state()
    expected = [a.next() for _ in range(3)]
    b = BatchSampler(seqs, 4, 5, 48, 4, 3, seed=7, short_block_fraction=0.5)
    b.restore(saved)
    for want in expected:
        got = b.next()
        assert (got.ids == want.ids).all() and (got.anchors == want.anchors).all()
        assert (got.lengths == want.lengths).all()


def test_rows_that_stop_leave_the_batch_and_the_rest_stay_exactly_greedy(make_pair, monkeypatch):
    import dflash_tui_distill.generate as generate

    target = load_target(make_pair("llama")[0])
    texts = ["hello", "The quick brown fox jumps over", "def add(a, b): return a + b", "x",
             "What is 12 plus 30?", "one two three"]
    prompts = [encode_prompt(target.tokenizer, t, True) for t in texts]
    free = [greedy_one(target.model, p, 40, set()) for p in prompts]
    # A stop token that some rows reach early, others late or never: rows leave one by one.
    def first_reached(stop):
        return [f.index(stop) if stop in f else None for f in free]

    def spread(reached):
        return reached[0] <= 8 and (None in reached or max(r for r in reached if r is not None) > 8)

    stop = next((t for t in free[0][1:9] if spread(first_reached(t))), None)
    assert stop is not None, "the fixture's continuations give no stop token that splits the batch"
    reached = first_reached(stop)
    monkeypatch.setattr(generate, "SYNC_EVERY", 2)
    filtered = []
    real = BatchKVCache.filter
    monkeypatch.setattr(BatchKVCache, "filter",
                        lambda self, rows: (filtered.append(rows.size), real(self, rows))[1])
    got = {c.index: c for c in decode_continuations(target.model, prompts, 40, [stop], batch_size=6)}
    assert filtered, "a row stopped early, so the batch must have shrunk"
    for i, prompt in enumerate(prompts):
        want = free[i][:reached[i] + 1] if reached[i] is not None else free[i]
        assert got[i].tokens == want, texts[i]
        assert got[i].stopped == (reached[i] is not None)
    # Sampling keeps the batch whole: the same seed draws the same tokens as before.
    filtered.clear()
    list(decode_continuations(target.model, prompts, 40, [stop], batch_size=6, temperature=1.0))
    assert not filtered


def test_a_recurrent_hybrid_keeps_its_batch_whole(make_pair):
    """Only attention caches are dropped rows from (the cases the test above holds to the
    one-sequence loop); a hybrid's recurrent state decodes as a static batch."""
    import dflash_tui_distill.generate as generate

    target = load_target(make_pair("qwen35")[0])
    cache, _ = generate._prefill(target.model, [[1, 2, 3], [4, 5]])
    assert not generate._compactable(cache)
    assert generate._compactable(generate._prefill(load_target(make_pair("llama")[0]).model,
                                                   [[1, 2, 3], [4, 5]])[0])
