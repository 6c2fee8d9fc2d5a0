"""The engine as a library user meets it: one Pair that opens sessions, frozen options,
a Session that says what is wrong when used out of order, errors that name parameters."""

from __future__ import annotations

import gc
import weakref
from dataclasses import FrozenInstanceError

import pytest

from dflash_tui.cli import user_message
from dflash_tui.engine import ParameterError, SessionOptions, load_pair


@pytest.fixture(scope="module")
def pair(make_pair):
    return load_pair(*make_pair("llama", "DFlash2DraftModel"))


def test_the_session_records_the_dtype_of_the_weights(make_pair):
    half = load_pair(*make_pair("llama", "DFlash2DraftModel"), dtype="bfloat16")
    assert half.dtype == "bfloat16"
    session = half.open("Hi", prefill=False)
    assert session.info.dtype == "bfloat16" and session.info.drafter_path == str(half.draft_dir)
    session.close()


def test_options_are_frozen_and_raw_buffers_toggle_through_the_session(pair):
    options = SessionOptions(gamma=3)
    with pytest.raises(FrozenInstanceError):
        options.keep_raw = True  # type: ignore[misc]
    session = pair.open("Hi", options=options)
    assert session.step_stage().raw is None
    session.set_keep_raw(True)
    assert "draft/logits" in session.step_stage().raw
    assert session.options.keep_raw is False  # what was asked for stays as asked
    session.close()


def test_a_session_used_out_of_order_says_so(pair):
    session = pair.open("Hi", prefill=False)
    assert session.state().cursor == 0 and session.finished is None and session.current is None
    with pytest.raises(RuntimeError, match=r"before prefill\(\)"):
        session.step_stage()
    session.prefill()
    with pytest.raises(RuntimeError, match="already ran"):
        session.prefill()
    session.close()


def test_errors_name_the_parameter_and_the_cli_names_its_flag(pair, make_pair):
    with pytest.raises(ParameterError) as caught:
        pair.open("Hi", options=SessionOptions(gamma=0), prefill=False)
    assert str(caught.value) == "gamma=0: expected at least 1 proposal per round"
    assert user_message(caught.value) == "--block 0: expected at least 1 proposal per round"

    with pytest.raises(ParameterError) as caught:
        load_pair(*make_pair("llama", "DFlash2DraftModel"), dtype="float64")
    assert str(caught.value) == "dtype='float64': expected one of float32, float16, bfloat16"
    assert user_message(caught.value).startswith("--dtype 'float64': expected one of")


def test_a_session_keeps_no_history(pair):
    """A decode of thousands of rounds must not hold thousands of records: the session
    counts rounds and keeps the latest record; history is the caller's."""
    session = pair.open("Hi", options=SessionOptions(gamma=3, max_tokens=100))
    first = weakref.ref(session.step_round())
    for _ in range(3):
        session.step_round()
    gc.collect()
    assert first() is None
    assert session.rounds_done == 4 and session.current.round == 3
    assert session.step_stage().round == 4
    session.close()


def test_the_session_info_names_the_mask_token_with_its_text(pair):
    """The TUI shows the mask token's text (its header and message log): the engine, which
    holds the tokenizer, writes it into the session's identity, and the trace keeps it."""
    from dflash_tui.snapshot import session_from_json, session_json

    session = pair.open("Hello", prefill=False)
    info = session.info
    assert (info.mask_token_id, info.mask_token_text) == (3, "<|mask|>")
    assert session_from_json(session_json(info)) == info
    session.close()
