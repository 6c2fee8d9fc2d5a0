"""The compare lab (engine/compare.py): a reference drafter configuration beside the primary.

What is checked against things the compare code does not compute itself: the reference
against an identical copy (zero everywhere), a NaN planted in one layer, a layer offset, an
fp16 overflow and the residual scale that removes it; the reference's proposals and ranks
against an ordinary session whose drafter IS the reference, forced along the same committed
stream; its accepted counts against the target's own greedy decode (mlx-lm), including the
rounds where only a second verify can tell; and the primary's decode left unchanged.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest

from conftest import DRAFTERS, TARGETS
from fixtures import drafter_tensors, write_drafter
from greedy import greedy_tokens, load_reference

from dflash_tui.compare_notes import tol_hint_applies
from dflash_tui.engine import SessionOptions, load_pair
from dflash_tui.engine.compare import greedy_prefix, known_accepted
from dflash_tui.engine.errors import InputError
from dflash_tui.engine.probes import BUFFERS

PROMPT = "Seven times eight is"
TOKENS = 24


def _rounds(pair, gamma=5, tokens=TOKENS, stage_by_stage=False, **options):
    session = pair.open(PROMPT, options=SessionOptions(gamma=gamma, max_tokens=tokens, **options))
    records = []
    while session.finished is None:
        if stage_by_stage:
            record = session.step_stage()
            while not record.complete:
                assert record.compare is None  # the reference's record comes with the commit
                record = session.step_stage()
        else:
            record = session.step_round()
        records.append(record)
    session.close()
    return session, records


def _drafter_buffers(record) -> set:
    """The primary's own probes of the stages the reference runs (context, draft)."""
    return {(p.stage, p.layer, p.name) for p in record.probes if p.stage in ("context", "draft")}


@pytest.mark.parametrize("target_kind", TARGETS)
@pytest.mark.parametrize("drafter_kind", DRAFTERS)
def test_compare_against_itself_is_zero_everywhere(make_pair, target_kind, drafter_kind):
    target_dir, draft_dir = make_pair(target_kind, drafter_kind)
    plain_session, plain = _rounds(load_pair(target_dir, draft_dir))
    session, records = _rounds(load_pair(target_dir, draft_dir, compare=str(draft_dir)))
    assert session.generated == plain_session.generated  # the decode is unchanged
    assert session.info.compare_quantization is None  # a float reference
    for record in records:
        c = record.compare
        assert c.spec == str(draft_dir) and c.first_divergent is None and not c.reverified
        assert c.proposals == record.proposals and c.accepted == record.accepted
        assert c.ranks == tuple(s.rank for s in record.ranks)
        # every buffer the primary's drafter probed, each exactly equal
        assert {(b.stage, b.layer, b.buffer) for b in c.buffers} == _drafter_buffers(record)
        assert all(b.max_abs_diff == 0 and b.rel_err == 0 and b.nonfinite is None
                   for b in c.buffers)


def test_stepping_stage_by_stage_gives_the_rounds_records(make_pair):
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    pair = load_pair(target_dir, draft_dir, compare="layer-offset=-1")
    _, chained = _rounds(pair)
    _, stepped = _rounds(pair, stage_by_stage=True)
    untimed = lambda records: [replace(r.compare, ms=0.0) for r in records]  # noqa: E731
    assert untimed(stepped) == untimed(chained)


def test_a_nan_planted_in_one_layer_is_named_as_the_first_divergence(make_pair, nan_pair):
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    _, nan_dir = nan_pair  # the same weights as draft_dir, but layer 1's down_proj is NaN
    _, records = _rounds(load_pair(target_dir, draft_dir, compare=str(nan_dir)))
    for record in records:
        assert record.first_nonfinite is None  # the primary is healthy
        first = record.compare.first_divergent
        assert (first.stage, first.layer, first.buffer) == ("draft", 1, "ffn_out")
        assert first.nonfinite == "reference" and first.rel_err is None
        before = record.compare.buffers[:record.compare.buffers.index(
            next(b for b in record.compare.buffers if b.buffer == "ffn_out" and b.layer == 1))]
        assert before and all(b.max_abs_diff == 0 for b in before)


