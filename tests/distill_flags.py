"""The tiny `dflash-tui distill` run the distill tests share: a few dozen short prompts on the
llama fixture, and a two-layer drafter trained on them in seconds."""

DATA_FLAGS = ["--num-prompts", "24", "--max-new-tokens", "40", "--seed", "1"]
TRAIN_FLAGS = ["--layers", "2", "--block", "7", "--rank", "8", "--top-k", "8", "--batch", "3",
               "--seq-len", "96", "--anchors", "6", "--eval-blocks", "24", "--log-every", "1",
               "--no-progress"]
