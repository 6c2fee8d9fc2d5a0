"""`dflash-tui distill TARGET --out DIR [options]`: flags and the phase driver.

    --phase data    generate (or finish generating) the self-distillation data
    --phase train   train, resuming from OUT/training when it is there
    --phase eval    final validation evaluation of OUT's checkpoint + a real engine session
    --phase all     the three in order (default)

Each phase can be its own command under a time limit (--time-limit SECONDS stops in time
to save); running the same command again continues where it stopped. docs/DISTILL.md has
the recipe.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from dflash_tui.engine.errors import InputError

from .settings import RunSettings, check_run, parse_int_list, parse_mix


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Everything after TARGET and --out (cli.py defines those two)."""
    g = p.add_argument_group("phases")
    g.add_argument("--phase", choices=("data", "train", "eval", "all"), default="all",
                   help="which part to run (default: all three in order)")
    g.add_argument("--data", metavar="DIR", help="where the generated data lives (default: OUT/data)")
    g.add_argument("--time-limit", type=float, metavar="SECONDS",
                   help="stop in time to save before this many seconds from the start of the command")
    g.add_argument("--stop-at", type=int, metavar="STEP",
                   help="end this command's training at STEP (saved; run again without it to go on)")
    g.add_argument("--resume", action="store_true",
                   help="require a saved training state in OUT (it is resumed automatically anyway)")
    g.add_argument("--seed", type=int, metavar="S", help="seed for prompts, splits, init and batches (default 0)")
    g.add_argument("--holdout", metavar="DIR", action="append",
                   help="a test set, never trained on (repeatable; default: the repository's "
                        "sample_prompts/ and test_prompts/)")

    g = p.add_argument_group("data")
    g.add_argument("--num-prompts", type=int, metavar="N", help="prompts to generate (default 2000)")
    g.add_argument("--mix", metavar="SPEC", help="prompt kinds math, code, prose, self, ident, literal, asked (default math=0.35,code=0.35,prose=0.2,self=0.1)")
    g.add_argument("--max-new-tokens", type=int, metavar="N", help="greedy tokens per prompt (default 384)")
    g.add_argument("--eval-prompts", type=int, metavar="N",
                   help="validation prompts among the generated ones (default 4%%, 8..256)")
    g.add_argument("--data-dtype", choices=("float32", "bfloat16", "float16"),
                   help="precision the target decodes the data in (default float32)")
    g.add_argument("--extra-prompts", metavar="FILE", help="more prompts, one per line")
    g.add_argument("--prompts-from", metavar="FILE",
                   help="real prompts as JSON lines with kind and train/validation split (built by "
                        "python -m dflash_tui_distill.corpus), added to the --num-prompts generated ones")
    g.add_argument("--gen-batch", type=int, default=64, metavar="N",
                   help="sequences decoded together (default 64; 256+ on a GPU)")
    g.add_argument("--continuations-from", metavar="FILE",
                   help="take the continuations an earlier data phase kept in FILE (python -m "
                        "dflash_tui_distill.continuations) and decode only the prompts it lacks")

    g = p.add_argument_group("drafter")
    g.add_argument("--kind", choices=("dflash2", "dflash"), help="drafter kind (default dflash2)")
    g.add_argument("--layers", type=int, metavar="L", help="drafter layers (default 3)")
    g.add_argument("--block", type=int, metavar="G", help="proposals per training block (default 15: block_size 16)")
    g.add_argument("--rank", type=int, metavar="R", help="selector rank (default 32)")
    g.add_argument("--top-k", type=int, metavar="K", help="selector candidates per slot (default 16)")
    g.add_argument("--target-layers", type=int, metavar="N",
                   help="how many target layers feed the context (default 5, spaced as Z Lab does)")
    g.add_argument("--target-layer-ids", metavar="LIST", help="explicit target layer ids, e.g. 1,8,14,20,27")
    g.add_argument("--mask-token-id", type=int, metavar="ID", help="default: an unused special token")
    g.add_argument("--intermediate", type=int, metavar="N", help="MLP width (default: the target's)")
    g.add_argument("--conv-kernel", type=int, metavar="K", help="DFlash2 conv taps (default 4)")
    g.add_argument("--conv-group", type=int, metavar="G", help="DFlash2 conv group size (default gcd(hidden, 16))")

    g = p.add_argument_group("training")
    g.add_argument("--steps", type=int, metavar="N", help="optimizer steps (default 2000)")
    g.add_argument("--batch", type=int, metavar="B", help="sequences per step (default 8)")
    g.add_argument("--seq-len", type=int, metavar="S", help="tokens per sequence, longer ones cut (default 512)")
    g.add_argument("--anchors", type=int, metavar="A", help="blocks per sequence (default 32)")
    g.add_argument("--lr", type=float, metavar="LR", help="peak learning rate (default 6e-4)")
    g.add_argument("--warmup", type=int, metavar="N", help="warmup steps (default 5%% of --steps)")
    g.add_argument("--min-lr-ratio", type=float, metavar="F", help="cosine floor / peak (default 0.1)")
    g.add_argument("--weight-decay", type=float, metavar="W", help="AdamW weight decay (default 0.01)")
    g.add_argument("--clip", type=float, metavar="C", help="gradient norm clip (default 1.0)")
    g.add_argument("--selector-weight", type=float, metavar="W", help="selector loss weight (default 1.0)")
    g.add_argument("--kd-weight", type=float, metavar="W",
                   help="soft labels: the block loss becomes (1-W) x CE on the target's greedy "
                        "token + W x CE on its whole distribution (default 0: greedy tokens only)")
    g.add_argument("--decay", type=float, metavar="D", help="slot k weighs exp(-(k-1)/D) (default 7)")
    g.add_argument("--short-block-fraction", type=float, metavar="F",
                   help="blocks trained as shorter inference blocks (default 0.5)")
    g.add_argument("--target-dtype", choices=("auto", "float32", "bfloat16", "float16"),
                   help="target precision for features (auto: bfloat16 on GPU, float32 on CPU)")
    g.add_argument("--compute-dtype", choices=("auto", "float32", "bfloat16", "float16"),
                   help="drafter forward precision; weights stay float32 (auto as above)")
    g.add_argument("--keep-quantized", action="store_true",
                   help="train against the quantized target as is (default: dequantize it)")
    g.add_argument("--init-from", metavar="DIR",
                   help="start from this drafter's weights (Z Lab format, e.g. the sample's or an "
                        "earlier --out); its shape becomes the default")
    g.add_argument("--grow", action="store_true",
                   help="with --init-from: let --layers exceed that drafter's (each new layer starts "
                        "as a copy of its last with zero output projections: the same function) "
                        "and --rank fall below it (the codebooks keep their strongest components), and "
                        "--target-layer-ids add layers to those it reads (fc's new columns start at "
                        "zero)")
    g.add_argument("--compile", action="store_true",
                   help="mx.compile the step (off by default: on an H200 the first step then "
                        "took 196 s to compile, against 1.2 s plain, for no gain seen on the CPU)")

    g = p.add_argument_group("logging and evaluation")
    g.add_argument("--save-every", type=int, default=200, metavar="N", help="save every N steps (default 200)")
    g.add_argument("--eval-every", type=int, default=250, metavar="N",
                   help="validation eval every N steps, logged to OUT/eval.jsonl (0: off; default 250)")
    g.add_argument("--eval-blocks", type=int, default=256, metavar="N",
                   help="validation blocks per eval (default 256; the final eval uses 4x)")
    g.add_argument("--eval-gammas", metavar="LIST",
                   help="proposals per round to evaluate (default 2,4,7, those within the drafter's block)")
    g.add_argument("--log-every", type=int, default=10, metavar="N", help="log every N steps (default 10)")
    g.add_argument("--session-tokens", type=int, default=48, metavar="N",
                   help="final check: tokens per real engine session (0: skip; default 48)")
    g.add_argument("--no-progress", action="store_true", help="plain log lines, no progress bar")


