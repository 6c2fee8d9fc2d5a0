"""The target spread over an mlx.distributed group (docs/DISTRIBUTED.md).

`mlx.launch` starts one process per rank and tells each, through its environment, how to
reach the others; `join()` joins that group. The target is sharded with mlx-lm's own tensor
parallelism (`model.shard(group)`): q/k/v and gate/up are split by their outputs, o and
down by their inputs and followed by an all_sum, so every decoder layer's output (what the
drafter reads) and the logits are the same on every rank. The drafter is small and kept
whole on every rank. Every rank then steps the same session (engine/lockstep.py).

Refused in one line, before anything is sharded: a process no launcher started, a model
mlx-lm cannot shard, and a world size that does not divide what the shard splits.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Mapping, Optional, Sequence

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from .errors import GroupError, InputError, ParameterError
from .records import DistributedInfo

# What mlx-lm's shard methods split across the ranks, by config key.
SPLIT = (
    ("num_attention_heads", "attention heads"),
    ("num_key_value_heads", "key/value heads"),
    ("intermediate_size", "feed-forward width"),
    ("moe_intermediate_size", "expert feed-forward width"),
    ("shared_expert_intermediate_size", "shared-expert feed-forward width"),
    ("linear_num_key_heads", "linear-attention key heads"),
    ("linear_num_value_heads", "linear-attention value heads"),
)
# Targets whose shard copies key/value heads when there are fewer than ranks (mlx-lm's
# qwen3_5 `repeat_kv_layer_inplace`): there the world size may be a multiple of them.
KV_REPEATED = {"qwen3_5", "qwen3_5_moe"}
# The message prefixes of MLX's collective backends: an error of theirs is a lost peer.
BACKEND_PREFIXES = ("[ring]", "[nccl]", "[mpi]", "[jaccl]", "[distributed]")
CALIBRATION_ROWS = (1, 16)
CALIBRATION_REPEATS = 8
LARGEST_SUGGESTED_WORLD = 16
# Leads every rank's row of a lockstep check. When a peer dies mid-exchange, MLX's ring
# backend can log its socket errors and hand back a buffer it never filled instead of
# raising; a row without the mark is that, a lost rank, not one out of lockstep.
AGREE_MARK = 0x5EED_D1F7


def launched(environ: Mapping[str, str] = os.environ) -> Optional[tuple[str, int]]:
    """(backend, world size) a launcher set up for this process, or None. mlx.launch sets
    MLX_RANK plus MLX_HOSTFILE (ring), MLX_WORLD_SIZE (nccl) or MLX_IBV_DEVICES (jaccl);
    mpirun sets its own rank variables."""
    if "OMPI_COMM_WORLD_SIZE" in environ or "PMI_SIZE" in environ:
        return "mpi", int(environ.get("OMPI_COMM_WORLD_SIZE") or environ["PMI_SIZE"])
    if "MLX_RANK" not in environ:
        return None
    if "MLX_WORLD_SIZE" in environ:
        return "nccl", int(environ["MLX_WORLD_SIZE"])
    if "MLX_IBV_DEVICES" in environ:
        return "jaccl", len(_json_file(environ["MLX_IBV_DEVICES"]) or [None])
    return "ring", len(_json_file(environ.get("MLX_HOSTFILE", "")) or [None])


def _json_file(path: str):
    """A launcher's JSON file; a group of one gets an empty one (or none)."""
    try:
        text = Path(path).read_text() if path else ""
    except OSError:
        return None
    return json.loads(text) if text.strip() else None


def join() -> "Mesh":
    """Join the group the launcher started this process in."""
    found = launched()
    if found is None:
        raise ParameterError(
            "distributed", True,
            "no launched group: this process has no MLX_RANK (or MPI rank) in its environment; "
            "start every rank with mlx.launch -n N [--backend ring|nccl|mpi] -- dflash-tui ...")
    backend, expected = found
    if expected == 1:
        return Mesh(_alone(backend), backend)
    try:
        group = mx.distributed.init(strict=True, backend=backend)
    except RuntimeError as error:
        raise ParameterError("distributed", True,
                             f"cannot join the {backend} group of {expected} ranks ({error})") from None
    if group.size() != expected:
        raise ParameterError("distributed", True,
                             f"the launcher started {expected} ranks but the {backend} group has "
                             f"{group.size()}")
    return Mesh(group, backend)


def _alone(backend: str):
    """A launched group of one (mlx.launch -n 1): the backend's own if it makes one, else
    this process by itself. mlx.launch gives a lone ring rank an empty hostfile, which MLX
    cannot parse; without the file MLX makes a group of one."""
    try:
        return mx.distributed.init(backend=backend)
    except RuntimeError:
        os.environ.pop("MLX_HOSTFILE", None)
        return mx.distributed.init()


