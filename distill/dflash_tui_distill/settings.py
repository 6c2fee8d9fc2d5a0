"""Every setting of a distill run, its default, and the checks on it.

Two kinds. `DataSettings` and `TrainSettings` decide what the weights become: they are
recorded in the data manifest / training state and in config.json
(`dflash_tui_training`), and a resumed run must use the same ones. `RunSettings` only
decide how this command runs (phase, time limit, logging, evaluation) and may change
from one command to the next.

Command-line flags default to None so that "not given" can be told from "given the
default": on resume, a flag that is not given takes the saved value, and a flag that is
given must agree with it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Optional

from dflash_tui.engine.errors import InputError

KINDS = ("math", "code", "prose", "self", "ident", "literal", "asked")
DTYPE_NAMES = ("auto", "float32", "bfloat16", "float16")


@dataclass
class DataSettings:
    """What data the target generates (recorded in DATA/manifest.json)."""

    seed: int = 0
    num_prompts: int = 2000  # procedural + self-written, before the validation split
    mix: dict[str, float] = field(default_factory=lambda: {
        "math": 0.35, "code": 0.35, "prose": 0.2, "self": 0.1})
    max_new_tokens: int = 384
    eval_prompts: int = 0  # validation split of the generated prompts; 0 = 4%, 8..256
    data_dtype: str = "float32"  # the precision the continuations are decoded in
    extra_prompts: Optional[str] = None  # a file of more prompts, one per line
    prompts_from: Optional[str] = None  # JSON lines of real prompts with their split (prompts_from.py)


@dataclass
class TrainSettings:
    """What the drafter is and how it is trained (recorded in the training state)."""

    seed: int = 0
    kind: str = "dflash2"
    layers: int = 3
    gamma: int = 15  # proposals per block; block_size = gamma + 1
    rank: int = 32
    top_k: int = 16
    target_layers: int = 5  # how many target layers feed the context
    target_layer_ids: Optional[list[int]] = None
    mask_token_id: Optional[int] = None
    intermediate_size: Optional[int] = None  # default: the target's
    conv_kernel: int = 4
    conv_group: Optional[int] = None  # default: gcd(hidden, 16)
    steps: int = 2000
    batch: int = 8  # sequences per step
    seq_len: int = 512
    anchors: int = 32  # blocks per sequence
    lr: float = 6e-4
    warmup: Optional[int] = None  # default: 5% of steps
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    clip: float = 1.0
    selector_weight: float = 1.0
    kd_weight: float = 0.0  # share of the block loss taken by the target's soft labels
    decay: float = 7.0  # slot k weighs exp(-(k-1)/decay)
    short_block_fraction: float = 0.5
    target_dtype: str = "auto"  # float32 on the CPU, bfloat16 on a GPU
    compute_dtype: str = "auto"  # the drafter's forward; master weights stay float32
    dequantize: bool = True  # dequantize a quantized target for training
    init_from: Optional[str] = None  # start from this drafter's weights (init_from.py)
    grow: bool = False  # --init-from may have fewer layers / a larger rank (init_from.py)

    def __post_init__(self) -> None:
        # a list of ids decides the count (--target-layers with another is refused in the
        # CLI); without this the record kept the flag's default beside them (5 beside 7)
        if self.target_layer_ids is not None:
            self.target_layers = len(self.target_layer_ids)

    @property
    def block_size(self) -> int:
        return self.gamma + 1

    @property
    def warmup_steps(self) -> int:
        return self.warmup if self.warmup is not None else max(1, self.steps // 20)


@dataclass
class RunSettings:
    """How this one command runs; free to change between resumed commands."""

    phase: str = "all"
    out: str = ""
    data: Optional[str] = None
    target: Optional[str] = None
    holdout: Optional[list[str]] = None  # test sets (default: sample_prompts/ and test_prompts/)
    time_limit: Optional[float] = None
    stop_at: Optional[int] = None  # stop this command at this step (saved; rerun to go on)
    resume: bool = False
    gen_batch: int = 64
    continuations_from: Optional[str] = None  # an earlier data phase's (continuations.py)
    save_every: int = 200
    eval_every: int = 250
    eval_blocks: int = 256
    eval_gammas: tuple[int, ...] = ()  # empty: the default of eval_gammas_for
    log_every: int = 10
    session_tokens: int = 48
    compile: bool = False
    progress: bool = True


def parse_mix(text: str) -> dict[str, float]:
    """"math=0.4,code=0.4,prose=0.2" -> fractions summing to 1."""
    mix: dict[str, float] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in KINDS:
            raise InputError(
                f"--mix {text!r}: expected NAME=WEIGHT pairs with NAME in {', '.join(KINDS)}")
        try:
            mix[name] = float(value)
        except ValueError:
            raise InputError(f"--mix {text!r}: {value!r} is not a number") from None
        if mix[name] < 0:
            raise InputError(f"--mix {text!r}: weights must be >= 0")
    total = sum(mix.values())
    if total <= 0:
        raise InputError(f"--mix {text!r}: at least one weight must be positive")
    return {k: v / total for k, v in mix.items()}


def parse_int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"{flag} {text!r}: expected comma-separated integers") from None
    if not values:
        raise InputError(f"{flag} {text!r}: expected at least one integer")
    return values


def check_data(s: DataSettings) -> None:
    if s.num_prompts < (0 if s.prompts_from else 1):
        raise InputError(f"--num-prompts {s.num_prompts}: expected at least 1 (0 with --prompts-from)")
    if s.max_new_tokens < 2:
        raise InputError(f"--max-new-tokens {s.max_new_tokens}: expected at least 2")
    if s.eval_prompts < 0:
        raise InputError(f"--eval-prompts {s.eval_prompts}: expected 0 (automatic) or more")
    if s.data_dtype not in DTYPE_NAMES[1:]:
        raise InputError(f"--data-dtype {s.data_dtype!r}: expected one of {', '.join(DTYPE_NAMES[1:])}")


def check_train(s: TrainSettings) -> None:
    positive = {
        "--layers": s.layers, "--block": s.gamma, "--rank": s.rank, "--top-k": s.top_k,
        "--target-layers": s.target_layers, "--conv-kernel": s.conv_kernel, "--steps": s.steps,
        "--batch": s.batch, "--seq-len": s.seq_len, "--anchors": s.anchors,
    }
    for flag, value in positive.items():
        if value < 1:
            raise InputError(f"{flag} {value}: expected at least 1")
    if s.kind not in ("dflash2", "dflash"):
        raise InputError(f"--kind {s.kind!r}: expected dflash2 or dflash")
    if s.top_k < 2 and s.kind == "dflash2":
        raise InputError(f"--top-k {s.top_k}: the selector needs at least 2 candidates")
    if s.seq_len < s.gamma + 2:
        raise InputError(f"--seq-len {s.seq_len}: expected at least --block + 2 = {s.gamma + 2}")
    if not 0 < s.lr < math.inf:
        raise InputError(f"--lr {s.lr}: expected a positive learning rate")
    if s.warmup is not None and not 0 <= s.warmup <= s.steps:
        raise InputError(f"--warmup {s.warmup}: expected 0..--steps ({s.steps})")
    if not 0 <= s.min_lr_ratio <= 1:
        raise InputError(f"--min-lr-ratio {s.min_lr_ratio}: expected 0..1")
    # written so that NaN fails them: it compares false with everything, and trained on it
    # gives a NaN drafter. An infinite --clip (no clipping) or --decay (every slot weighs 1)
    # means something; an infinite loss weight or weight decay does not.
    for flag, value in (("--weight-decay", s.weight_decay), ("--selector-weight", s.selector_weight)):
        if not 0 <= value < math.inf:
            raise InputError(f"{flag} {value}: expected a finite number >= 0")
    for flag, value in (("--clip", s.clip), ("--decay", s.decay)):
        if not value > 0:
            raise InputError(f"{flag} {value}: expected a number above 0")
    if not 0 <= s.kd_weight <= 1:
        raise InputError(f"--kd-weight {s.kd_weight}: expected 0..1 (the soft labels' share of the block loss)")
    if s.grow and not s.init_from:
        raise InputError("--grow: needs --init-from (the drafter to grow)")
    if not 0 <= s.short_block_fraction <= 1:
        raise InputError(f"--short-block-fraction {s.short_block_fraction}: expected 0..1")
    for flag, value in (("--target-dtype", s.target_dtype), ("--compute-dtype", s.compute_dtype)):
        if value not in DTYPE_NAMES:
            raise InputError(f"{flag} {value!r}: expected one of {', '.join(DTYPE_NAMES)}")
    if s.mask_token_id is not None and s.mask_token_id < 0:
        raise InputError(f"--mask-token-id {s.mask_token_id}: expected a token id >= 0")


def check_run(s: RunSettings) -> None:
    if s.phase not in ("data", "train", "eval", "all"):
        raise InputError(f"--phase {s.phase!r}: expected data, train, eval or all")
    if s.time_limit is not None and not s.time_limit > 0:  # NaN too
        raise InputError(f"--time-limit {s.time_limit}: expected a positive number of seconds")
    if s.stop_at is not None and s.stop_at < 1:
        raise InputError(f"--stop-at {s.stop_at}: expected a step >= 1")
    for flag, value in (("--gen-batch", s.gen_batch), ("--save-every", s.save_every),
                        ("--log-every", s.log_every), ("--eval-blocks", s.eval_blocks)):
        if value < 1:
            raise InputError(f"{flag} {value}: expected at least 1")
    if s.eval_every < 0 or s.session_tokens < 0:
        raise InputError("--eval-every and --session-tokens must be >= 0 (0 turns them off)")
    if any(g < 1 for g in s.eval_gammas):
        shown = ",".join(map(str, s.eval_gammas))  # as typed, not the tuple's repr
        raise InputError(f"--eval-gammas {shown}: expected positive proposal counts")


def eval_gammas_for(given: tuple[int, ...], block: int) -> tuple[int, ...]:
    """The proposal counts to evaluate a drafter of `block` proposals at.

    Default (`given` empty): 2, 4 and 7, those within the block, and the block itself where
    it is shorter than 7. A given count past the block is refused: no slot past it was
    trained, so its numbers would mean nothing.
    """
    if not given:
        return tuple(sorted({g for g in (2, 4, 7) if g <= block} | ({block} if block < 7 else set())))
    beyond = [g for g in given if g > block]
    if beyond:
        raise InputError(f"--eval-gammas {','.join(map(str, given))}: {beyond[0]} proposals is more "
                         f"than the drafter's block of {block} (--block)")
    return given


def to_json(settings) -> dict[str, Any]:
    return asdict(settings)


def from_json(cls, raw: dict[str, Any]):
    """Rebuild settings saved by to_json, ignoring keys a newer/older version did not have."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in raw.items() if k in names})


def merge(cls, given: dict[str, Any], saved: Optional[dict[str, Any]], where: str):
    """Settings from explicit flags (`given`, None = not given) over a saved run's values.

    A flag given explicitly that disagrees with the saved run is an error: resuming with
    different math would not continue the same training.
    """
    base = from_json(cls, saved) if saved is not None else cls()
    values = asdict(base)
    for name, value in given.items():
        if value is None or name not in values:
            continue
        if saved is not None and name in saved and comparable(saved[name]) != comparable(value):
            flag = "--" + name.replace("_", "-")
            raise InputError(
                f"{where}: this run was started with {flag} {saved[name]!r}; this command "
                f"says {value!r} (use a new --out or --data, or drop the flag)")
        values[name] = value
    return cls(**values)


def comparable(value):
    """A setting's value in a form where equal settings compare equal (JSON round trips)."""
    if isinstance(value, (list, tuple)):
        return [comparable(v) for v in value]
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in sorted(value.items())}
    if isinstance(value, float):
        return round(value, 12)
    return value
