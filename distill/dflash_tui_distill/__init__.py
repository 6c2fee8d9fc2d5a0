"""`dflash-tui distill`: train a DFlash2 drafter for a target by self-distillation.

The phases, each its own module:

    prompts.py     a broad prompt set made without any hub data (topics x templates,
                   procedural arithmetic and word problems, code tasks)
    holdout.py     sample_prompts/ is held out: no training prompt may match one
    generate.py    the target's own greedy continuations, batched (and the prompts the
                   target writes itself)
    dataset.py     token ids on disk under --data, shards written as they finish
    batches.py     training batches: sequences packed with many blocks each
    objective.py   the packed-block forward through the engine's drafter modules, the
                   position-decayed block cross-entropy and the selector's cross-entropy
    trainer.py     AdamW, warmup + cosine, clipping, the step loop, --time-limit
    state.py       resumable training state (weights, optimizer, step, RNG) and the
                   Z Lab checkpoint in --out
    evaluate.py    held-out acceptance per round exactly as greedy verification counts it
    cli.py         flags and the phase driver

Nothing here writes a second drafter: every forward goes through engine/drafter.py.
docs/DISTILL.md explains the choices.
"""