def text_config(config: dict) -> dict:
    """The language model's settings (multimodal configs nest them under text_config)."""
    return {**config, **(config.get("text_config") or {})}


def refuse_split(config: dict, world: int, where: str) -> None:
    """Refuse a world size that does not divide what tensor parallelism splits."""
    problem = _split_problem(text_config(config), world)
    if problem is None:
        return
    kind = text_config(config).get("model_type", "this")
    fits = [n for n in range(1, LARGEST_SUGGESTED_WORLD + 1)
            if _split_problem(text_config(config), n) is None]
    raise InputError(f"{where}: {world} ranks cannot split the {problem} of this {kind} target "
                     f"evenly (world sizes that can, up to {LARGEST_SUGGESTED_WORLD}: "
                     f"{', '.join(map(str, fits))})")


def _split_problem(config: dict, world: int) -> Optional[str]:
    repeat_kv = config.get("model_type") in KV_REPEATED
    for key, label in SPLIT:
        value = config.get(key)
        if not isinstance(value, int) or value % world == 0:
            continue
        if key == "num_key_value_heads" and repeat_kv and world % value == 0:
            continue
        return f"{value} {label} ({key})"
    if not config.get("tie_word_embeddings", True) and config.get("model_type") in KV_REPEATED:
        vocab = config.get("vocab_size")  # qwen3_5 splits an untied head by vocabulary
        if isinstance(vocab, int) and vocab % world:
            return f"vocabulary of {vocab} (vocab_size)"
    return None


def per_rank(config: dict, world: int) -> str:
    """What one rank holds of each split size, e.g. 'heads 2/4, kv heads 1/2, ffn 64/128'."""
    config = text_config(config)
    short = {"num_attention_heads": "heads", "num_key_value_heads": "kv heads",
             "intermediate_size": "ffn", "moe_intermediate_size": "expert ffn",
             "linear_num_key_heads": "linear k heads", "linear_num_value_heads": "linear v heads"}
    parts = []
    for key, name in short.items():
        value = config.get(key)
        if isinstance(value, int):
            parts.append(f"{name} {max(value // world, 1)}/{value}")
    return ", ".join(parts)


def count_collectives(model: nn.Module) -> int:
    """The collectives in one forward of a sharded model: one per sharded-to-all linear,
    and one per module mlx-lm gave a sharding group (those call all_sum or all_gather)."""
    from mlx.nn.layers.distributed import QuantizedShardedToAllLinear, ShardedToAllLinear

    return sum(
        isinstance(m, (ShardedToAllLinear, QuantizedShardedToAllLinear))
        or getattr(m, "sharding_group", None) is not None
        for _, m in model.named_modules()
    )


