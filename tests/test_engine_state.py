"""The round's bookkeeping invariants (docs/ARCHITECTURE.md), every stage of every round."""

from __future__ import annotations

import itertools

import pytest

from conftest import TARGETS

from dflash_tui.engine import SessionFinished, SessionOptions, Stage, load_pair


def _alternating_proposer():
    """Half right, half wrong: proposes the anchor itself for some slots. Deterministic."""
    counter = itertools.count()

    def propose(tokens, gamma):
        n = next(counter)
        return [tokens[-1] if (n + i) % 3 else (tokens[-1] + 1) % 50 for i in range(gamma)]

    return propose


@pytest.mark.parametrize("target_kind", TARGETS)
def test_invariants_hold_every_round(make_pair, target_kind):
    target_dir, draft_dir = make_pair(target_kind, "DFlash2DraftModel")
    options = SessionOptions(gamma=5, max_tokens=40, proposer=_alternating_proposer())
    session = load_pair(target_dir, draft_dir).open("for i in range(10):", options=options)
    prefill = session.prefill_record.state
    assert (prefill.cursor, prefill.capture_base, prefill.capture_rows) == (0, 0, len(session.prompt_ids))
    assert prefill.target_offset == prefill.committed - 1 == len(session.prompt_ids)

    previous = prefill
    for record in session.run():
        stages = {s.stage: s for s in record.stages}
        assert [s.stage for s in record.stages] == [s.value for s in Stage]
        assert record.state_before == previous
        assert record.position == record.state_before.committed - 1
        assert stages["context"].after.cursor == record.position
        assert stages["context"].after.capture_rows == 0
        after = stages["commit"].after
        assert after.capture_rows == record.accepted + 1
        assert after.capture_base == record.position
        assert after.cursor == record.position  # lags by design until the next context write
        if record.finish_reason is None:
            assert after.target_offset == after.committed - 1
            assert after.committed == record.state_before.committed + record.accepted + 1
            assert after.lag == record.accepted + 1
        if record.accepted == record.gamma:
            assert record.rollback.kind == "none"
        elif target_kind == "llama":
            assert (record.rollback.kind, record.rollback.rows) == ("trim", record.gamma - record.accepted)
        else:
            assert (record.rollback.kind, record.rollback.rows) == ("replay", record.accepted + 1)
        previous = after
    assert session.finished == "length"
    with pytest.raises(SessionFinished):
        session.step_stage()
    session.close()


def test_stage_by_stage_records_grow(make_pair):
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    session = load_pair(target_dir, draft_dir).open("Hi", options=SessionOptions(gamma=3))
    seen = []
    for stage in Stage:
        assert session.next_stage is stage
        record = session.step_stage()
        seen.append(record)
        assert record.stage == stage.value
    assert seen[0].proposals is None and seen[1].proposals is None
    assert seen[2].proposals is not None and seen[2].selector is not None
    assert seen[2].accepted is None and seen[3].accepted is not None
    assert not seen[3].complete and seen[4].complete
    assert [len(r.stages) for r in seen] == [1, 2, 3, 4, 5]
    assert set(seen[4].timings_ms) == {s.value for s in Stage}
    assert session.next_stage is Stage.CONTEXT
    session.close()


def test_gamma_change_applies_next_round(make_pair):
    target_dir, draft_dir = make_pair("llama", "DFlashDraftModel")
    session = load_pair(target_dir, draft_dir).open("Hi", options=SessionOptions(gamma=3))
    session.step_stage()
    session.set_gamma(6)
    assert session.step_round().gamma == 3
    assert session.step_round().gamma == 6
    session.close()


def test_ranks_and_selector_are_consistent(make_pair):
    target_dir, draft_dir = make_pair("qwen35", "DFlash2DraftModel")
    session = load_pair(target_dir, draft_dir).open("Hi", options=SessionOptions(gamma=6))
    record = session.step_round()
    assert len(record.ranks) == 6
    for rank, slot in zip(record.ranks, record.selector.slots):
        assert rank.proposal == slot.chosen == record.proposals[rank.slot]
        assert rank.in_candidates == (rank.target in slot.candidates)
        assert rank.after_rejection == (rank.slot > record.accepted)
        assert rank.accepted == (rank.slot < record.accepted)
        assert rank.drafter_top[0].logit >= rank.drafter_top[-1].logit
        if rank.rank == 0:
            assert rank.drafter_top[0].token == rank.target
        assert 0.0 <= rank.p_target <= 1.0
        assert slot.unary == tuple(sorted(slot.unary, reverse=True))
        assert slot.argmax == slot.candidates[0]
        assert max(slot.score) == slot.score[slot.chosen_index]
        assert len(slot.lattice) == (1 if slot.slot == 0 else len(slot.candidates))
        assert slot.lattice[0 if slot.slot == 0 else record.selector.slots[slot.slot - 1].chosen_index] == slot.score
    session.close()