def test_layer_offset_minus_one_first_diverges_in_the_context_stage(make_pair):
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    plain_session, _ = _rounds(load_pair(target_dir, draft_dir))
    pair = load_pair(target_dir, draft_dir, compare="layer-offset=-1")
    session, records = _rounds(pair)
    assert session.generated == plain_session.generated
    assert session.compare.layer_ids == tuple(i - 1 for i in session.layer_ids)
    for record in records:
        first = record.compare.first_divergent
        assert (first.stage, first.layer, first.buffer) == ("context", None, "capture")
    # the same offset as the primary's: nothing diverges
    _, records = _rounds(load_pair(target_dir, draft_dir, compare="layer-offset=0"))
    assert all(r.compare.first_divergent is None for r in records)


@pytest.fixture(scope="module")
def overflow_pair(make_pair, fixture_root):
    """A DFlash drafter whose layer-0 MLP writes about 1e5 into the residual stream: past
    float16's 65504, within it once divided by 8."""
    target_dir, draft_dir = make_pair("llama", "DFlashDraftModel")
    config = json.loads((draft_dir / "config.json").read_text())
    tensors = drafter_tensors(config, seed=1)
    tensors["layers.0.mlp.down_proj.weight"] *= 120_000.0
    return target_dir, write_drafter(fixture_root / "fp16-overflow", config, tensors=tensors)


def test_an_fp16_overflow_diverges_where_it_overflows_and_the_residual_scale_removes_it(
        overflow_pair):
    target_dir, draft_dir = overflow_pair
    _, records = _rounds(load_pair(target_dir, draft_dir, compare="dtype=float16"))
    for record in records:
        out = next(p for p in record.probes if (p.stage, p.layer, p.name) == ("draft", 0, "ffn_out"))
        assert out.absmax > 65504  # the primary (float32) holds what float16 cannot
        first = record.compare.first_divergent
        assert (first.stage, first.layer, first.buffer, first.nonfinite) == \
            ("draft", 0, "ffn_out", "reference")
    _, records = _rounds(load_pair(target_dir, draft_dir,
                                   compare="dtype=float16,residual-scale=8"))
    for record in records:
        assert record.compare.first_divergent is None
        worst = max(b.rel_err for b in record.compare.buffers)
        assert 0 < worst < record.compare.tolerance  # float16 rounding, nothing more


def test_an_overflow_behind_a_rounding_divergence_is_named_and_its_logits_counted(
        fp16_overflow_pair):
    """A float16 reference that overflows, at a tolerance its rounding passes (a bfloat16
    drafter against float16 sits there at the default 0.01): the first divergent buffer is
    rounding, well before the overflow, so the record names the first buffer non-finite on
    one side only on its own, and counts the reference's NaN / Inf logit slots as the
    drafter's own are counted. A practitioner asking why float16 collapses reads both."""
    target_dir, draft_dir = fp16_overflow_pair
    _, records = _rounds(load_pair(target_dir, draft_dir, compare="dtype=float16",
                                   compare_tol=1e-5), probes=False)
    for record in records:
        c = record.compare
        first, bad = c.first_divergent, c.first_nonfinite
        assert first.nonfinite is None and first.rel_err > 1e-5  # rounding: a number
        assert (bad.stage, bad.layer, bad.nonfinite) == ("draft", 0, "reference")
        assert bad.buffer in ("ffn_out", "conv_f2")  # the MLP's output, or the conv after it
        assert first.where != bad.where and c.nonfinite_after_first == bad
        assert c.nonfinite_logit_slots == tuple(range(record.gamma))  # every slot garbage
        assert record.nonfinite_logit_slots == ()  # the float32 drafter holds 1e5
    # at the default tolerance the overflow is the first divergence: named once, there
    _, records = _rounds(load_pair(target_dir, draft_dir, compare="dtype=float16"), probes=False)
    for record in records:
        c = record.compare
        assert c.first_divergent == c.first_nonfinite and c.nonfinite_after_first is None
        assert c.nonfinite_logit_slots == tuple(range(record.gamma))
    # the residual scale keeps float16 finite: nothing to name, no logit slot counted
    _, records = _rounds(load_pair(target_dir, draft_dir,
                                   compare="dtype=float16,residual-scale=16"), probes=False)
    assert all(r.compare.first_nonfinite is None and r.compare.nonfinite_logit_slots == ()
               for r in records)


