"""The decode-ordered validation measure (distill decode_eval.py) walks the rounds a real
engine session makes, on a drafter trained for a few steps on the tiny llama fixture."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_map

from dflash_tui.cli import main
from dflash_tui.engine.api import Pair
from dflash_tui.engine.checkpoint import load_drafter
from dflash_tui.engine.session import SessionOptions
from dflash_tui.engine.target import load_target
from dflash_tui_distill import dataset
from dflash_tui_distill.decode_eval import decode_acceptance, decode_rounds, whole_length
from dflash_tui_distill.objective import target_parts

GAMMA = 4
SEQ_LEN = 96  # training's; the walks read whole sequences (WHOLE)
WHOLE = 1024


@pytest.fixture(scope="module")
def trained(make_pair, tmp_path_factory):
    target_dir, _ = make_pair("llama")
    root = tmp_path_factory.mktemp("decode-eval")
    out, data = root / "drafter", root / "data"
    assert main(["distill", str(target_dir), "--out", str(out), "--data", str(data),
                 "--num-prompts", "24", "--max-new-tokens", "40", "--seed", "2",
                 "--layers", "1", "--block", "7", "--rank", "8", "--top-k", "8", "--batch", "3",
                 "--seq-len", str(SEQ_LEN), "--anchors", "6", "--steps", "12", "--eval-every", "0",
                 "--session-tokens", "0", "--no-progress", "--phase", "data"]) == 0
    assert main(["distill", str(target_dir), "--out", str(out), "--data", str(data),
                 "--layers", "1", "--block", "7", "--rank", "8", "--top-k", "8", "--batch", "3",
                 "--seq-len", str(SEQ_LEN), "--anchors", "6", "--steps", "12", "--eval-every", "0",
                 "--session-tokens", "0", "--no-progress", "--phase", "train"]) == 0
    drafter = load_drafter(out)
    # float32 on both sides, so a near-tie in bfloat16 logits cannot split the two paths.
    drafter.update(tree_map(lambda p: p.astype(mx.float32), drafter.parameters()))
    target = load_target(target_dir)
    return target, drafter, out, dataset.load_sequences(data, "validation")


def test_decoded_rounds_are_the_rounds_an_engine_session_makes(trained):
    target, drafter, out, held = trained
    target.hook(drafter.config.target_layer_ids)
    rows = list(range(len(held)))
    decoded = decode_rounds(drafter, target_parts(target, drafter.config), target, held, rows,
                            [GAMMA], WHOLE, batch=2)[GAMMA]
    target.unhook()
    pair = Pair(target, drafter, out)
    compared = 0
    for r, rounds in zip(rows, decoded):
        prompt_len = int(held.prompt_lens[r])
        stored = held.tokens[r][prompt_len:].tolist()
        session = pair.open(held.texts[r], options=SessionOptions(gamma=GAMMA, max_tokens=len(stored),
                                                                  probes=False))
        engine = list(session.run())
        session.close()
        assert session.generated[:len(stored)] == stored  # the same greedy text to walk along
        assert rounds and rounds[0].anchor == prompt_len
        # Every round the decode walk makes, the engine makes: same anchor, proposals, verdict;
        # except near the end, where the engine shortens its block to the token budget.
        full = [x for x in engine if x.gamma == GAMMA]
        assert engine[:len(full)] == full
        for mine, theirs in zip(rounds, full):
            assert (mine.anchor, mine.proposals, mine.accepted) == (
                theirs.position, list(theirs.proposals), theirs.accepted)
            compared += 1
        assert len(rounds) >= len(full)
    assert compared >= 5 * len(rows)
    assert any(x.accepted > 0 for rounds in decoded for x in rounds)


def test_decode_acceptance_pools_rounds_per_kind(trained):
    target, drafter, _, held = trained
    target.hook(drafter.config.target_layer_ids)
    parts = target_parts(target, drafter.config)
    result = decode_acceptance(drafter, parts, target, held, [2, GAMMA], WHOLE, batch=3)
    decoded = decode_rounds(drafter, parts, target, held, list(range(len(held))), [GAMMA], WHOLE, batch=1)[GAMMA]
    target.unhook()
    rounds = [x for seq in decoded for x in seq]
    assert result["sequences"] == len(held)
    assert result["gamma"][str(GAMMA)]["rounds"] == len(rounds)
    assert result["gamma"][str(GAMMA)]["accepted"] == pytest.approx(
        sum(x.accepted for x in rounds) / len(rounds))
    kinds = [held.kinds[r] for r, seq in enumerate(decoded) for _ in seq]
    assert result["gamma"][str(GAMMA)]["by_kind"] == {
        kind: round(np.mean([x.accepted for x, k in zip(rounds, kinds) if k == kind]), 4)
        for kind in set(held.kinds)}
    # A round moves accepted + 1 tokens on; the walk starts at each answer's first token and
    # stops with one token or none left after its anchor: so many tokens, at every gamma.
    answers = sum(len(t) - int(p) - 1 for t, p in zip(held.tokens, held.prompt_lens))
    for g, r in result["gamma"].items():
        walked = round(r["accepted"] * r["rounds"]) + r["rounds"]
        assert answers <= walked <= answers + len(held), g


def test_block_acceptance_at_a_decodes_anchors_is_that_decodes(trained):
    """evaluate.py judges blocks at fixed anchors, decode_eval.py (held to the engine above)
    the rounds of a decode: at the anchors the decode's rounds start from, the two are the
    same blocks, so the accepted counts, each slot's hits and each kind's mean agree."""
    from dflash_tui_distill.evaluate import EvalBlocks, evaluate

    target, drafter, _, held = trained
    target.hook(drafter.config.target_layer_ids)
    parts = target_parts(target, drafter.config)
    rows, width = list(range(len(held))), whole_length(held)
    decoded = decode_rounds(drafter, parts, target, held, rows, [GAMMA], width, batch=4)[GAMMA]
    # the rounds whose whole block lies inside the answer (evaluate's labels have no end)
    kept = [[x for x in seq if x.anchor + GAMMA < len(held.tokens[r])]
            for r, seq in zip(rows, decoded)]
    per = max(len(seq) for seq in kept)
    anchors = [[x.anchor for x in seq] + [-1] * (per - len(seq)) for seq in kept]
    blocks = EvalBlocks(np.repeat(rows, per), np.array(anchors).reshape(-1), per)
    result = evaluate(drafter, parts, target, held, blocks, [GAMMA], width, batch=4)
    target.unhook()
    got = result["gamma"][str(GAMMA)]
    rounds = [(r, x) for r, seq in zip(rows, kept) for x in seq]
    assert result["blocks"] == len(rounds)
    assert got["accepted"] == pytest.approx(np.mean([x.accepted for _, x in rounds]))
    assert any(x.accepted for _, x in rounds), "no round accepted anything: nothing to tell apart"
    hits = [[x.proposals[s] == held.tokens[r][x.anchor + 1 + s] for s in range(GAMMA)]
            for r, x in rounds]
    assert got["slot_acc"] == [round(v, 4) for v in np.mean(hits, axis=0)]
    kinds = {held.kinds[r] for r, _ in rounds}
    assert got["by_kind"] == {
        k: round(np.mean([x.accepted for r, x in rounds if held.kinds[r] == k]), 4) for k in kinds}
