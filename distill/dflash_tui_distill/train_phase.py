"""The train phase: build or resume the drafter, step until --steps or the deadline, save.

A resumed run restores the float32 weights, the optimizer (moments and step), the
sampler (epoch, cursor, RNG) and the list of data shards it trains on, so it draws the
same batches and takes the same steps as one uninterrupted run would.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Callable, Optional

import mlx.core as mx
import numpy as np

from dflash_tui.engine.draft_config import parse_config
from dflash_tui.engine.errors import InputError
from dflash_tui.engine.target import DTYPES, backend

from . import dataset, state as state_lib
from .architecture import build_config, choose_mask_token, init_drafter, parameter_bytes, target_shape
from .batches import BatchSampler
from .decode_eval import decode_acceptance, whole_length
from .evaluate import EvalBlocks, accepted_by_gamma, eval_blocks, evaluate, summary_line
from .init_from import start_record, start_weights
from .interrupt import stop_on_interrupt
from .objective import target_parts
from .progress import Progress, format_stats
from .settings import RunSettings, TrainSettings, to_json
from .target_setup import resolve_dtype, target_dtype_name
from .trainer import Deadline, Trainer

Say = Callable[[str], None]
SAVE_SECONDS_GUESS = 10.0  # until the first save is timed
# The evals during training walk this many validation answers as a decode would (decode_eval);
# the eval phase walks them all.
DECODE_SEQUENCES = 64


def training_record(train: TrainSettings, data_manifest: dict, step: int, target,
                    compute_dtype: str, extra: Optional[dict] = None) -> dict:
    """config.json's "dflash_tui_training": how these weights were made."""
    record = {
        "tool": "dflash-tui distill",
        "step": step,
        "train": to_json(train),
        "data": {
            "settings": data_manifest.get("settings"),
            "target": data_manifest.get("target"),
            "prompts": data_manifest.get("prompts"),
            "kinds": data_manifest.get("kinds"),
            "sources": data_manifest.get("sources"),
            "prompts_from": data_manifest.get("prompts_from"),
            "sequences": data_manifest.get("sequences"),
            "tokens": data_manifest.get("tokens"),
        },
        "target_dtype": target_dtype_name(target),
        "compute_dtype": compute_dtype,
        "backend": backend(),
        "mlx": mx.__version__,
    }
    record.update(extra or {})
    return record