def _proposer(truth: list[int], prompt_len: int, wrong_at):
    """The target's greedy continuation, with a wrong token at slot wrong_at(gamma) (gamma:
    none)."""

    def propose(tokens: list[int], gamma: int) -> list[int]:
        done = len(tokens) - prompt_len
        out = truth[done:done + gamma]
        slot = wrong_at(gamma)
        return [t if i != slot else (t + 1) % 64 for i, t in enumerate(out)]

    return propose


@pytest.mark.parametrize("target_kind", TARGETS)
def test_the_reference_accepted_count_equals_the_targets_greedy_decode(make_pair, target_kind):
    """Primary and reference each propose the target's greedy continuation with a wrong
    token at a random slot of their own: every case of who misses first, including the
    reference getting right the slot the primary missed (a second verify). Its counts must
    equal what mlx-lm's own greedy decode of the target says, and the decode stays lossless
    with the target's cache as the commit left it."""
    target_dir, draft_dir = make_pair(target_kind, "DFlash2DraftModel")
    gamma = 6
    pair = load_pair(target_dir, draft_dir, compare=str(draft_dir))
    probe_session = pair.open(PROMPT, prefill=False)
    prompt_ids, eos = probe_session.prompt_ids, probe_session.eos_ids
    probe_session.close()
    model, _ = load_reference(str(target_dir))
    truth = greedy_tokens(model, prompt_ids, TOKENS + gamma + 1)  # past EOS too: what verify sees
    rng_p, rng_r = random.Random(1), random.Random(2)
    primary_at = _proposer(truth, len(prompt_ids), lambda g: rng_p.randrange(g + 1))
    pair.reference.proposer = _proposer(truth, len(prompt_ids), lambda g: rng_r.randrange(g + 1))
    session, records = _rounds(pair, gamma=gamma, proposer=primary_at)
    expected = greedy_tokens(model, prompt_ids, TOKENS, eos)
    assert session.generated == expected
    reverified = 0
    for record in records:
        done = record.position - len(prompt_ids) + 1
        want = greedy_prefix(list(record.compare.proposals), truth[done:done + record.gamma])
        assert record.compare.accepted == want
        if record.finish_reason is None:  # (the last round's bonus may be cut by the budget)
            assert record.state_after.target_offset == record.state_after.committed - 1
        reverified += record.compare.reverified
        # needed exactly when the reference got right the slot the primary missed, and
        # proposed more after it
        assert record.compare.reverified == (record.accepted < want and
                                             record.accepted + 1 < record.gamma)
    assert reverified >= 2  # the second verify ran, and more than once


def test_known_accepted_decides_what_the_primarys_verify_can():
    targets = [5, 6, 7, 8, 9]  # after the anchor + the primary's prefixes
    primary = [5, 6, 0, 0]  # accepts 2
    assert known_accepted([5, 6, 0, 0], primary, targets) == (2, None)  # as the primary
    assert known_accepted([5, 1, 0, 0], primary, targets) == (1, None)  # misses earlier
    assert known_accepted([5, 6, 3, 0], primary, targets) == (2, None)  # misses the same slot
    assert known_accepted([5, 6, 7, 8], primary, targets) == (3, 3)  # beyond: unknown from 3
    assert known_accepted([5, 6, 7], [5, 6, 7], targets) == (3, None)  # all accepted


def test_the_reference_runs_on_exactly_the_primarys_inputs(make_pair, fixture_root):
    """Its proposals and ranks equal those of an ordinary session whose drafter is the
    reference, forced along the same committed stream (the primary's proposals)."""
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    config = json.loads((draft_dir / "config.json").read_text())
    other = write_drafter(fixture_root / "another-drafter", config, seed=7)
    _, records = _rounds(load_pair(target_dir, draft_dir, compare=str(other)))
    by_position = {r.position: r.proposals for r in records}
    alone = load_pair(target_dir, other)
    forced = lambda tokens, gamma: list(by_position[len(tokens) - 1])  # noqa: E731
    _, own = _rounds(alone, proposer=forced)
    assert [r.committed_tokens for r in own] == [r.committed_tokens for r in records]
    for mine, theirs in zip(own, records):
        c = theirs.compare
        assert tuple(s.chosen for s in mine.selector.slots) == c.proposals
        assert c.argmax == tuple(s.argmax for s in mine.selector.slots)
        assert c.left_argmax == tuple(s.off_argmax for s in mine.selector.slots)
        for s, rank in enumerate(mine.ranks):
            # where the target ran the reference's own prefix, or nothing of it (None), the
            # rank is of the primary's row, which this session verified too (a second verify's
            # rows are checked against mlx-lm in the next test)
            if c.targets[s] in (None, mine.target_tokens[s]):
                assert c.ranks[s] == rank.rank
            if c.targets[s] is not None:
                assert c.in_candidates[s] == (c.targets[s] in mine.selector.slots[s].candidates)
    assert any(r.compare.proposals != r.proposals for r in records)  # another drafter


