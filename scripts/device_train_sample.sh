#!/usr/bin/env bash
# One command of the sample recipe (scripts/train_sample_drafter.sh) on a GPU machine that
# runs commands of limited length from a copy of this checkout and hands back files from
# $OUT: the run lives in /tmp/run/stageN, so consecutive commands on the same machine
# continue it.
#
#   STAGE=N bash scripts/device_train_sample.sh all SECONDS          # data, train, eval
#   STAGE=N bash scripts/device_train_sample.sh data+train SECONDS   # data, then train
#   STAGE=N bash scripts/device_train_sample.sh train SECONDS        # continue training
#   STAGE=N bash scripts/device_train_sample.sh eval SECONDS         # final validation eval
#   STAGE=N bash scripts/device_train_sample.sh finish SECONDS       # the rest of the data, the shipped
#                                                                    # drafter's eval on them, train on, eval
#                                                                    # (only with FINISH_EVAL_SECONDS left)
#   STAGE=N bash scripts/device_train_sample.sh bench SECONDS        # bench RUN_DIR (or BENCH_DRAFT)
#                                                                    # on BENCH_PROMPTS at BENCH_BLOCKS
#
# The machine needs a python3 (or PYTHON) that imports MLX for its GPU (`pip install
# "mlx[cuda13]"` on CUDA, `pip install mlx` on Apple silicon; DEVICE_ENV=FILE is sourced
# first for a build carried in by other means), mlx-lm and the project's other dependencies,
# and TARGET=the SmolLM2-135M-Instruct Q4_1 GGUF. Stages 5 to 22 also need their corpus in the tree
# (runs/corpus, or runs/corpusN for stages 11 to 13, runs/corpus13 for stages 14 to 22, made by
# scripts/build_prompt_corpus.sh; it travels as an ignored folder, or packed as runs/corpusN.tar.gz).
# SECONDS is this command's budget; 25 s of it (35 with KEEP_CONTINUATIONS) are kept to pack
# the results, and `all` keeps EVAL_SECONDS (default 60) for the eval, which then judges whatever training saved.
# A machine that goes back between commands loses /tmp (ours goes back about 30 s after a
# command ends: make the next call at once; stage 8 lost its data and optimizer state
# to a slow one, stage 11 its data to a reply slowed by the 45 MB of checkpoint parts it
# carried back: give a command whose files are not needed OUT=/tmp/noout, so that nothing
# travels), so a stage that fits one command
# (stage 5) runs as `all`: every command returns a checkpoint and its numbers. A stage that
# starts from the shipped drafter needs INIT_FROM=/tmp/proj/dflash_tui/sample on its data and
# train commands (a run refuses a start other than its own; `eval` names none).
#
# $OUT gets the checkpoint in 15 MiB parts (`cat model.part* > model.safetensors`) and
# run.tgz (config.json, train/eval logs, eval_final.json, the data manifest, the command's
# log): at most 5 files; with KEEP_CONTINUATIONS=1 also the corpus's continuations (below).
# With SHIP_BITS (stage 20's recipe sets 8) the parts are the quantized copy's, and
# packed.tgz brings its config.json and eval_final.json: the float checkpoint stays behind.
# `bench` writes bench-PROMPTS[-BENCH_NAME].json instead.
set -euo pipefail
t0=$(date +%s)
budget=${2:?usage: $0 all|data+train|train|eval|finish|bench SECONDS}
if [ -n "${DEVICE_ENV:-}" ]; then . "$DEVICE_ENV"; fi
: "${TARGET:?set TARGET to the sample GGUF (SmolLM2-135M-Instruct.Q4_1.gguf)}"
if [ -z "${OUT:-}" ]; then  # before the checkout is copied: nothing done, nothing to undo
  echo "OUT: set it to the folder whose files come back (OUT=/tmp/noout for none)" >&2; exit 2
