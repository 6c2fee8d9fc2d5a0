"""The decode-ordered validation measure (distill decode_eval.py) walks the rounds a real
engine session makes, on a drafter trained for a few steps on the tiny llama fixture."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx.utils import tree_map

from dflash_tui.cli import main
from dflash_tui.engine.api import Pair
from dflash_tui.engine.checkpoint import load_drafter
from dflash_tui.engine.session import SessionOptions
from dflash_tui.engine.target import load_target
from dflash_tui_distill import dataset
from dflash_tui_distill.decode_eval import decode_acceptance, decode_rounds
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
    assert set(result["gamma"][str(GAMMA)]["by_kind"]) == set(held.kinds)
