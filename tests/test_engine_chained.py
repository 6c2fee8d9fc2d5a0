"""A round chained on the device (`step_round`) against the same round stepped stage by stage
(`step_stage`): the same records; a chained round waits for the device once; the DFlash2
walk on the device picks what the host walk picks; ranks off changes nothing else."""

from __future__ import annotations

from dataclasses import replace

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten

from conftest import DRAFTERS

from dflash_tui.engine import SessionOptions, load_pair
from dflash_tui.engine import probes as probes_module
from dflash_tui.engine import session as session_module
from dflash_tui.engine.device_walk import greedy_walk
from dflash_tui.engine.selector import to_lattice, walk

PROMPT = "for i in range(10):"


def _without_times(record):
    return replace(record, stages=tuple(replace(s, ms=0.0) for s in record.stages))


def _stepped(session):
    record = session.step_stage()
    while not record.complete:
        record = session.step_stage()
    return record


def _run(pair, options, chained):
    session = pair.open(PROMPT, options=options)
    records = []
    while session.finished is None:
        records.append(session.step_round() if chained else _stepped(session))
    session.close()
    return records


@pytest.mark.parametrize("drafter_kind", DRAFTERS)
@pytest.mark.parametrize("temperature", [0.0, 0.9])
@pytest.mark.parametrize("target_kind", ["llama", "qwen35"])
def test_chained_round_equals_stepped_round(make_pair, target_kind, drafter_kind, temperature):
    target_dir, draft_dir = make_pair(target_kind, drafter_kind)
    pair = load_pair(target_dir, draft_dir)
    options = SessionOptions(gamma=4, max_tokens=16, temperature=temperature, seed=3)
    chained = [_without_times(r) for r in _run(pair, options, chained=True)]
    stepped = [_without_times(r) for r in _run(pair, options, chained=False)]
    assert len(chained) == len(stepped) > 3
    assert chained == stepped
    assert all(r.probes and r.ranks for r in chained)


def test_chained_round_with_forced_proposals_equals_stepped(make_pair):
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    pair = load_pair(target_dir, draft_dir)
    forced = lambda tokens, gamma: [tokens[-1]] * gamma  # noqa: E731
    options = SessionOptions(gamma=4, max_tokens=24, proposer=forced)
    chained = [_without_times(r) for r in _run(pair, options, chained=True)]
    assert chained == [_without_times(r) for r in _run(pair, options, chained=False)]
    assert all(r.proposals == (r.anchor,) * r.gamma for r in chained)
    assert any(r.selector.slots[0].chosen != r.anchor for r in chained)  # the walk still shows


class _WaitWatch:
    """Counts the engine's waits for the device (mx.eval) and flags any device array read
    back that no wait evaluated (a conversion of a lazy array is a hidden wait)."""

    CONVERSIONS = ("tolist", "item", "__int__", "__float__", "__bool__", "__index__")

    def __init__(self, monkeypatch):
        self.waits = 0
        self.hidden: list[str] = []
        self._evaluated: dict[int, mx.array] = {}  # by id; the arrays are kept alive here
        real_eval = mx.eval

        def counting_eval(*args):
            self.waits += 1
            for _, a in tree_flatten(args):
                if isinstance(a, mx.array):
                    self._evaluated[id(a)] = a
            return real_eval(*args)

        monkeypatch.setattr(mx, "eval", counting_eval)
        for name in self.CONVERSIONS:
            monkeypatch.setattr(mx.array, name, self._guard(name, getattr(mx.array, name)))
        numpy = _GuardedNumpy(self)
        for module in (session_module, probes_module):
            monkeypatch.setattr(module, "np", numpy)

    def check(self, array, how: str) -> None:
        if isinstance(array, mx.array) and id(array) not in self._evaluated:
            self.hidden.append(f"{how} of shape {tuple(array.shape)}")

    def _guard(self, name, real):
        def converting(array, *args, **kwargs):
            self.check(array, name)
            return real(array, *args, **kwargs)
        return converting


class _GuardedNumpy:
    """numpy, with np.array / np.asarray of a device array checked by the watch."""

    def __init__(self, watch: _WaitWatch):
        self._watch = watch

    def __getattr__(self, name):
        real = getattr(np, name)
        if name not in ("array", "asarray"):
            return real

        def converting(value, *args, **kwargs):
            self._watch.check(value, f"np.{name}")
            return real(value, *args, **kwargs)
        return converting