def test_a_quantized_reference_loads_and_compares(make_pair, tmp_path):
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    pair = load_pair(target_dir, draft_dir, compare="bits=8", keep_quantized=True)
    linears = [m for _, m in pair.reference.drafter.named_modules() if isinstance(m, nn.QuantizedLinear)]
    assert linears and all(m.bits == 8 and m.group_size == 64 for m in linears)
    session, records = _rounds(pair)
    assert session.info.compare_quantization.startswith("q8/g64")
    for record in records:
        assert len(record.compare.proposals) == record.gamma
        assert {(b.stage, b.layer, b.buffer) for b in record.compare.buffers} == _drafter_buffers(record)
        # 8-bit weights: small differences from the first quantized projection on
        errors = [b.rel_err for b in record.compare.buffers]
        assert all(e is not None and e < 0.5 for e in errors) and max(errors) > 0
    # a quantized primary is quantized again from the values its packed weights hold
    from dflash_tui.engine.checkpoint import save_drafter

    save_drafter(pair.reference.drafter, tmp_path / "q8")
    again = load_pair(target_dir, tmp_path / "q8", compare="bits=4", keep_quantized=True)
    linears = [m for _, m in again.reference.drafter.named_modules() if isinstance(m, nn.QuantizedLinear)]
    assert linears and all(m.bits == 4 for m in linears)
    primary = again.drafter.layers[0].mlp.down_proj
    values = mx.dequantize(primary.weight, primary.scales, primary.biases, primary.group_size, primary.bits)
    requantized = mx.quantize(values, 64, 4)
    assert np.array_equal(np.array(again.reference.drafter.layers[0].mlp.down_proj.weight),
                          np.array(requantized[0]))
    # and a quantized copy on disk is a SPEC like any drafter directory
    session, records = _rounds(load_pair(target_dir, draft_dir, compare=str(tmp_path / "q8")))
    assert all(r.compare.buffers for r in records)
    # the engine says it is quantized, so the notes need not read its config again
    assert session.info.compare_quantization.startswith("q8/g64") and tol_hint_applies(session.info)


def test_on_the_cpu_a_quantized_reference_computes_in_float(make_pair):
    """As the primary (engine/quantize.py, dequantize_for_cpu): the 8-bit weights in float,
    the same proposals and nearly the same drift as with the quantized kernels."""
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    runs = {}
    for keep in (False, True):
        pair = load_pair(target_dir, draft_dir, compare="bits=8", keep_quantized=keep)
        packed = [m for _, m in pair.reference.drafter.named_modules() if isinstance(m, nn.QuantizedLinear)]
        session, records = _rounds(pair)
        runs[keep] = packed, session.info.compare_quantization, records
    (packed, label, records), (kept_packed, kept_label, kept_records) = runs[False], runs[True]
    assert packed == [] and kept_packed and label == kept_label and label.startswith("q8/g64")
    assert [r.compare.proposals for r in records] == [r.compare.proposals for r in kept_records]
    for mine, kept in zip(records, kept_records):
        for a, b in zip(mine.compare.buffers, kept.compare.buffers):
            assert (a.stage, a.layer, a.buffer) == (b.stage, b.layer, b.buffer)
            assert abs(a.rel_err - b.rel_err) <= 1e-3 * (1 + b.rel_err)


