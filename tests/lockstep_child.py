"""One rank of a lockstep decode, or the same decode in one process: what
tests/test_distributed.py runs under `mlx.launch -n 2` and alone, and compares.

    python lockstep_child.py OUT_DIR single|group TARGET_DIR [TARGET_DIR ...]

For each target: a session whose proposals are the target's greedy continuation with a
wrong token at a seeded random slot in most rounds, so the rounds accept every length and
roll back by trim (llama) or replay (qwen3_5). The single process decodes that continuation
with the target alone (engine/baseline.py); the group reads it from the single run's file
(a sharded decode of it would only add collectives). Rank 0, or the single process, writes
OUT_DIR/<mode>-<target dir name>.json: tokens, per-round accepted, rollback and comm, and
every probe row's statistics.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from greedy import noisy_oracle

from dflash_tui.engine.api import load_pair
from dflash_tui.engine.baseline import target_decode
from dflash_tui.engine.codec import encode
from dflash_tui.engine.session import SessionOptions
from dflash_tui.engine.target import encode_prompt

PROMPT = "Seven times eight is"
TOKENS = 16
GAMMA = 4


def decode(target_dir: Path, mesh, out: Path) -> dict:
    pair = load_pair(target_dir, mesh=mesh)
    ids = encode_prompt(pair.target.tokenizer, PROMPT, chat=False)
    if mesh is None:
        greedy = list(target_decode(pair.target, ids, TOKENS).tokens)
    else:
        greedy = json.loads((out / f"single-{target_dir.name}.json").read_text())["greedy"]
    options = SessionOptions(gamma=GAMMA, max_tokens=TOKENS,
                             proposer=noisy_oracle(greedy, len(ids), seed=0))
    session = pair.open(PROMPT, options=options, chat=False)
    records = list(session.run())
    session.close()
    probes = [p for r in records for p in r.probes]
    return {
        "kind": session.info.target_kind,
        "greedy": greedy,
        "tokens": session.generated,
        "accepted": [r.accepted for r in records],
        "rollbacks": [[r.rollback.kind, r.rollback.rows] for r in records],
        "comm": [encode(r.comm) for r in records],
        "distributed": encode(session.info.distributed),
        "probes": [[p.stage, p.layer, p.name, p.min, p.max, p.mean, p.rms] for p in probes],
    }


def main(out: Path, mode: str, targets: list[str]) -> None:
    mesh = None
    if mode == "group":
        from dflash_tui.engine.distributed import join

        mesh = join()
    for target in map(Path, targets):
        result = decode(target, mesh, out)
        if mesh is None or mesh.rank == 0:
            (out / f"{mode}-{target.name}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3:])
