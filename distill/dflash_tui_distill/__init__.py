"""`dflash-tui distill`: train a DFlash2 drafter for a target by self-distillation.

An optional part of dflash-tui (the dflash-tui-distill package): the debugger neither
installs nor imports it. One job per module:

    prompts.py     generated prompts from the word lists and templates in prompt_data/
                   (pools.py loads them); prompts_requests/identifiers/literals.py are
                   the multi-constraint, `ident` and `literal` kinds
    corpus.py      a prompt file of real text from pinned wheels and Debian docs
                   (corpus_code.py, corpus_docs.py; corpus_math.py runs the Mathematics
                   Dataset generator), read back by prompts_from.py (--prompts-from)
    holdout.py     the test sets (sample_prompts/, test_prompts/): no training prompt may match one
    generate.py    the target's own greedy continuations, batched (and the prompts the
                   target writes itself)
    data_phase.py  prompts -> splits -> continuations, resumable
    dataset.py     token ids on disk under --data, shards written as they finish
    batches.py     training batches: sequences packed with many blocks each
    objective.py   the packed-block forward through the engine's drafter modules, the
                   position-decayed block cross-entropy and the selector's cross-entropy
    trainer.py     AdamW, warmup + cosine, clipping, the step loop, --time-limit
    state.py       resumable training state (weights, optimizer, step, RNG) and the
                   Z Lab checkpoint in --out; json_files.py reads its JSON files
    interrupt.py   ctrl-c during training: the loop saves after the step in hand
    evaluate.py    validation acceptance per round exactly as greedy verification counts it,
                   at anchors spread over each answer
    decode_eval.py the same, round by round along each answer as a decode visits it
                   (what the bench reports)
    cli.py, run.py flags, the checks made before any work, and the phase driver

Three splits: training, validation (model selection: the eval during training and the
eval phase) and the test sets, which decide nothing here. Nothing here writes a second
drafter: every forward goes through engine/drafter.py. docs/DISTILL.md explains the choices.
"""