fi
# `python3 -m dflash_tui` from the checkout would find ./dflash_tui without its engine and
# panels (pyproject maps those in at install time), so lay the packages out as installed,
# once per machine: later commands find the copy (and the run) in /tmp.
if [ ! -d /tmp/proj ]; then
  mkdir -p /tmp/proj/runs
  cp -r dflash_tui sample_prompts test_prompts scripts /tmp/proj/
  cp -r engine /tmp/proj/dflash_tui/engine && cp -r panels /tmp/proj/dflash_tui/panels
  cp -r distill/dflash_tui_distill /tmp/proj/dflash_tui_distill
  for corpus in runs/corpus runs/corpus11 runs/corpus12 runs/corpus13; do
    if [ -d "$corpus" ]; then cp -r "$corpus" "/tmp/proj/$corpus"; fi
    # or carried packed (`tar czf runs/corpus13.tar.gz -C runs corpus13`: 3.5 MB, not 16)
    if [ -f "$corpus.tar.gz" ] && [ ! -d "/tmp/proj/$corpus" ]; then tar xzf "$corpus.tar.gz" -C /tmp/proj/runs; fi
  done
fi
# a carried file named from the checkout is found from /tmp/proj too
if [ -n "${CONTINUATIONS_FROM:-}" ]; then CONTINUATIONS_FROM=$(realpath -m "$CONTINUATIONS_FROM"); export CONTINUATIONS_FROM; fi
cd /tmp/proj
export PYTHONPATH=/tmp/proj:${PYTHONPATH:-} PYTHONUNBUFFERED=1 DFLASH_TUI_BLAS=reference
export STAGE=${STAGE:-1} RUN_ROOT=/tmp/run TARGET RUN_DIR=/tmp/run/stage${STAGE:-1}
export DFLASH="${PYTHON:-python3} -m dflash_tui"
# OUT=/tmp/noout (files not wanted back) need not exist: without it the packing below failed
# the call with status 1 after its work was saved (stage 16's call A)
mkdir -p /tmp/run "$OUT"
log="/tmp/run/stage$STAGE.log"  # beside the run: distill refuses a run folder with others' files
pack_seconds=$(( 25 ${KEEP_CONTINUATIONS:++ 10} ))  # and the export below, with room
left() { echo $(( budget - ($(date +%s) - t0) - pack_seconds )); }
# SHIP_BITS (stage 20's recipe: 8): the drafter ships quantized to that many bits, a copy of
# the run made by `dflash-tui quantize` in RUN_DIR-qBITS; `finish` judges and returns that copy
if [ "$STAGE" = 20 ]; then SHIP_BITS=${SHIP_BITS-8}; fi
packed=${SHIP_BITS:+$RUN_DIR-q$SHIP_BITS}

