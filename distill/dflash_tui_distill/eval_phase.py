"""The eval phase: the checkpoint in --out, loaded the way a user loads it, judged on the
validation split, then run for real in the engine.

The target is in float32 here whatever training used: that is how `dflash-tui bench`
runs it by default, so these are the numbers the bench should see (on validation data of
the same kinds; sample_prompts/ itself is the bench's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from dflash_tui.engine.checkpoint import load_drafter
from dflash_tui.engine.errors import InputError
from dflash_tui.engine.files import write_json_atomic

from . import dataset, state as state_lib
from .decode_eval import decode_acceptance, whole_length
from .evaluate import accepted_by_gamma, eval_blocks, evaluate, session_check, summary_line
from .objective import target_parts
from .settings import RunSettings

Say = Callable[[str], None]
FINAL_BLOCKS_FACTOR = 4
SESSION_GAMMA = 7
DECODE_BATCH = 64  # answers walked at once; on a GPU a step costs its ops more than its width


def run_eval_phase(load_target32, out: Path, data_dir: Path, run: RunSettings, say: Say) -> dict:
    if not (out / "config.json").is_file():
        raise InputError(f"--out {out}: no drafter checkpoint to evaluate (run --phase train first)")
    drafter = load_drafter(out)
    config = drafter.config
    training = config.extra.get("dflash_tui_training", {})
    seq_len = int(training.get("train", {}).get("seq_len", 512))
    saved = state_lib.latest_state(out)
    shards = saved["shards"] if saved else None
    held = dataset.load_sequences(data_dir, "validation", shards)
    if len(held) == 0:
        raise InputError(f"--data {data_dir}: no validation sequences to evaluate on")
    target = load_target32()
    target.hook(config.target_layer_ids)
    gammas = list(run.eval_gammas)
    blocks = eval_blocks(held, FINAL_BLOCKS_FACTOR * run.eval_blocks, seq_len, max(gammas))
    parts = target_parts(target, config)
    result = evaluate(drafter, parts, target, held, blocks, gammas, seq_len, batch=8)
    result["decode"] = decode_acceptance(drafter, parts, target, held, gammas, whole_length(held),
                                         batch=DECODE_BATCH)
    result.update({"final": True, "step": training.get("step")})
    say(f"eval: step {training.get('step')}, {result['blocks']} validation blocks")
    say("eval: " + summary_line(result))
    for g, r in result["gamma"].items():
        say(f"eval: g={g} slot accuracy (walk) {r['slot_acc']}")
    for g, r in result["decode"]["gamma"].items():
        kinds = " ".join(f"{k} {v:.2f}" for k, v in r["by_kind"].items())
        say(f"eval: g={g} as decoded ({result['decode']['sequences']} answers, {r['rounds']} rounds): "
            f"{r['accepted']:.3f} accepted/round ({kinds})")
    if run.session_tokens:
        gamma = min(SESSION_GAMMA, config.block_size - 1)
        sessions = session_check(target, out, held, gamma, run.session_tokens)
        result["sessions"] = sessions
        for s in sessions:
            say(f"eval: engine session ({s['kind']}): {s['rounds']} rounds, "
                f"{s['accepted_per_round']:.2f} accepted/round at {gamma} proposals, "
                + ("matches the stored greedy text" if s["matches_greedy"] else
                   f"DIFFERS FROM the stored greedy text from answer token {s['first_difference']}"))
    target.unhook()
    write_json_atomic(out / "eval_final.json", result)
    state_lib.append_jsonl(out / "eval.jsonl", result)
    _record_in_config(out, result)
    return result


def _record_in_config(out: Path, result: dict) -> None:
    """Put the final validation numbers beside the training record in config.json."""
    path = out / "config.json"
    config = json.loads(path.read_text())
    record = config.setdefault("dflash_tui_training", {})
    record["held_out_final"] = {
        "blocks": result["blocks"],
        "accepted": accepted_by_gamma(result["gamma"]),
        # what a decode of the same answers accepts per round (decode_eval.py)
        "decode_sequences": result["decode"]["sequences"],
        "decode_accepted": accepted_by_gamma(result["decode"]["gamma"]),
    }
    write_json_atomic(path, config)
