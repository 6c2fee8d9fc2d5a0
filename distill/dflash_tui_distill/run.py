"""Runs the phases of one `dflash-tui distill` command in order, under one deadline."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

from dflash_tui.engine.errors import InputError

from . import dataset, state as state_lib
from .architecture import check_against_target, target_shape
from .continuations import load as load_continuations
from .data_phase import read_extra_prompts, run_data_phase
from .holdout import read_holdouts, refuse_clashes
from .init_from import apply_shape, refuse_other_target
from .outputs import check_out, writable_dir
from .settings import (DataSettings, RunSettings, TrainSettings, check_data, check_train,
                       eval_gammas_for, merge)
from .target_setup import eval_target, load_for_distill, resolve_dtype, retype, target_dtype_name
from .trainer import Deadline

# With --phase all and a time limit, this share of the limit (at most EVAL_RESERVE_MAX
# seconds) is kept back from training for the final evaluation.
EVAL_RESERVE_SHARE, EVAL_RESERVE_MAX = 0.15, 90.0
EXIT_INTERRUPTED = 130  # as the shell reports ctrl-c, and as probe and bench exit on it


class Distill:
    def __init__(self, run: RunSettings, data_given: dict, train_given: dict, started: float,
                 say: Callable[[str], None]):
        self.run_settings, self.say = run, say
        self.out = Path(run.out).expanduser()
        self.data_dir = Path(run.data).expanduser() if run.data else self.out / "data"
        if self.out.exists() and not self.out.is_dir():
            raise InputError(f"--out {self.out}: exists and is not a directory")
        self.target_path = self._target_path(run.target)
        self.deadline = Deadline(started, run.time_limit)
        manifest = dataset.read_manifest(self.data_dir)
        self.data = merge(DataSettings, data_given, manifest["settings"] if manifest else None,
                          str(self.data_dir / dataset.MANIFEST))
        check_data(self.data)
        data_to_make = run.phase in ("data", "all") and not (manifest and manifest.get("prompts"))
        if data_to_make and self.data.prompts_from and not Path(self.data.prompts_from).is_file():
            raise InputError(f"--prompts-from {self.data.prompts_from}: no such file (expected JSON lines "
                             "of prompts; scripts/build_prompt_corpus.sh makes the sample recipe's)")
        if data_to_make and self.data.extra_prompts:
            # read again after the target's own prompts are generated; a bad file must fail
            # here, before minutes of that
            read_extra_prompts(self.data.extra_prompts)
        data_left = run.phase in ("data", "all") and not (manifest and manifest.get("complete"))
        self.continuations = None  # read only where data are still to be decoded
        if run.continuations_from and data_left:
            self.continuations = load_continuations(run.continuations_from)
            self.continuations.check(self.data.max_new_tokens, self.data.data_dtype)
        self.saved = state_lib.latest_state(self.out)
        if run.resume and self.saved is None:
            raise InputError(f"--resume: {self.out} has no saved training state ({state_lib.TRAINING}/{state_lib.LATEST})")
        saved_train = self.saved["train_settings"] if self.saved else None
        if saved_train is None and train_given.get("init_from"):
            train_given = apply_shape(train_given, train_given["init_from"])
        where = f"{self.out / state_lib.TRAINING}"
        self.train = merge(TrainSettings, train_given, saved_train, where)
        check_train(self.train)
        self.run_settings = replace(run, eval_gammas=eval_gammas_for(run.eval_gammas, self.train.gamma))
        self.holdout = read_holdouts(run.holdout)
        self._refuse_test_prompts_in_data()
        # last, once every setting is known to be good: nothing is written before this
        check_out(self.out, run.phase)
        if run.phase in ("data", "all"):
            writable_dir(self.data_dir, "--data")
        self.target = None

    def _refuse_test_prompts_in_data(self) -> None:
        """Before anything loads: data that holds a test prompt is never used."""
        prompts = dataset.read_prompts(self.data_dir)
        if prompts:
            where = self.data_dir / dataset.PROMPTS
            refuse_clashes(((f"{where} line {p['i'] + 1}", p["text"]) for p in prompts), self.holdout)

    @staticmethod
    def _target_path(given) -> Path:
        if given is None:
            from dflash_tui.sample import sample_target

            return sample_target()
        path = Path(given).expanduser()
        if not path.exists():
            raise InputError(f"{path}: no such target (expected an mlx-lm model directory or a .gguf file)")
        return path

    def run(self) -> int:
        phase = self.run_settings.phase
        phases = ("data", "train", "eval") if phase == "all" else (phase,)
        if "data" in phases and not self._data():
            return 0
        if "train" in phases:
            result = self._train(reserve_eval=phase == "all")
            if result["interrupted"]:
                return EXIT_INTERRUPTED  # saved; the eval waits for the next command
            if not result["done"]:
                return 0
        if "eval" in phases:
            self._eval()
        return 0

    # ---- phases --------------------------------------------------------------------------

    def _data(self) -> bool:
        self.say(f"data: target {self.target_path} in {self.data.data_dtype}; test sets kept out: "
                 f"{len(self.holdout)} prompt units from {self.holdout.source}")
        self.target = load_for_distill(self.target_path, self.data.data_dtype, dequantize=True)
        if self.saved is None:  # what the drafter will need of this target, before the data costs time
            if self.train.init_from:
                refuse_other_target(self.train.init_from, target_shape(self.target))
            check_against_target(self.target, self.train, self.train.mask_token_id)
        manifest = run_data_phase(self.target, self.data_dir, self.data, self.holdout,
                                  self.run_settings.gen_batch, self.deadline.at, self.say,
                                  continuations=self.continuations)
        return bool(manifest.get("complete"))

    def _train(self, reserve_eval: bool) -> dict:
        wanted = resolve_dtype(self.train.target_dtype)
        if not self.train.dequantize:
            self.target = None  # reload it quantized
        if self.target is not None and target_dtype_name(self.target) == "float32" and wanted != "float32":
            retype(self.target, wanted)  # narrowing the float32 target loses nothing we keep
        elif self.target is None or target_dtype_name(self.target) != wanted:
            self.target = load_for_distill(self.target_path, wanted, self.train.dequantize)
        deadline = self.deadline
        if reserve_eval and deadline.limit is not None:
            reserve = min(EVAL_RESERVE_SHARE * deadline.limit, EVAL_RESERVE_MAX)
            deadline = Deadline(deadline.start, deadline.limit - reserve, deadline.clock)
        from .train_phase import TrainPhase

        phase = TrainPhase(self.target, self.train, self.run_settings, self.data_dir, self.out,
                           deadline, self.say)
        phase.setup(self.saved)
        result = phase.loop()
        self.target.unhook()
        self.saved = state_lib.latest_state(self.out)
        return result

    def _eval(self) -> None:
        from .eval_phase import run_eval_phase

        run_eval_phase(lambda: eval_target(self.target, self.target_path), self.out, self.data_dir,
                       self.run_settings, self.say)