class TrainPhase:
    def __init__(self, target, train: TrainSettings, run: RunSettings, data_dir: Path,
                 out: Path, deadline: Deadline, say: Say):
        self.target, self.train, self.run, self.data_dir, self.out = target, train, run, data_dir, out
        self.deadline, self.say = deadline, say
        self.manifest = dataset.read_manifest(data_dir)
        if self.manifest is None:
            raise InputError(f"--data {data_dir}: no generated data here (run --phase data first)")
        out.mkdir(parents=True, exist_ok=True)

    def setup(self, saved: Optional[dict]) -> None:
        """Build everything; from `saved` (latest_state) when resuming."""
        train = self.train
        shards = saved["shards"] if saved else list(self.manifest.get("shards", []))
        if not shards:
            raise InputError(f"--data {self.data_dir}: no finished sequences yet (run --phase data)")
        self.shards = shards
        self.train_set = dataset.load_sequences(self.data_dir, "train", shards)
        self.eval_set = dataset.load_sequences(self.data_dir, "validation", shards)
        if saved:
            self.config = parse_config(saved["drafter_config"], f"{saved['_dir']}/state.json")
        else:
            mask = train.mask_token_id
            if mask is None:
                used = np.unique(np.concatenate(self.train_set.tokens)) if len(self.train_set) else []
                mask = choose_mask_token(self.target.tokenizer, self.target.vocab_size, used)
            self.config = build_config(self.target, train, mask)
        self.target.hook(self.config.target_layer_ids)
        self.parts = target_parts(self.target, self.config)
        self.compute_dtype_name = resolve_dtype(train.compute_dtype)
        drafter = init_drafter(self.config, train.seed)
        if train.init_from and not saved:
            drafter.update(start_weights(train.init_from, target_shape(self.target), self.config))
            mx.eval(drafter.parameters())
        # read once: the starting directory may change (or go) while this run trains
        self.started_from = start_record(train.init_from) if train.init_from else None
        self.trainer = Trainer(drafter, self.parts, self.target, train,
                               DTYPES[self.compute_dtype_name], self.run.compile)
        self.sampler = BatchSampler(self.train_set, train.batch, train.anchors, train.seq_len,
                                    train.gamma, self.config.mask_token_id, train.seed,
                                    train.short_block_fraction)
        if len(self.sampler) == 0:
            raise InputError(
                f"--data {self.data_dir}: no training sequence has a continuation of at least "
                f"--block + 1 = {train.gamma + 1} tokens within --seq-len {train.seq_len}")
        self.elapsed_before = 0.0
        self.tokens_seen = 0
        if saved:
            params, opt_state = state_lib.load_arrays(saved)
            self.trainer.restore(params, opt_state)
            try:
                self.sampler.restore(saved["sampler"])
            except (KeyError, TypeError, ValueError) as error:
                raise InputError(f"{saved['_dir']}/state.json: unreadable training state (sampler: "
                                 f"{error.__class__.__name__}: {error})") from None
            self.elapsed_before = float(saved.get("train_seconds", 0.0))
            self.tokens_seen = int(saved.get("tokens_seen", 0))
        # the log lines past the save this run starts from (all of them where a run was
        # killed before its first save): the logged curve has each step once
        for log in state_lib.LOGS:
            state_lib.truncate_jsonl(self.out / log, self.trainer.step)
        self.last_eval = state_lib.last_jsonl(self.out / "eval.jsonl", lambda r: not r.get("final"))
        gammas = [g for g in self.run.eval_gammas]
        self.eval_gammas = gammas
        self.blocks: EvalBlocks = eval_blocks(self.eval_set, self.run.eval_blocks, train.seq_len, max(gammas))
        size = parameter_bytes(self.trainer.drafter) / 1e6
        self.say(
            f"train: {self.config.kind_label} drafter, {self.config.num_hidden_layers} layers, "
            f"block {self.config.block_size}, rank {self.config.selector_rank}, top-K "
            f"{self.config.selector_top_k}, target layers {list(self.config.target_layer_ids)}, "
            f"mask token {self.config.mask_token_id}; {size:.1f} MB in bfloat16")
        self.say(
            f"train: {len(self.sampler)} training sequences ({self.train_set.total_tokens} tokens), "
            f"{len(self.blocks.rows)} validation blocks; target {target_dtype_name(self.target)}, "
            f"drafter compute {self.compute_dtype_name} on {backend()}"
            + (f"; resuming at step {self.trainer.step}" if saved else ""))

    # ---- saving --------------------------------------------------------------------------

    def state_json(self) -> dict:
        return {
            "sampler": self.sampler.state(), "shards": self.shards,
            "train_settings": to_json(self.train), "drafter_config": self.config.to_json(),
            "train_seconds": self.elapsed_before + self.train_seconds(),
            "tokens_seen": self.tokens_seen,
        }

    def save(self, last_eval: Optional[dict]) -> float:
        t0 = time.monotonic()
        step = self.trainer.step
        state_lib.save_state(self.out, step, self.trainer.params, self.trainer.optimizer.state,
                             self.state_json())
        self.write_checkpoint(last_eval)
        return time.monotonic() - t0

    def write_checkpoint(self, last_eval: Optional[dict]) -> None:
        extra = {"held_out": _brief(last_eval)} if last_eval else {}
        if self.started_from:
            extra["started_from"] = self.started_from
        record = training_record(self.train, self.manifest, self.trainer.step, self.target,
                                 self.compute_dtype_name, extra)
        weights = {k: v.astype(mx.bfloat16) for k, v in _flat(self.trainer.params).items()}
        config = self.config.to_json()
        config["dflash_tui_training"] = record
        state_lib.write_drafter_checkpoint(self.out, weights, config)

    # ---- the loop ------------------------------------------------------------------------

    def train_seconds(self) -> float:
        return time.monotonic() - self._t_start if hasattr(self, "_t_start") else 0.0

    def evaluate(self) -> dict:
        drafter = self.trainer.load_into_drafter()
        result = evaluate(drafter, self.parts, self.target, self.eval_set, self.blocks,
                          self.eval_gammas, self.train.seq_len, max(1, self.train.batch))
        result["decode"] = decode_acceptance(drafter, self.parts, self.target, self.eval_set,
                                             self.eval_gammas, whole_length(self.eval_set),
                                             max(1, self.train.batch), limit=DECODE_SEQUENCES)
        result["step"] = self.trainer.step
        result["tokens_seen"] = self.tokens_seen
        result["train_seconds"] = round(self.elapsed_before + self.train_seconds(), 1)
        state_lib.append_jsonl(self.out / "eval.jsonl", result)
        return result

    def loop(self) -> dict:
        train, run = self.train, self.run
        self._t_start = time.monotonic()
        progress = Progress(train.steps, self.trainer.step, run.progress, run.log_every)
        step_seconds, save_seconds, eval_seconds = None, SAVE_SECONDS_GUESS, 0.0
        last_eval, saved_at, window = self.last_eval, self.trainer.step, []
        stopped_early = interrupted = False
        seq_tokens = train.batch * train.seq_len
        try:
            with stop_on_interrupt(progress.note) as stop:
                end = min(train.steps, run.stop_at or train.steps)
                while self.trainer.step < end:
                    if stop.requested:  # ctrl-c: save what is done (interrupt.py)
                        interrupted = True
                        break
                    need = (step_seconds or 0.0) * 1.5 + save_seconds + 1.0
                    if not self.deadline.allows(need):
                        stopped_early = True
                        break
                    t0 = time.monotonic()
                    batch = self.sampler.next()
                    result = self.trainer.train_step(batch)
                    self._refuse_nonfinite(result, saved_at)
                    dt = time.monotonic() - t0
                    # the first step includes compiling; do not let it set the pace
                    step_seconds = dt if step_seconds is None else (dt if step_seconds > 4 * dt else 0.9 * step_seconds + 0.1 * dt)
                    self.tokens_seen += seq_tokens
                    step = self.trainer.step
                    window.append((result, dt, batch.label_tokens))
                    stats = format_stats(result.metrics["loss"], result.metrics["acc1"],
                                         seq_tokens / max(dt, 1e-9))
                    progress.update(step, stats, (end - step) * step_seconds)
                    if step % run.log_every == 0 or step == train.steps:
                        self._log(step, window)
                        window = []
                    if run.eval_every and (step % run.eval_every == 0 or step == train.steps):
                        if self.deadline.allows(eval_seconds + save_seconds + 1.0):
                            t1 = time.monotonic()
                            last_eval = self.evaluate()
                            eval_seconds = time.monotonic() - t1
                            progress.note(f"step {step}: " + summary_line(last_eval))
                    if step % run.save_every == 0 and step < train.steps:
                        save_seconds = max(self.save(last_eval), 1.0)
                        saved_at = step
        finally:
            progress.close()
        if window:
            self._log(self.trainer.step, window)
        if self.trainer.step != saved_at or not (self.out / "config.json").is_file():
            self.save(last_eval)
        done = self.trainer.step >= train.steps
        if done:
            self.say(f"train: done: step {self.trainer.step}/{train.steps}, saved in {self.out}")
        elif interrupted:
            self.say(f"train: interrupted at step {self.trainer.step}/{train.steps}; saved (run the "
                     "same command again to continue)")
        elif stopped_early:
            self.say(f"train: stopped at step {self.trainer.step}/{train.steps} before the time "
                     f"limit; saved (run the same command again to continue)")
        else:
            self.say(f"train: stopped at step {self.trainer.step} (--stop-at); saved")
        return {"step": self.trainer.step, "done": done, "interrupted": interrupted,
                "last_eval": last_eval}

    def _refuse_nonfinite(self, result, saved_at: int) -> None:
        """A NaN or infinite loss (or gradient norm) leaves NaN weights, and every step after
        trains on them: stop before a save replaces the last good weights with those."""
        loss, norm = result.metrics["loss"], result.grad_norm
        if math.isfinite(loss) and math.isfinite(norm):
            return
        if (self.out / "config.json").is_file():
            kept = (f"{self.out} keeps step {saved_at}'s weights (a lower --lr needs a new --out; "
                    f"--init-from {self.out} starts it from them)")
        else:
            kept = "nothing was saved (run again with a lower --lr)"
        raise InputError(
            f"train: step {self.trainer.step} gave loss {loss:.4g}, gradient norm {norm:.4g} at "
            f"learning rate {result.learning_rate:.3g}; stopped without saving it: {kept}")

    def _log(self, step: int, window) -> None:
        if not window:
            return
        keys = window[0][0].metrics.keys()
        seconds = sum(w[1] for w in window)
        record = {"step": step}
        record.update({k: round(float(np.mean([w[0].metrics[k] for w in window])), 5) for k in keys})
        record["grad_norm"] = round(float(np.mean([w[0].grad_norm for w in window])), 4)
        record["lr"] = window[-1][0].learning_rate
        record["tokens_per_s"] = round(len(window) * self.train.batch * self.train.seq_len / max(seconds, 1e-9), 1)
        record["label_tokens_per_s"] = round(sum(w[2] for w in window) / max(seconds, 1e-9), 1)
        record["step_seconds"] = round(seconds / len(window), 4)
        record["tokens_seen"] = self.tokens_seen
        record["peak_memory_gb"] = round(mx.get_peak_memory() / 1e9, 2)
        state_lib.append_jsonl(self.out / "train.jsonl", record)


def _flat(tree) -> dict:
    from mlx.utils import tree_flatten

    return dict(tree_flatten(tree))


def _brief(result: Optional[dict]) -> dict:
    if not result:
        return {}
    brief = {"step": result.get("step"), "blocks": result.get("blocks"),
             "accepted": accepted_by_gamma(result.get("gamma", {}))}
    if "decode" in result:
        brief["decode_sequences"] = result["decode"]["sequences"]
        brief["decode_accepted"] = accepted_by_gamma(result["decode"]["gamma"])
    return brief