class Mesh:
    """This process's place in the group, and what the ranks share: the sharded target's
    facts, the agreement check, the time spent talking."""

    def __init__(self, group, backend: str):
        self.group, self.backend = group, backend
        self.rank, self.size = group.rank(), group.size()
        self.info: Optional[DistributedInfo] = None  # once the target is sharded
        self.commands_ms = 0.0  # commands broadcast since the last round ended (the app adds)
        self.failure: Optional[str] = None  # why the group broke, once it has (the app's last line)
        self._config: dict = {}
        self._collectives = 0

    @property
    def who(self) -> str:
        return f"rank {self.rank} of {self.size}"

    # ---- sharding the target -------------------------------------------------------------

    def shard(self, model: nn.Module, config: dict, where: str) -> None:
        """Split `model` across the group with mlx-lm's tensor parallelism, or refuse."""
        kind = text_config(config).get("model_type", "unknown")
        if not callable(getattr(model, "shard", None)):
            inner = getattr(model, "model", None)
            if callable(getattr(inner, "pipeline", None)):
                raise InputError(
                    f"{where}: mlx-lm can only pipeline a {kind} model (whole layers per rank); "
                    "dflash-tui needs its tensor parallelism, since the drafter reads the "
                    "target's layer outputs on every rank")
            raise InputError(f"{where}: mlx-lm cannot shard a {kind} model (its class has no "
                             "shard method); run it in one process, without --distributed")
        refuse_split(config, self.size, where)
        model.shard(self.group)
        self._config = config
        self._collectives = count_collectives(model)

    def adopt(self, target) -> None:
        """After the target is built on its sharded model: give the drafter the whole
        vocabulary from a head sharded by vocabulary, and calibrate one all_sum."""
        dtype = target.embed_tokens(mx.array([0])).dtype
        width = target.lm_head(mx.zeros((1, target.hidden_size), dtype)).shape[-1]
        if width * self.size == target.vocab_size and self.size > 1:
            target.lm_head = _gathered(target.lm_head, self.group)
        base, per_row = self._calibrate(target.hidden_size, dtype)
        self.info = DistributedInfo(
            backend=self.backend, world_size=self.size, sharding="tensor",
            per_rank=per_rank(self._config, self.size),
            collectives_per_forward=self._collectives, all_sum_us=base, all_sum_us_per_row=per_row,
        )

    def _calibrate(self, hidden: int, dtype) -> tuple[float, float]:
        """Microseconds for one all_sum of [1, rows, hidden], at 1 row and per further row:
        what the target's own all_sums cost, which run inside its forward where no clock
        can reach them."""
        seconds = []
        for rows in CALIBRATION_ROWS:
            x = mx.ones((1, rows, hidden), dtype)
            mx.eval(mx.distributed.all_sum(x, group=self.group))  # first call sets up buffers
            times = []
            for _ in range(CALIBRATION_REPEATS):
                t0 = time.perf_counter()
                mx.eval(mx.distributed.all_sum(x, group=self.group))
                times.append(time.perf_counter() - t0)
            seconds.append(float(np.median(times)))  # a busy machine's stalls are not the cost
        # Every rank keeps rank 0's numbers, so every rank reports the same estimate.
        agreed = self.broadcast_floats(seconds)
        base = agreed[0] * 1e6
        extra_rows = CALIBRATION_ROWS[-1] - CALIBRATION_ROWS[0]
        return base, max(agreed[-1] - agreed[0], 0.0) * 1e6 / extra_rows

    # ---- talking -------------------------------------------------------------------------

    def broadcast_floats(self, values: Sequence[float]) -> list[float]:
        """Rank 0's `values` on every rank."""
        mine = mx.array(values if self.rank == 0 else [0.0] * len(values), dtype=mx.float32)
        return [float(v) for v in np.array(mx.distributed.all_sum(mine, group=self.group))]

    def agree(self, what: str, facts: Mapping[str, int]) -> float:
        """Compare a few integers across the ranks; raise GroupError naming the first rank
        that differs from rank 0. Returns the milliseconds it took (it waits for the
        slowest rank, so it includes any imbalance between them)."""
        t0 = time.perf_counter()
        mine = mx.array([AGREE_MARK] + [int(v) & 0x7FFFFFFF for v in facts.values()], dtype=mx.int32)
        rows = np.array(mx.distributed.all_gather(mine, group=self.group)).reshape(self.size, -1)
        ms = (time.perf_counter() - t0) * 1000
        check_agreement(what, facts, rows)
        return ms

    def target_comm(self, rows: Sequence[int]) -> tuple[int, float]:
        """(all_sums, estimated ms) for target forwards over `rows` tokens each."""
        if self.info is None:
            return 0, 0.0
        per = self.info.collectives_per_forward
        us = sum(per * (self.info.all_sum_us + self.info.all_sum_us_per_row * (n - 1)) for n in rows)
        return per * len(rows), us / 1000

    def lost_contact(self, error: BaseException) -> Optional[GroupError]:
        """An error of MLX's collective backend as the line a user reads (naming the other
        rank, in a group of two; the caller names this one); None for any other error."""
        text = str(error).strip()
        if not isinstance(error, RuntimeError) or not text.startswith(BACKEND_PREFIXES):
            return None
        peer = f"rank {1 - self.rank}" if self.size == 2 else "another rank"
        return GroupError(f"lost contact with {peer}, which ended or dropped its connection "
                          f"({text.splitlines()[0]})")


def _gathered(head, group):
    """A head sharded by vocabulary, gathered back to the whole vocabulary on every rank."""
    from mlx_lm.models.base import gather_last_axis

    return lambda x: gather_last_axis(head(x), group)


def check_agreement(what: str, facts: Mapping[str, int], rows: np.ndarray) -> None:
    """Raise GroupError for the first rank whose gathered row (AGREE_MARK, then the facts)
    did not arrive or differs from rank 0's."""
    for rank in range(1, len(rows)):
        if rows[rank][0] != AGREE_MARK:
            raise GroupError(f"lost contact with rank {rank}, which ended or dropped its "
                             f"connection (its part of the lockstep check {what} never came)")
        if (rows[rank] != rows[0]).any():
            raise GroupError(
                f"rank {rank} is out of lockstep with rank 0 {what}: it has "
                f"{_show(facts, rows[rank][1:])} where rank 0 has {_show(facts, rows[0][1:])}")


def _show(facts: Mapping[str, int], row: np.ndarray) -> str:
    return ", ".join(f"{name} {int(v)}" for name, v in zip(facts, row))