def test_a_reference_for_another_target_is_refused_by_name(make_pair, tmp_path):
    from fixtures import write_sample_shaped_drafter

    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    other = write_sample_shaped_drafter(tmp_path / "other")
    pair = load_pair(target_dir, draft_dir, compare=str(other))
    with pytest.raises(InputError, match=rf"^--compare {other}: drafter hidden_size 576 "):
        pair.open(PROMPT)
    pair = load_pair(target_dir, draft_dir, compare="layer-offset=-2")
    with pytest.raises(InputError, match=r"^--compare layer-offset=-2: target_layer_ids\[0\] = 1 "
                                         r"\+ layer offset -2 is out of range"):
        pair.open(PROMPT)


def test_a_block_beyond_the_references_sliding_window_is_refused_as_the_references(
        make_pair, tmp_path):
    """The reference drafts the primary's block, so its drafter's window bounds the block too:
    at open and at every change of block (set_gamma let the reference draft a block its
    sliding layers cannot see whole), named as the reference's (the primary has no window)."""
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    config = json.loads((draft_dir / "config.json").read_text())
    config["layer_types"][0], config["sliding_window"] = "sliding_attention", 8
    sliding = write_drafter(tmp_path / "sliding", config, seed=3)
    pair = load_pair(target_dir, draft_dir, compare=str(sliding))
    refused = rf"^gamma=8: --compare {sliding}: a block of 9 rows exceeds the drafter's sliding_window 8"
    with pytest.raises(InputError, match=refused):
        pair.open(PROMPT, options=SessionOptions(gamma=8))
    session = pair.open(PROMPT, options=SessionOptions(gamma=4, max_tokens=TOKENS))
    session.step_round()
    with pytest.raises(InputError, match=refused):
        session.set_gamma(8)
    assert session.gamma == 4 and session.set_gamma(7) == 7
    assert session.step_round().gamma == 7
    session.close()


def test_compare_needs_temperature_zero(make_pair):
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    pair = load_pair(target_dir, draft_dir, compare="dtype=float16")
    with pytest.raises(InputError, match="temperature=0.5: --compare counts .* needs temperature 0"):
        pair.open(PROMPT, options=SessionOptions(temperature=0.5))


def test_a_pair_without_reference_records_no_compare(make_pair):
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    pair = load_pair(target_dir, draft_dir)
    assert pair.reference is None
    _, records = _rounds(pair, tokens=8)
    assert all(r.compare is None for r in records)


def test_every_drafter_buffer_is_compared(make_pair):
    """The drift covers each context and draft buffer of probes.BUFFERS the drafter has."""
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    _, records = _rounds(load_pair(target_dir, draft_dir, compare="dtype=bfloat16"), tokens=4)
    names = {b.buffer for b in records[0].compare.buffers}
    declared = {n for stage in ("context", "draft") for part in BUFFERS[stage] for n in part}
    assert names == declared


# ---- the reference's slots, notes, left-out buffers and time ---------------------------------

@pytest.mark.parametrize("target_kind", TARGETS)
def test_the_references_slots_are_judged_against_its_own_prefix(make_pair, fixture_root,
                                                                target_kind):
    """Per slot the reference's record holds what the primary's slots do. On every slot the
    reference reached, checked against things the compare code does not compute: the target's
    token is mlx-lm's greedy decode (a second verify's rows included), its rank is counted in
    the raw logits of an ordinary session whose drafter is the reference (forced along the
    same stream), and its argmax, walk and candidates are that session's selector's."""
    target_dir, draft_dir = make_pair(target_kind, "DFlash2DraftModel")
    config = json.loads((draft_dir / "config.json").read_text())
    other = write_drafter(fixture_root / f"slots-reference-{target_kind}", config, seed=7)
    gamma = 6
    pair = load_pair(target_dir, draft_dir, compare=str(other))
    opened = pair.open(PROMPT, prefill=False)
    prompt_ids = opened.prompt_ids
    opened.close()
    model, _ = load_reference(str(target_dir))
    truth = greedy_tokens(model, prompt_ids, TOKENS + gamma + 1)
    rng_p, rng_r = random.Random(3), random.Random(4)
    primary_at = _proposer(truth, len(prompt_ids), lambda g: rng_p.randrange(g + 1))
    pair.reference.proposer = _proposer(truth, len(prompt_ids), lambda g: rng_r.randrange(g + 1))
    _, records = _rounds(pair, gamma=gamma, proposer=primary_at)
    by_position = {r.position: r.proposals for r in records}
    forced = lambda tokens, g: list(by_position[len(tokens) - 1])  # noqa: E731
    _, own = _rounds(load_pair(target_dir, other), gamma=gamma, proposer=forced, keep_raw=True)
    beyond = 0  # reached slots only a second verify could judge
    for record, mine in zip(records, own):
        c, done = record.compare, record.position - len(prompt_ids) + 1
        logits = mine.raw["draft/logits"]
        walk = mine.selector.slots
        assert c.argmax == tuple(s.argmax for s in walk)
        assert c.left_argmax == tuple(s.off_argmax for s in walk)
        for s in range(min(c.accepted + 1, record.gamma)):  # the slots the reference reached
            target = truth[done + s]
            assert c.targets[s] == target
            assert c.ranks[s] == int((logits[s] > logits[s, target]).sum())
            assert c.in_candidates[s] == (target in walk[s].candidates)
            beyond += s > record.accepted
    assert beyond >= 2