@pytest.mark.parametrize("target_kind, drafter_kind, probes", [
    ("llama", "DFlashDraftModel", False), ("llama", "DFlash2DraftModel", False),
    ("llama", "DFlashDraftModel", True), ("llama", "DFlash2DraftModel", True),
    ("qwen35", "DFlash2DraftModel", False),  # rollback by restore and replay
])
def test_a_chained_round_waits_for_the_device_once(make_pair, monkeypatch, target_kind,
                                                   drafter_kind, probes):
    """Greedy, probes off or on: one wait a round (the goal is at most two), and nothing read
    back that the wait did not evaluate."""
    target_dir, draft_dir = make_pair(target_kind, drafter_kind)
    pair = load_pair(target_dir, draft_dir)
    session = pair.open(PROMPT, options=SessionOptions(gamma=5, max_tokens=40, probes=probes,
                                                       ranks=probes))
    watch = _WaitWatch(monkeypatch)
    waits = []
    for record in session.run():
        waits.append(watch.waits)
        watch.waits = 0
    session.close()
    assert len(waits) > 5 and set(waits) == {1}
    assert watch.hidden == []
    assert session.waits.count == len(waits) + 1  # and one for the prefill


def test_the_watch_sees_a_hidden_wait(make_pair, monkeypatch):
    """The check above can fail: a stage that reads a lazy array back is caught."""
    target_dir, draft_dir = make_pair("llama", "DFlashDraftModel")
    session = load_pair(target_dir, draft_dir).open(PROMPT, options=SessionOptions(gamma=3))
    watch = _WaitWatch(monkeypatch)
    draft = session_module.Session._draft

    def peeking_draft(self, r, sink):
        drafted = draft(self, r, sink)
        int(mx.argmax(drafted.logits[0]))  # a stage peeking at its output
        return drafted

    monkeypatch.setattr(session_module.Session, "_draft", peeking_draft)
    session.step_round()
    session.close()
    assert watch.hidden == ["__int__ of shape ()"]


def test_ranks_off_leaves_the_rest_of_the_record(make_pair):
    target_dir, draft_dir = make_pair("qwen35", "DFlash2DraftModel")
    pair = load_pair(target_dir, draft_dir)
    on = _run(pair, SessionOptions(gamma=4, max_tokens=24), chained=True)
    off = _run(pair, SessionOptions(gamma=4, max_tokens=24, ranks=False), chained=True)
    assert all(r.ranks for r in on) and not any(r.ranks for r in off)
    strip = lambda r: replace(_without_times(r), ranks=(), token_text={})  # noqa: E731
    assert [strip(r) for r in on] == [strip(r) for r in off]


@pytest.mark.parametrize("slots", [1, 2, 7, 15])
def test_device_walk_picks_what_the_host_walk_picks(slots):
    rng = np.random.default_rng(slots)
    k = 8
    for trial in range(20):
        unary = rng.standard_normal((slots, k)).astype(np.float32)
        edges0 = rng.standard_normal((1, k)).astype(np.float32)
        edges = rng.standard_normal((max(slots - 1, 1), k, k)).astype(np.float32)
        if trial % 2:  # ties: whole rows of equal scores, so the first best must win on both
            unary[:] = 1.0
            edges0[:] = 0.5
            edges[:, :, ::2] = edges[:, :, 1::2]
        later = edges if slots > 1 else None
        host, _ = walk(to_lattice(np.zeros((slots, k)), unary, edges0, later), 0.0, None)
        device = greedy_walk(mx.array(unary), mx.array(edges0),
                             None if later is None else mx.array(later))
        assert np.array(device).tolist() == host


def test_a_decode_bounds_mlx_buffer_cache(make_pair):
    from dflash_tui.engine.memory import FLOOR, weights_bytes

    target_dir, draft_dir = make_pair("llama", "DFlashDraftModel")
    pair = load_pair(target_dir, draft_dir)
    previous = mx.set_cache_limit(1 << 40)
    pair.open(PROMPT).close()
    set_by_the_session = mx.set_cache_limit(previous)
    assert set_by_the_session == max(FLOOR, weights_bytes(pair) // 16) == FLOOR