case "$1" in
  all)
    TIME_LIMIT=$(left) bash scripts/train_sample_drafter.sh data 2>&1 | tee -a "$log"
    if [ "$(left)" -gt $(( ${EVAL_SECONDS:-60} + 60 )) ]; then
      TIME_LIMIT=$(( $(left) - ${EVAL_SECONDS:-60} )) bash scripts/train_sample_drafter.sh train 2>&1 | tee -a "$log"
    fi
    if [ -f "$RUN_DIR/model.safetensors" ] && [ "$(left)" -gt 20 ]; then
      TIME_LIMIT=$(left) bash scripts/train_sample_drafter.sh eval 2>&1 | tee -a "$log"
    fi ;;
  data+train)
    TIME_LIMIT=$(left) bash scripts/train_sample_drafter.sh data 2>&1 | tee -a "$log"
    if [ "$(left)" -gt 60 ]; then
      TIME_LIMIT=$(left) bash scripts/train_sample_drafter.sh train 2>&1 | tee -a "$log"
    fi ;;
  train|eval)
    TIME_LIMIT=$(left) bash scripts/train_sample_drafter.sh "$1" 2>&1 | tee -a "$log" ;;
  finish)
    # what a ship rule compares, on this run's validation answers: the shipped drafter's eval
    # phase (first, since it needs only the data: about 100 s on an H200), then the run trained
    # towards its last step until the call's end, and its own eval phase of the last step's
    # checkpoint if FINISH_EVAL_SECONDS (default 150) are left after it (with its engine
    # sessions it takes longer than the shipped one; the `finish` calls that did only this
    # eval took 141 s (stage 13) and 176 s (stage 14, the training phase's load included)).
    # Data that an earlier call left unfinished are finished first, and each part that is
    # done is skipped by a later `finish` on the same machine, so a second call completes a
    # first.
    complete() { grep -qs '"complete": true' "$RUN_DIR/data/manifest.json"; }
    trained() {  # the saved checkpoint is the schedule's last step
      ${PYTHON:-python3} -c 'import json, sys
record = json.load(open(sys.argv[1]))["dflash_tui_training"]
sys.exit(0 if record["step"] >= record["train"]["steps"] else 1)' "$RUN_DIR/config.json" 2>/dev/null
    }
    if ! complete; then
      TIME_LIMIT=$(left) bash scripts/train_sample_drafter.sh data 2>&1 | tee -a "$log"
    fi
    shipped="$RUN_DIR-shipped"  # beside the run, so another stage's never counts as this one's
    if ! complete; then
      echo "finish: the data are not complete yet; run finish again" | tee -a "$log"
    else
      if [ ! -f "$shipped/eval_final.json" ] && [ "$(left)" -gt 10 ]; then
        rm -rf "$shipped" && mkdir -p "$shipped"
        cp dflash_tui/sample/config.json dflash_tui/sample/model.safetensors "$shipped/"
        timeout "$(left)" $DFLASH distill "$TARGET" --out "$shipped" --data "$RUN_DIR/data" --phase eval \
          --session-tokens 0 --no-progress 2>&1 | tee -a "$log" || true
      fi
      if [ -f "$shipped/eval_final.json" ]; then
        cp "$shipped/eval_final.json" "$OUT/shipped-on-stage$STAGE-eval_final.json"
      else
        echo "finish: the shipped drafter's eval did not finish within the budget" | tee -a "$log"
      fi
      if ! trained && [ "$(left)" -gt 60 ]; then
        # one train command to the call's end: the eval waits for the last step, so time kept
        # back for it would buy nothing unless training reached that step anyway (two commands,
        # the first stopping FINISH_EVAL_SECONDS early, cost stages 14 and 15 a second load)
        TIME_LIMIT=$(left) bash scripts/train_sample_drafter.sh train 2>&1 | tee -a "$log"
      fi
      if ! trained; then
        echo "finish: training has not reached its last step; run finish again" | tee -a "$log"
      elif [ -n "$packed" ]; then
        # SHIP_BITS: what ships is the quantized copy, so that is what the eval phase judges
        # (the float run's own eval is skipped: its time is the copy's)
        if [ -f "$packed/eval_final.json" ]; then
          echo "finish: the $SHIP_BITS-bit copy's eval phase is done" | tee -a "$log"
        elif [ "$(left)" -ge "${FINISH_EVAL_SECONDS:-150}" ]; then
          if [ ! -f "$packed/model.safetensors" ]; then
            rm -rf "$packed"
            $DFLASH quantize "$RUN_DIR" --bits "$SHIP_BITS" --out "$packed" 2>&1 | tee -a "$log"
          fi
          timeout "$(left)" $DFLASH distill "$TARGET" --out "$packed" --data "$RUN_DIR/data" --phase eval \
            --no-progress 2>&1 | tee -a "$log" || true
          if [ ! -f "$packed/eval_final.json" ]; then
            echo "finish: the $SHIP_BITS-bit copy's eval phase did not finish within the budget; run finish again" | tee -a "$log"
          fi
        else
          echo "finish: $(left) s left, less than the $SHIP_BITS-bit copy's eval phase needs (FINISH_EVAL_SECONDS=${FINISH_EVAL_SECONDS:-150}); run finish again" | tee -a "$log"
        fi
      elif [ "$RUN_DIR/eval_final.json" -nt "$RUN_DIR/model.safetensors" ]; then
        echo "finish: the run's eval phase is done (its eval_final.json is newer than its checkpoint)" | tee -a "$log"
      elif [ "$(left)" -ge "${FINISH_EVAL_SECONDS:-150}" ]; then
        # the eval phase is all or nothing (it does not stop at TIME_LIMIT), so it starts only
        # with the time it needs, and `timeout` keeps the call inside its budget regardless
        TIME_LIMIT=$(left) timeout "$(left)" bash scripts/train_sample_drafter.sh eval 2>&1 | tee -a "$log" || true
        if [ ! "$RUN_DIR/eval_final.json" -nt "$RUN_DIR/model.safetensors" ]; then
          echo "finish: the run's eval phase did not finish within the budget; run finish again" | tee -a "$log"
        fi
      else
        echo "finish: $(left) s left, less than the run's eval phase needs (FINISH_EVAL_SECONDS=${FINISH_EVAL_SECONDS:-150}); run finish again" | tee -a "$log"
      fi
    fi ;;
  bench)
    prompts=${BENCH_PROMPTS:-test_prompts}
    timeout "$(left)" $DFLASH bench "$TARGET" --draft "${BENCH_DRAFT:-$RUN_DIR}" --prompts "$prompts" \
      --blocks "${BENCH_BLOCKS:-7}" --max-tokens "${BENCH_MAX_TOKENS:-200}" \
      --json "$OUT/bench-$(basename "$prompts")${BENCH_NAME:+-$BENCH_NAME}.json" 2>&1 | tee -a "$log"
    exit 0 ;;
  *) echo "usage: $0 all|data+train|train|eval|finish|bench SECONDS" >&2; exit 2 ;;