def test_a_references_notes_are_shown_as_the_references(make_pair, fixture_root):
    """A reference trained for a smaller block gets the note the drafter would get, named as
    the reference's; a note both drafters share is shown once."""
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    config = json.loads((draft_dir / "config.json").read_text())
    config["dflash_config"]["block_size"] = 4
    small = write_drafter(fixture_root / "block-4-reference", config, seed=5)
    session = load_pair(target_dir, draft_dir, compare=str(small)).open(
        PROMPT, options=SessionOptions(gamma=5, max_tokens=4))
    assert session.info.notes == (
        f"--compare {small}: its config.json differs from the drafter's: dflash_config.block_size "
        "= 4 (the drafter: 16)",
        f"--compare {small}: block of 5 proposals is beyond the 3 the drafter was trained for")
    session.close()
    session = load_pair(target_dir, draft_dir, compare="bits=8").open(
        PROMPT, options=SessionOptions(gamma=16, max_tokens=4))
    assert session.info.notes == ("block of 16 proposals is beyond the 15 the drafter was "
                                  "trained for",)  # the same checkpoint: once
    session.close()


def test_a_reference_directorys_config_fields_that_differ_are_named(make_pair, fixture_root):
    """A porter's config slip (rope_theta, mask_token_id, target_layer_ids) shows in the drift
    table as the first buffer it touches (ctx_k, the block's x, the capture); compared with a
    drafter whose config is right, the note names the field and both values."""
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    config = json.loads((draft_dir / "config.json").read_text())
    tensors = drafter_tensors(config, seed=1)  # the drafter's own weights
    config["rope_theta"] = 10000.0
    config["dflash_config"].update(mask_token_id=0, target_layer_ids=[0, 1, 2])
    wrong = write_drafter(fixture_root / "wrong-config", config, tensors=tensors)
    session = load_pair(target_dir, wrong, compare=str(draft_dir)).open(
        PROMPT, options=SessionOptions(gamma=4, max_tokens=4))
    right = json.loads((draft_dir / "config.json").read_text())
    assert session.info.notes == (
        f"--compare {draft_dir}: its config.json differs from the drafter's: rope_theta = "
        f"{right['rope_theta']!r} (the drafter: 10000.0); dflash_config.target_layer_ids = "
        f"{right['dflash_config']['target_layer_ids']!r} (the drafter: [0, 1, 2]); "
        f"dflash_config.mask_token_id = {right['dflash_config']['mask_token_id']!r} (the "
        "drafter: 0)",)
    record = session.step_round()
    assert record.compare.first_divergent.where.startswith("context")
    session.close()
    for same in (str(draft_dir), "bits=8", "layer-offset=-1"):  # nothing in config.json differs
        session = load_pair(target_dir, draft_dir, compare=same).open(
            PROMPT, options=SessionOptions(gamma=4, max_tokens=4))
        assert session.info.notes == (), same
        session.close()


