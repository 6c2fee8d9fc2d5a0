"""The drafter's non-finite logits are counted every round, probes and ranks on or off: a
drafter that overflowed otherwise shows in the bench only as nothing accepted."""

from __future__ import annotations

import json

import mlx.core as mx
import numpy as np

from fixtures import drafter_tensors, write_drafter

from dflash_tui.engine import SessionOptions, Stage, load_pair
from dflash_tui.engine.probes import nonfinite_rows
from dflash_tui.snapshot import round_from_json, round_json

GAMMA = 4
QUIET = SessionOptions(gamma=GAMMA, probes=False, ranks=False)


def _first_round(target_dir, draft_dir, dtype="float32", options=QUIET):
    session = load_pair(target_dir, draft_dir, dtype=dtype).open("Hello there", options=options)
    try:
        return session.step_round()
    finally:
        session.close()


def test_nonfinite_rows_flags_a_nan_or_an_inf_and_not_a_large_finite_row():
    inf = float("inf")
    rows = mx.array([[1.0, 2.0, 3.0], [1.0, float("nan"), 3.0], [inf, 0.0, 0.0],
                     [-inf, 0.0, 0.0], [inf, -inf, 0.0]])
    assert nonfinite_rows(rows).tolist() == [False, True, True, True, True]
    # float16 logits near its limit sum far past it: the sum must not overflow to a flag
    big = mx.full((2, 64), 60000.0, dtype=mx.float16)
    assert nonfinite_rows(big).tolist() == [False, False]


def test_a_nan_drafter_flags_every_slot_with_probes_and_ranks_off(nan_pair):
    record = _first_round(*nan_pair)
    assert record.probes == () and record.ranks == () and record.first_nonfinite is None
    assert record.nonfinite_logit_slots == tuple(range(GAMMA))


def test_a_healthy_drafter_flags_none(make_pair):
    assert _first_round(*make_pair("llama", "DFlash2DraftModel")).nonfinite_logit_slots == ()


def test_a_float16_overflow_flags_the_slots_only_in_float16(make_pair, tmp_path):
    """The audit's fault, small: a huge gate_proj row overflows float16 (inf, then NaN
    downstream) and not float32."""
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    config = json.loads((draft_dir / "config.json").read_text())
    tensors = drafter_tensors(config, seed=1)
    tensors["layers.1.mlp.gate_proj.weight"][3] = 60000.0
    bad = write_drafter(tmp_path / "overflow", config, tensors=tensors)
    assert _first_round(target_dir, bad, dtype="float16").nonfinite_logit_slots == tuple(range(GAMMA))
    assert _first_round(target_dir, bad, dtype="float32").nonfinite_logit_slots == ()


def test_stepped_stages_fill_it_at_the_draft_stage_as_a_chained_round_does(nan_pair):
    session = load_pair(*nan_pair).open("Hello there", options=QUIET)
    try:
        assert session.step_stage().nonfinite_logit_slots is None  # context: not drafted yet
        assert session.next_stage is Stage.DRAFT
        drafted = session.step_stage()
        assert drafted.nonfinite_logit_slots == tuple(range(GAMMA))
        while not (record := session.step_stage()).complete:
            pass
        assert record.nonfinite_logit_slots == drafted.nonfinite_logit_slots
    finally:
        session.close()


def test_the_field_survives_a_snapshot_and_an_older_line_reads_as_unknown(nan_pair):
    record = _first_round(*nan_pair)
    line = json.loads(json.dumps(round_json(record)))
    assert line["nonfinite_logit_slots"] == list(range(GAMMA))
    assert round_from_json(line).nonfinite_logit_slots == tuple(range(GAMMA))
    del line["nonfinite_logit_slots"]  # a trace written before the field
    assert round_from_json(line).nonfinite_logit_slots is None
