"""The history model of a whole decode: summary columns for every round, full records for a
window, older ones read back from the trace; aggregates and search over it, each checked
against the same numbers computed directly from the full records."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace

import numpy as np
import pytest

from dflash_tui import aggregates
from dflash_tui.aggregates import Span, every_round, rounds_span
from dflash_tui.history import JUDGED, History
from dflash_tui.search import first, search, step
from dflash_tui.trace_rounds import TraceRounds

from app_helpers import oracle_proposer

ROUNDS = 14


@pytest.fixture(scope="module")
def decode(pair, tmp_path_factory):
    """A real fixture session of ROUNDS rounds with acceptance varying round to round (the
    proposals follow the target's greedy decode for a round-dependent number of slots),
    recorded to a trace after some unrelated lines, as an appended --trace FILE would be."""
    from dflash_tui.engine.api import load_pair
    from dflash_tui.engine.session import SessionOptions
    from dflash_tui.snapshot import TraceWriter

    greedy = {good: oracle_proposer(pair, "The quick brown fox", 80, good) for good in (0, 1, 3, 5)}
    plan = [5, 0, 1, 3, 0, 5, 1, 1, 3, 0, 5, 3, 1, 0]

    def proposer(tokens, gamma):
        return greedy[plan[proposer.round % len(plan)]](tokens, gamma)

    proposer.round = 0
    session = load_pair(*pair).open("The quick brown fox",
                                    options=SessionOptions(gamma=4, max_tokens=80, proposer=proposer))
    path = tmp_path_factory.mktemp("history") / "trace.jsonl"
    path.write_text("an earlier session's lines\n")
    start = path.stat().st_size
    writer = TraceWriter(path, session.info, session.prefill_record)
    records = []
    for _ in range(ROUNDS):
        if session.finished:
            break
        if proposer.round == 6:
            session.set_gamma(3)  # slot width changes mid-session
        record = session.step_round()
        writer.write(record)
        records.append(record)
        proposer.round += 1
    writer.close()
    session.close()
    return records, path, start


def test_summaries_hold_what_the_records_say(decode):
    records, _, _ = decode
    history = History(keep=4)
    for record in records:
        history.add(record)
    assert len(history) == len(records)
    assert history.round.values.tolist() == [r.round for r in records]
    assert history.accepted.values.tolist() == [r.accepted for r in records]
    assert history.gamma.values.tolist() == [r.gamma for r in records]
    for row, record in enumerate(records):
        assert history.rank.values[row, : record.gamma].tolist() == [r.rank for r in record.ranks]
        assert history.proposal.values[row, : record.gamma].tolist() == list(record.proposals)
        assert history.committed_ids.values[row, : len(record.committed_tokens)].tolist() \
            == list(record.committed_tokens)
        for p in record.probes:
            i = history.buffer_keys.index((p.stage, p.layer, p.name))
            assert history.nonfinite.values[row, i] == p.nan + p.posinf + p.neginf
    # only the last `keep` full records are held; the rest are None without a source
    assert [history.is_kept(r.round) for r in records] == [False] * (len(records) - 4) + [True] * 4
    assert history.record(records[0].round) is None
    assert history.record(records[-1].round) == replace(records[-1], raw=None)


def test_older_records_come_back_from_the_trace(decode):
    records, path, start = decode
    history = History(keep=2, source=TraceRounds(path, start))
    for record in records:
        history.add(record)
    for record in records:
        assert history.record(record.round) == replace(record, raw=None)
    assert history.record(records[-1].round + 1) is None


def test_trace_rounds_read_only_whole_lines_of_their_own_session(decode, tmp_path):
    records, path, start = decode
    lines = path.read_bytes()[start:].splitlines(keepends=True)
    second = tmp_path / "two.jsonl"
    # this session, then another session's header and rounds, and a half-written line
    second.write_bytes(b"".join(lines[:3]) + lines[0] + b"".join(lines[1:3]) + lines[3][:40])
    reader = TraceRounds(second)
    assert reader(records[0].round) == replace(records[0], raw=None)
    assert reader(records[1].round) == replace(records[1], raw=None)
    assert reader(records[2].round) is None  # only its first bytes are on disk


def test_trace_rounds_check_a_line_as_replay_does(decode, tmp_path):
    """Live's read-back of older rounds parsed a line without replay's checks: a round
    whose stages are out of order came back as a record (replay skips it as damaged)."""
    from dflash_tui.app.replay import load

    records, path, start = decode
    header, *rounds = path.read_bytes()[start:].splitlines(keepends=True)
    shuffled = json.loads(rounds[1])
    shuffled["stages"].reverse()
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(header + rounds[0] + json.dumps(shuffled).encode() + b"\n" + rounds[2])
    assert load(damaged).skipped == 1
    reader = TraceRounds(damaged)
    assert reader(records[1].round) is None
    assert [reader(r.round) for r in (records[0], records[2])] == \
        [replace(r, raw=None) for r in (records[0], records[2])]


def _slots_from_records(records, slot):
    """The per-slot aggregates computed directly from the records (docs/TUI.md definitions)."""
    proposing = [r for r in records if slot < r.gamma]
    ranks = [r.ranks[slot] for r in proposing]
    reached = [k for k in ranks if not k.after_rejection]
    missed = [k for k in reached if not k.accepted and k.target_top]
    off = [k for k in reached if k.rank > 0]  # the argmax missed: how near was the target's token
    picks = {(r.round): r.selector.slots[slot] for r in proposing}
    left = [r for r in proposing if picks[r.round].off_argmax]
    judged_left = [r for r in left if not r.ranks[slot].after_rejection]
    helped = [r for r in judged_left if picks[r.round].chosen == r.target_tokens[slot]
              and picks[r.round].argmax != r.target_tokens[slot]]
    hurt = [r for r in judged_left if picks[r.round].argmax == r.target_tokens[slot]
            and picks[r.round].chosen != r.target_tokens[slot]]
    return dict(
        proposed=len(proposing), accepted=sum(k.accepted for k in ranks), reached=len(reached),
        rank0=sum(k.rank == 0 for k in reached), ranked=len(reached),
        rank_mean=statistics.mean(k.rank for k in reached) if reached else None,
        rank_median=statistics.median(k.rank for k in reached) if reached else None,
        in_k=sum(bool(k.in_candidates) for k in ranks),
        in_k_known=sum(k.in_candidates is not None for k in ranks),
        left=len(left), helped=len(helped), hurt=len(hurt),
        neutral=len(judged_left) - len(helped) - len(hurt),
        missed=len(missed), torn=sum(k.target_top[0].prob < 0.5 for k in missed),
        off_ranked=len(off), off_second=sum(k.rank == 1 for k in off),
        off_top5=sum(k.rank <= 4 for k in off), off_in_k=sum(bool(k.in_candidates) for k in off),
        off_in_k_known=sum(k.in_candidates is not None for k in off),
        top_k=max(r.selector.top_k for r in records),
    )


@pytest.mark.parametrize("first, last", [(None, None), (3, 9)])
def test_slot_aggregates_equal_a_count_over_the_records(decode, first, last):
    records, _, _ = decode
    history = History(keep=1)
    for record in records:
        history.add(record)
    if first is None:
        span, chosen = every_round(history), records
    else:
        span, chosen = rounds_span(history, first, last), [r for r in records if first <= r.round <= last]
    stats = aggregates.slot_stats(history, span)
    assert len(stats) == max(r.gamma for r in chosen)
    for s in stats:
        expected = _slots_from_records(chosen, s.slot)
        got = {k: getattr(s, k) for k in expected}
        assert got == pytest.approx(expected), f"slot {s.slot}"
    # the decode accepted a varying number, so the slots tell different stories
    assert len({s.accepted for s in stats}) > 1 and any(s.left for s in stats)
    assert any(s.missed for s in stats)
    assert any(s.off_ranked for s in stats) and any(s.off_in_k_known for s in stats)
    assert aggregates.mean_accepted(history, span) == pytest.approx(
        statistics.mean(r.accepted for r in chosen))
    assert aggregates.generated_tokens(history, span) == sum(len(r.committed_tokens) for r in chosen)


def test_near_misses_count_second_top5_and_in_k_by_rank(decode):
    """Where the argmax missed (rank > 0 on a reached slot): rank 1 is 2nd, ranks 1-4 are
    within the top 5 (rank 4 is the 5th token, rank 5 the 6th); rank 0 is no miss."""
    records, _, _ = decode
    history = History(keep=1)
    for record in records:
        history.add(record)
    reached = (history.flags.values[:, 0] & JUDGED) > 0
    ranks = np.resize(np.array([0, 1, 2, 4, 5, 30], np.int32), int(reached.sum()))
    history.rank.values[reached, 0] = ranks  # the column, as if the drafter had ranked so
    s = aggregates.slot_stats(history, every_round(history))[0]
    misses = ranks[ranks > 0]
    assert (s.off_ranked, s.off_second, s.off_top5) == (
        len(misses), int((misses == 1).sum()), int((misses <= 4).sum()))
    assert len(misses) >= 5 and s.off_top5_rate == s.off_top5 / s.off_ranked


def test_slot_acceptance_comes_from_the_verdict_when_ranks_are_off(decode):
    """A session run with ranks=False (the bench's setting) records no ranks: the slots'
    proposed / accepted / reached still follow each round's accepted count."""
    records, _, _ = decode
    full, bare = History(keep=1), History(keep=1)
    for record in records:
        full.add(record)
        bare.add(replace(record, ranks=()))
    with_ranks = aggregates.slot_stats(full, every_round(full))
    without = aggregates.slot_stats(bare, every_round(bare))
    assert [(s.proposed, s.accepted, s.reached) for s in without] == \
        [(s.proposed, s.accepted, s.reached) for s in with_ranks]
    assert sum(s.accepted for s in without) == sum(r.accepted for r in records) > 0
    assert all(s.ranked == 0 for s in without)


def test_buffer_aggregates_and_position_bins_equal_the_records(decode):
    records, _, _ = decode
    history = History(keep=1)
    for record in records:
        history.add(record)
    span = Span(2, len(records))
    chosen = records[2:]
    stats = aggregates.buffer_stats(history, span)
    assert len(stats) == len({(p.stage, p.layer, p.name) for r in chosen for p in r.probes})
    for b in stats:
        rows = [(r.round, p) for r in chosen for p in r.probes if (p.stage, p.layer, p.name) == (b.stage, b.layer, b.name)]
        rooms = [(p.fp16_headroom_bits, n) for n, p in rows if p.fp16_headroom_bits is not None]
        assert b.rounds == len(rows)
        if rooms:
            low = min(rooms, key=lambda x: x[0])
            assert b.min_headroom == pytest.approx(low[0], rel=1e-6) and b.min_headroom_round == low[1]
        absmax = [p.absmax for _, p in rows if p.absmax is not None]
        assert b.max_absmax == (pytest.approx(max(absmax), rel=1e-6) if absmax else None)
        assert b.nonfinite_rounds == sum(p.nonfinite for _, p in rows)
    bins = aggregates.acceptance_by_position(history, span, bins=3)
    assert sum(b.rounds for b in bins) == len(chosen)
    for b in bins:
        inside = [r.accepted for r in chosen if b.start <= r.position < b.stop]
        assert b.rounds == len(inside)
        assert b.mean_accepted == (pytest.approx(statistics.mean(inside)) if inside else None)


def test_nonfinite_buffers_are_counted_with_their_first_round(nan_pair):
    from dflash_tui.engine.api import load_pair
    from dflash_tui.engine.session import SessionOptions

    session = load_pair(*nan_pair).open("hi", options=SessionOptions(gamma=3))
    records = list(session.run(3))
    session.close()
    history = History(keep=1)
    for record in records:
        history.add(record)
    bad = [b for b in aggregates.buffer_stats(history, every_round(history)) if b.nonfinite_rounds]
    expected = {(p.stage, p.layer, p.name) for r in records for p in r.probes if p.nonfinite}
    assert {(b.stage, b.layer, b.name) for b in bad} == expected
    assert all(b.first_nonfinite_round == 0 and b.nonfinite_rounds == 3 for b in bad)


def test_search_finds_text_and_ids_where_the_records_have_them(decode):
    records, _, _ = decode
    history = History(keep=1)
    for record in records:
        history.add(record)
    # a token id: every place it was proposed, was the target's or was committed, as the
    # screen shows them: the target's row after the last proposal only as a round's bonus
    token = records[3].target_tokens[1]
    hits = search(history, f"#{token}")
    expected = set()
    for r in records:
        expected |= {(r.round, s) for s, t in enumerate(r.proposals) if t == token}
        expected |= {(r.round, s) for s, t in enumerate(r.target_tokens)
                     if t == token and (s < r.gamma or len(r.committed_tokens) > r.gamma)}
        expected |= {(r.round, s) for s, t in enumerate(r.committed_tokens) if t == token}
    assert {(h.round, h.slot) for h in hits} == expected
    gammas = {r.round: r.gamma for r in records}
    assert all(h.bonus == (h.slot == gammas[h.round]) for h in hits)
    # text spanning two tokens of a round's proposals, found at the slot where it starts
    r = records[5]
    text = r.text(r.proposals[1]) + r.text(r.proposals[2])[:1]
    found = [h for h in search(history, text.upper()) if h.round == r.round and "proposal" in h.where]
    assert (r.round, 1) in {(h.round, h.slot) for h in found}
    # n / N walk the hits in order and wrap
    assert step(hits, (hits[0].round, hits[0].slot), forward=True) == 1 % len(hits)
    assert step(hits, (hits[0].round, hits[0].slot), forward=False) == len(hits) - 1
    assert search(history, "   ") == []


def test_search_shows_the_bonus_on_the_last_slot_and_starts_at_a_rounds_first_slot(decode):
    records, _, _ = decode
    history = History(keep=1)
    for record in records:
        history.add(record)
    # every slot's committed token, in rounds that accepted every proposal and in others
    full = [r for r in records if r.accepted == r.gamma and len(r.committed_tokens) > r.gamma]
    short = [r for r in records if r.accepted < r.gamma]
    assert full and short
    r = full[0]
    bonus = [h for h in search(history, f"#{r.committed_tokens[r.gamma]}") if h.round == r.round
             and h.slot == r.gamma]
    assert len(bonus) == 1 and bonus[0].bonus and bonus[0].where == ("committed", "target")
    assert bonus[0].shown_slot == r.gamma - 1 and bonus[0].place == f"bonus after slot {r.gamma - 1}"
    # the target's token after the last proposal of a round that rejected one is shown
    # nowhere: no hit there (it is still found where it shows, if anywhere)
    for r in short:
        hits = search(history, f"#{r.target_tokens[r.gamma]}")
        assert (r.round, r.gamma) not in {(h.round, h.slot) for h in hits}
        assert all(not h.bonus for h in hits if h.round == r.round)
    # a new search starts at slot 0 of the round on screen; n from the hit shown goes to the
    # next one even where two share a row (the last slot and the bonus)
    r = full[0]
    hits = search(history, f"#{r.proposals[0]}")
    at = first(hits, r.round)
    assert (hits[at].round, hits[at].slot) == (r.round, 0)
    assert first(hits, records[-1].round + 1) == 0  # past the last hit: wraps to the first
    assert step(hits, (r.round, 3), forward=True, at=at) == (at + 1) % len(hits)
    assert step(hits, (r.round, 3), forward=False, at=at) == (at - 1) % len(hits)
