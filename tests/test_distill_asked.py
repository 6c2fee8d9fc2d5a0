"""`asked` prompts: user turns the target samples from its own chat template."""

from __future__ import annotations

import pytest

from dflash_tui_distill import prompts_asked
from dflash_tui_distill.data_phase import build_prompt_list
from dflash_tui_distill.generate import decode_continuations, stop_token_ids
from dflash_tui_distill.holdout import read_holdouts
from dflash_tui_distill.prompts import make_prompts
from dflash_tui_distill.settings import DataSettings, parse_mix
from dflash_tui.engine.errors import InputError
from dflash_tui.engine.target import encode_prompt, load_target
from dflash_tui.sample import PROMPTS_DIR


def _tokens(target, prompts, **kw):
    stops = stop_token_ids(target.tokenizer)
    return {c.index: c.tokens for c in decode_continuations(target.model, prompts, 20, stops, 2, **kw)}


def test_sampling_is_seeded_and_near_zero_temperature_is_greedy(make_pair):
    target = load_target(make_pair("llama")[0])
    prompts = [encode_prompt(target.tokenizer, t, True) for t in ("hello", "What is 2 + 2?", "x")]
    greedy = _tokens(target, prompts)
    assert _tokens(target, prompts, temperature=1e-4, seed=3) == greedy
    hot = _tokens(target, prompts, temperature=1.5, seed=3)
    assert _tokens(target, prompts, temperature=1.5, seed=3) == hot
    assert hot != greedy
    assert _tokens(target, prompts, temperature=1.5, seed=4) != hot


def test_user_turn_prefix_is_where_the_message_begins(make_pair):
    tokenizer = load_target(make_pair("llama")[0]).tokenizer
    for steer, (_, system) in prompts_asked.STEERS.items():
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": "How do I sort a list?"}]
        whole = tokenizer.apply_chat_template(messages, tokenize=False)
        prefix = prompts_asked.user_turn_prefix(tokenizer, steer)
        assert whole.startswith(prefix + "How do I sort a list?"), steer
        assert (system or "") in prefix


def test_a_target_without_a_chat_template_is_refused_in_one_line(make_pair):
    tokenizer = load_target(make_pair("llama")[0]).tokenizer
    tokenizer.chat_template = None
    with pytest.raises(InputError, match=r"^--mix asked: this target's tokenizer has no chat "
                       r"template, so there is no user turn to sample \(drop `asked` from --mix\)$"):
        prompts_asked.user_turn_prefix(tokenizer, "math")


def test_clean_asked_keeps_closed_turns_of_a_sane_length():
    assert prompts_asked.clean_asked("  How do I reverse a list in Python?\n") == \
        "How do I reverse a list in Python?"
    for bad in (None, "", "too short", "x" * 1201, "Hi <|im_start|>assistant\nsure thing here"):
        assert prompts_asked.clean_asked(bad) is None


def test_asked_is_a_mix_kind_with_steers_by_share():
    assert parse_mix("asked=1,math=1") == {"asked": 0.5, "math": 0.5}
    made = make_prompts({"asked": 2000}, seed=0)
    assert len(made) == 2000 and {p.kind for p in made} == {"asked"}
    steers = [prompts_asked.steer_of(p.text) for p in made]
    for steer, (share, _) in prompts_asked.STEERS.items():
        assert abs(steers.count(steer) / len(steers) - share) < 0.04, steer


def test_the_sample_target_asks_questions_of_its_own(sample_target):
    target = sample_target
    settings = DataSettings(seed=1, num_prompts=4, mix={"asked": 1.0})
    holdout = read_holdouts([PROMPTS_DIR])
    items = build_prompt_list(target, settings, holdout, 4, lambda line: None, lambda: False)
    assert items, "the 135M target closes most user turns well within the limit"
    for item in items:
        assert item["kind"] in {f"asked-{s}" for s in prompts_asked.STEERS}
        assert prompts_asked.clean_asked(item["text"]) == item["text"]
        assert "seed 1" in item["source"]
    assert len({i["text"] for i in items}) == len(items)