def settings_from_args(args) -> tuple[RunSettings, dict, dict]:
    """RunSettings, and the data/train flags as given (None = not given)."""
    run = RunSettings(
        phase=args.phase, out=args.out, data=args.data, target=args.model,
        holdout=args.holdout, time_limit=args.time_limit, stop_at=args.stop_at,
        resume=args.resume,
        gen_batch=args.gen_batch, continuations_from=args.continuations_from,
        save_every=args.save_every, eval_every=args.eval_every,
        eval_blocks=args.eval_blocks,
        eval_gammas=tuple(parse_int_list(args.eval_gammas, "--eval-gammas")) if args.eval_gammas else (),
        log_every=args.log_every, session_tokens=args.session_tokens,
        compile=args.compile, progress=not args.no_progress,
    )
    check_run(run)
    data = {
        "seed": args.seed, "num_prompts": args.num_prompts,
        "mix": parse_mix(args.mix) if args.mix else None,
        "max_new_tokens": args.max_new_tokens, "eval_prompts": args.eval_prompts,
        "data_dtype": args.data_dtype, "extra_prompts": args.extra_prompts,
        "prompts_from": str(Path(args.prompts_from).expanduser().resolve()) if args.prompts_from else None,
    }
    ids = parse_int_list(args.target_layer_ids, "--target-layer-ids") if args.target_layer_ids else None
    if ids is not None and ids != sorted(set(ids)):
        # fc's column blocks follow the list's order, and the engine flags a drafter whose ids
        # are out of order or repeated as unusual: one refused here is never written
        raise InputError(f"--target-layer-ids {args.target_layer_ids}: expected target layer ids "
                         f"in ascending order, each once (e.g. {','.join(map(str, sorted(set(ids))))})")
    if ids is not None and args.target_layers is not None and args.target_layers != len(ids):
        # the list wins, and the record would keep a count that describes nothing
        raise InputError(f"--target-layers {args.target_layers} --target-layer-ids "
                         f"{args.target_layer_ids}: the list names {len(ids)} layers (give one flag)")
    train = {
        "seed": args.seed, "kind": args.kind, "layers": args.layers, "gamma": args.block,
        "rank": args.rank, "top_k": args.top_k, "target_layers": args.target_layers,
        "target_layer_ids": ids,
        "mask_token_id": args.mask_token_id, "intermediate_size": args.intermediate,
        "conv_kernel": args.conv_kernel, "conv_group": args.conv_group, "steps": args.steps,
        "batch": args.batch, "seq_len": args.seq_len, "anchors": args.anchors, "lr": args.lr,
        "warmup": args.warmup, "min_lr_ratio": args.min_lr_ratio,
        "weight_decay": args.weight_decay, "clip": args.clip,
        "selector_weight": args.selector_weight, "kd_weight": args.kd_weight, "decay": args.decay,
        "short_block_fraction": args.short_block_fraction, "target_dtype": args.target_dtype,
        "compute_dtype": args.compute_dtype,
        "dequantize": False if args.keep_quantized else None,
        "init_from": str(Path(args.init_from).expanduser().resolve()) if args.init_from else None,
        "grow": True if args.grow else None,
    }
    return run, data, train


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(args) -> int:
    from .run import Distill

    started = time.monotonic()
    run_settings, data_given, train_given = settings_from_args(args)
    return Distill(run_settings, data_given, train_given, started, _say).run()