esac
if [ -n "$packed" ]; then
  # the quantized copy is what ships, and only it comes back: the float one (68.6 MB at 8
  # layers) is over the 64 MiB a call returns; the copy's config and eval come in packed.tgz
  if [ -f "$packed/model.safetensors" ]; then
    split -b 15M -d "$packed/model.safetensors" "$OUT/model.part"
    tar czf "$OUT/packed.tgz" -C "$packed" $(cd "$packed" && ls config.json eval_final.json 2>/dev/null)
  fi
elif [ -f "$RUN_DIR/model.safetensors" ]; then
  split -b 15M -d "$RUN_DIR/model.safetensors" "$OUT/model.part"
fi
# KEEP_CONTINUATIONS=1: the corpus's continuations (the real-* kinds, which the next stage
# continues again) come back as continuations-stageN.partNN, to be carried in by that stage
# (cat them; CONTINUATIONS_FROM=the file), once the data are complete; the export of 31,847
# random sequences (prompts of 30-300 tokens, continuations of 20-256) took 0.8 s on a
# 2-core CPU and made 9.9 MB. Only runs/ keeps it here, and a new session's checkout has no
# runs/: committed, it lasts (docs/DISTILL.md, "Stage 16: the plan"), so the prompts of a
# corpus source under a GPL licence (the data manifest records each source's) are left out
# of it, and the next data phase decodes those few again.
if [ -n "${KEEP_CONTINUATIONS:-}" ] && grep -qs '"complete": true' "$RUN_DIR/data/manifest.json"; then
  kept="/tmp/run/continuations-stage$STAGE.npz"
  if [ ! -f "$kept" ]; then  # a failed export must not cost the call's other files
    # GPL sources by the licences the manifest records; a manifest without them fails the
    # export (no file) rather than letting their text through
    ${PYTHON:-python3} -m dflash_tui_distill.continuations "$RUN_DIR/data" "$kept" --kinds real- \
      --exclude-licence GPL 2>&1 | tee -a "$log" \
      || echo "continuations: the export failed; the rest is packed" | tee -a "$log"
  fi
  if [ -f "$kept" ]; then split -b 15M -d "$kept" "$OUT/continuations-stage$STAGE.part"; fi
fi
files=()
for f in config.json train.jsonl eval.jsonl eval_final.json data/manifest.json; do
  if [ -f "$RUN_DIR/$f" ]; then files+=("$f"); fi
done
tar czf "$OUT/run.tgz" -C "$RUN_DIR" "${files[@]}" -C /tmp/run "stage$STAGE.log"
