"""A decode ends at the context the target declares (the limit a prompt is held to): the
session finishes with "context" once the next round's block would run past it, never
verifying or committing past it (a long run once reached round 4024 at position 8196)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dflash_tui.cli import main
from dflash_tui.engine import ParameterError, SessionFinished, SessionOptions, load_pair

LIMIT = 40


def _context(target: Path, limit: int) -> None:
    config = json.loads((target / "config.json").read_text())
    config["max_position_embeddings"] = limit
    (target / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("gamma", [1, 3])
def test_a_decode_ends_at_the_target_context(breakable_pair, gamma):
    target, draft = breakable_pair
    _context(target, LIMIT)
    session = load_pair(target, draft).open("for i in range(10):",
                                            options=SessionOptions(gamma=gamma, max_tokens=200))
    assert session.target.context_length == LIMIT and len(session.prompt_ids) < LIMIT - gamma
    records = list(session.run())
    assert records and session.finished == "context"
    assert records[-1].finish_reason == "context"
    for record in records:  # every block the target verified lay inside its context
        assert record.position + record.gamma <= LIMIT - 1
        assert record.state_after.target_offset <= LIMIT
    # it ended as soon as the next block would not fit, not before
    assert len(session.tokens) + gamma > LIMIT
    assert records[-1].state_before.committed + gamma <= LIMIT
    assert len(session.tokens) <= LIMIT + 1  # the last token is the target's from position LIMIT-1
    assert session.finish_message == f"reached the target's context ({LIMIT} positions)"
    with pytest.raises(SessionFinished, match=f"{LIMIT} positions"):
        session.step_stage()
    session.close()


def test_a_gamma_that_would_run_past_the_context_is_refused(breakable_pair):
    target, draft = breakable_pair
    _context(target, LIMIT)
    session = load_pair(target, draft).open("for i in range(10):",
                                            options=SessionOptions(gamma=2, max_tokens=200))
    with pytest.raises(ParameterError, match=f"past the target's context of {LIMIT} positions"):
        session.set_gamma(LIMIT - len(session.tokens) + 1)
    assert session.set_gamma(LIMIT - len(session.tokens)) == LIMIT - len(session.tokens)
    session.close()


def test_probe_says_it_stopped_at_the_context(breakable_pair, tmp_path, capsys):
    target, _ = breakable_pair
    _context(target, LIMIT)
    out = tmp_path / "run"
    code = main(["probe", str(target), "--prompt", "for i in range(10):", "--raw", "--block", "3",
                 "--max-tokens", "200", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"probe: stopped: reached the target's context ({LIMIT} positions)\n" in err
    assert json.loads((out / "summary.json").read_text())["finish_reason"] == "context"