def test_a_directory_reference_shifted_by_the_sessions_layer_offset_says_what_it_reads(
        make_pair, fixture_root):
    """Wrong ids ([0, 1] for [1, 2]) corrected with --layer-offset 1, compared with the right
    drafter: the reference runs at the session's offset too, so it reads [2, 3] and its
    capture parts from the drafter's. The note says so, where it named only the ids."""
    target_dir, right = make_pair("llama", "DFlash2DraftModel", layer_ids=(1, 2))
    config = json.loads((right / "config.json").read_text())
    tensors = drafter_tensors(config, seed=1)
    config["dflash_config"]["target_layer_ids"] = [0, 1]
    wrong = write_drafter(fixture_root / "ids-one-low", config, tensors=tensors)
    session = load_pair(target_dir, wrong, compare=str(right)).open(
        PROMPT, options=SessionOptions(gamma=4, max_tokens=4, layer_offset=1))
    assert session.info.notes == (
        f"--compare {right}: its config.json differs from the drafter's: "
        "dflash_config.target_layer_ids = [1, 2] (the drafter: [0, 1]); with --layer-offset +1 "
        "applied to it too, it reads target layers [2, 3] (the drafter: [1, 2])",)
    assert session.step_round().compare.first_divergent.where == "context capture"
    session.close()


def test_buffers_of_another_shape_are_named_as_left_out(make_pair, fixture_root):
    """A reference with another MLP width: the buffers of that width cannot be compared, and
    the record says which, with both shapes; every other buffer is compared as before."""
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    config = json.loads((draft_dir / "config.json").read_text())
    narrow = write_drafter(fixture_root / "narrow-mlp-reference",
                           {**config, "intermediate_size": 96}, seed=2)
    _, records = _rounds(load_pair(target_dir, draft_dir, compare=str(narrow)), tokens=8)
    for record in records:
        c = record.compare
        left = {(b.stage, b.layer, b.buffer): (b.primary_shape, b.reference_shape)
                for b in c.left_out}
        assert {name for _, _, name in left} == {"ffn_gate", "ffn_up", "ffn_act"}
        assert {layer for _, layer, _ in left} == set(range(config["num_hidden_layers"]))
        assert all(p[-1] == 128 and r[-1] == 96 and p[:-1] == r[:-1] for p, r in left.values())
        compared = {(b.stage, b.layer, b.buffer) for b in c.buffers}
        assert compared | left.keys() == _drafter_buffers(record) and not compared & left.keys()
    # against itself nothing is left out
    _, records = _rounds(load_pair(target_dir, draft_dir, compare=str(draft_dir)), tokens=4)
    assert all(r.compare.left_out == () for r in records)


@pytest.mark.parametrize("stage_by_stage", [False, True])
def test_the_references_time_is_its_own_not_the_stages(make_pair, monkeypatch, stage_by_stage):
    """The reference's work (here made slow on purpose, in its draft and commit seams) is
    timed in its record and kept out of the primary's stage times: commit is the commit."""
    import time

    from dflash_tui.engine import compare

    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    # longer than any fixture stage takes, even on a loaded machine (a CI run with other work
    # beside it saw a draft stage of 254 ms), so a seam's sleep counted in a stage shows
    slow = 0.4

    def slowly(f):
        def run(*args):
            time.sleep(slow)
            return f(*args)
        return run

    monkeypatch.setattr(compare.Comparison, "_drift", slowly(compare.Comparison._drift))
    monkeypatch.setattr(compare, "known_accepted", slowly(compare.known_accepted))
    _, records = _rounds(load_pair(target_dir, draft_dir, compare="dtype=bfloat16"),
                         tokens=6, stage_by_stage=stage_by_stage)
    for record in records:
        assert record.compare.ms >= 2 * slow * 1000
        assert all(ms < slow * 1000 for ms in record.timings_ms.values()), record.timings_ms


def test_a_nan_drafter_never_ranks_the_targets_token_first(make_pair, nan_pair):
    """Its logits are NaN, its proposals garbage: rank 0 ("the argmax was the target's
    token") on such a slot made the aggregates read argmax 100% beside acc 0%, on the
    drafter's side and on the reference's."""
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    _, nan_dir = nan_pair
    _, records = _rounds(load_pair(target_dir, nan_dir))
    assert all(r.rank > 0 for record in records for r in record.ranks)
    _, records = _rounds(load_pair(target_dir, draft_dir, compare=str(nan_dir)))
    ranks = [rank for record in records for rank in record.compare.ranks]
    assert ranks and all(rank > 0 for rank in ranks)
