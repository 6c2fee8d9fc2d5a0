"""The training step and loop: AdamW, warmup + cosine, gradient clipping, --time-limit.

Master weights are float32 and live in `Trainer.params` (a tree), not in the drafter: the
loss function writes a `compute_dtype` copy of them into the drafter module and runs the
engine's forward, so gradients come back to the float32 master weights through the cast.
The target is frozen and outside the gradient: its features come in as a plain input.

The step is mx.compile'd when it can be (fixed shapes, traced once). Nothing in it syncs
with the host; the loop reads the metrics once per step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional

import mlx.core as mx
import mlx.optimizers as optim
from mlx.utils import tree_map

from dflash_tui.engine.drafter import DraftModel

from .batches import Batch
from .objective import (TargetParts, label_logits, losses, slot_weights, target_features,
                        target_features_and_logits)
from .settings import TrainSettings


def lr_schedule(s: TrainSettings):
    warmup = s.warmup_steps
    decay_steps = max(1, s.steps - warmup)
    cosine = optim.cosine_decay(s.lr, decay_steps, s.lr * s.min_lr_ratio)
    if warmup <= 0:
        return cosine
    return optim.join_schedules([optim.linear_schedule(s.lr / warmup, s.lr, warmup), cosine], [warmup])


@dataclass
class StepResult:
    metrics: dict[str, float]
    grad_norm: float
    learning_rate: float


class Trainer:
    def __init__(self, drafter: DraftModel, parts: TargetParts, target, settings: TrainSettings,
                 compute_dtype: mx.Dtype, compile_step: bool = True):
        self.drafter, self.parts, self.target, self.settings = drafter, parts, target, settings
        self.compute_dtype = compute_dtype
        self.params = tree_map(lambda p: p.astype(mx.float32), drafter.trainable_parameters())
        self.optimizer = optim.AdamW(learning_rate=lr_schedule(settings),
                                     weight_decay=settings.weight_decay)
        self.optimizer.init(self.params)
        self.weights = slot_weights(settings.gamma, settings.decay)
        self._step = self._step_impl
        if compile_step:
            self._step = mx.compile(self._step_impl, inputs=[self.optimizer.state],
                                    outputs=[self.optimizer.state])

    # ---- weights -------------------------------------------------------------------------

    def compute_weights(self, params=None):
        params = self.params if params is None else params
        if self.compute_dtype == mx.float32:
            return params
        return tree_map(lambda p: p.astype(self.compute_dtype), params)

    def load_into_drafter(self, dtype: Optional[mx.Dtype] = None) -> DraftModel:
        """Put the master weights (cast to `dtype`, default the compute dtype) in the drafter."""
        if dtype is None:
            self.drafter.update(self.compute_weights())
        else:
            self.drafter.update(tree_map(lambda p: p.astype(dtype), self.params))
        return self.drafter

    def restore(self, params, optimizer_state) -> None:
        """Continue from saved master weights and optimizer state."""
        self.params = tree_map(lambda p: p.astype(mx.float32), params)
        # In place: the compiled step holds this very dict as its state. Fresh containers:
        # the optimizer updates its per-parameter dicts in place.
        self.optimizer.state.update(tree_map(lambda x: x, optimizer_state))
        mx.eval(self.params, self.optimizer.state)

    @property
    def step(self) -> int:
        return int(self.optimizer.state["step"])

    # ---- one step ------------------------------------------------------------------------

    def _loss(self, params, capture, anchors, block, labels, lengths, teacher):
        self.drafter.update(self.compute_weights(params))
        return losses(self.drafter, self.parts, capture, anchors, block, labels, lengths,
                      self.weights, self.settings.selector_weight, teacher,
                      self.settings.kd_weight)

    def _step_impl(self, params, capture, anchors, block, labels, lengths, teacher):
        (_, metrics), grads = mx.value_and_grad(self._loss)(params, capture, anchors, block,
                                                             labels, lengths, teacher)
        grads, norm = optim.clip_grad_norm(grads, self.settings.clip)
        params = self.optimizer.apply_gradients(grads, params)
        # apply_gradients set the scheduled rate for this step before using it
        return params, metrics, norm, self.optimizer.learning_rate

    def train_step(self, batch: Batch) -> StepResult:
        ids, anchors = mx.array(batch.ids), mx.array(batch.anchors)
        if self.settings.kd_weight > 0:
            capture, logits = target_features_and_logits(self.target, ids)
            teacher = label_logits(logits, anchors, self.settings.gamma)
        else:  # a placeholder input, so both kinds of step have one signature
            capture, teacher = target_features(self.target, ids), mx.zeros((1,))
        params, metrics, norm, lr = self._step(
            self.params, capture, anchors, mx.array(batch.block),
            mx.array(batch.labels), mx.array(batch.lengths), teacher)
        mx.eval(params, metrics, norm, lr, self.optimizer.state)
        self.params = params
        return StepResult({k: float(v) for k, v in metrics.items()}, float(norm), float(lr))


class Deadline:
    """Stops the loop early enough to save before `limit` seconds from `start`."""

    def __init__(self, start: float, limit: Optional[float], clock: Callable[[], float] = time.monotonic):
        self.start, self.limit, self.clock = start, limit, clock

    @property
    def at(self) -> float:
        return float("inf") if self.limit is None else self.start + self.limit

    def left(self) -> float:
        return self.at - self.clock()

    def allows(self, seconds: float) -> bool:
        return self.left() > seconds
