#!/usr/bin/env bash
# One command on the GPU machine, run from the project's root there, after
# ../shared/device/stage.sh has carried MLX's CUDA build and the sample GGUF over
# (docs/DISTILL.md, "The sample drafter on an H200", has the whole call sequence):
#
#   STAGE=N bash scripts/device_train_sample.sh data+train SECONDS   # data, then train
#   STAGE=N bash scripts/device_train_sample.sh train SECONDS        # continue training
#   STAGE=N bash scripts/device_train_sample.sh eval SECONDS         # final held-out eval
#
# STAGE (1-4) picks the stage of train_sample_drafter.sh; its run lives in
# /tmp/run/stageN, where the next stage finds it as its start.
# SECONDS is this command's budget (a device call runs at most 600 s). The checkpoint comes
# back in $OUT after every command, in 15 MiB parts (calls return files of 16 MiB at most):
# `cat model.part* > model.safetensors` here.
set -euo pipefail
t0=$(date +%s)
budget=${2:?usage: $0 data+train|train|eval SECONDS}
. /tmp/stage/env.sh
# `python3 -m dflash_tui` from the checkout would find ./dflash_tui without its engine and
# panels (pyproject maps those in at install time), so lay the package out as installed.
if [ ! -d /tmp/proj ]; then
  mkdir -p /tmp/proj && cp -r dflash_tui sample_prompts scripts /tmp/proj/
  cp -r engine /tmp/proj/dflash_tui/engine && cp -r panels /tmp/proj/dflash_tui/panels
fi
cd /tmp/proj
export PYTHONPATH=/tmp/proj:${PYTHONPATH:-} PYTHONUNBUFFERED=1 DFLASH_TUI_BLAS=reference
export STAGE=${STAGE:-1} RUN_ROOT=/tmp/run
export TARGET=/tmp/payload/SmolLM2-135M-Instruct.Q4_1.gguf RUN_DIR=/tmp/run/stage$STAGE
export DFLASH="python3 -m dflash_tui"
left() { echo $(( budget - ($(date +%s) - t0) - 25 )); }   # 25 s to bring files back

case "$1" in
  data+train)
    TIME_LIMIT=$(left) bash scripts/train_sample_drafter.sh data 2>&1 | tee -a "$OUT/data.log"
    if [ "$(left)" -gt 60 ]; then
      TIME_LIMIT=$(left) bash scripts/train_sample_drafter.sh train 2>&1 | tee -a "$OUT/train.log"
    fi ;;
  train|eval)
    TIME_LIMIT=$(left) bash scripts/train_sample_drafter.sh "$1" 2>&1 | tee -a "$OUT/$1.log" ;;
  *) echo "usage: $0 data+train|train|eval SECONDS" >&2; exit 2 ;;
esac
if [ -f "$RUN_DIR/model.safetensors" ]; then
  split -b 15M -d "$RUN_DIR/model.safetensors" "$OUT/model.part"
  cp "$RUN_DIR"/config.json "$RUN_DIR"/*.jsonl "$OUT/"
  cp "$RUN_DIR"/eval_final.json "$OUT/" 2>/dev/null || true
fi
