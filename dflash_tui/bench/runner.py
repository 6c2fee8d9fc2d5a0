"""Drive the engine over every prompt: the target alone once, then a Session per block.

One loaded target and drafter serve every run (Session.prefill resets the target's cache).
For each prompt, in this order:
  1. the target decoding alone (engine/baseline.py): the reference text and speed;
  2. for each block, a fresh Session with probes off, stepped round by round; its rounds'
     RoundRecords are what the tables are computed from;
  3. at temperature 0, the speculative tokens are compared with the reference.
Interleaving the reference with the blocks of the same prompt means a machine that slows
down mid-run (another process, heat) slows both sides of a speed-up alike.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from ..engine.api import Pair
from ..engine.baseline import BaselineRun, compare, eos_ids, target_decode
from ..engine.records import SessionInfo
from ..engine.session import SessionOptions
from ..engine.target import encode_prompt
from .prompts import Prompt, Workload
from .slots import SlotTally
from .stats import ALL, Cell, SpecRun, TargetRun, cell, round_stat

Proposer = Callable[[list[int], int], list[int]]
# Given a prompt, its token ids and the target-alone run of it: forced proposals, or None.
ProposerFor = Callable[[Prompt, list[int], BaselineRun], Optional[Proposer]]
WARM_UP_TOKENS = 3
WARM_UP_ROUNDS = 2


@dataclass(frozen=True)
class Settings:
    blocks: tuple[int, ...]
    max_tokens: int
    temperature: float = 0.0
    seed: int = 0
    chat: Optional[bool] = None
    layer_offset: int = 0
    dtype: str = "float32"
    oracle: bool = False
    warm_up: bool = True
    slots: bool = False  # ranks on, every run's rounds tallied per slot (bench/slots.py)

    @property
    def checks_lossless(self) -> bool:
        return self.temperature <= 0


class Progress:
    """What the runner reports while it works; the command shows it (rich), tests ignore it.
    Units are tokens: every run is budgeted max_tokens, and a run that stops early at EOS
    advances by the rest when it ends, so the total is exact."""

    def start(self, total: int) -> None: ...

    def begin(self, label: str) -> None: ...

    def advance(self, tokens: int) -> None: ...

    def finished_run(self, label: str, summary: str) -> None: ...


@dataclass
class BenchResult:
    settings: Settings
    workloads: tuple[Workload, ...]
    target_path: str = ""
    drafter_path: str = ""
    compare: Optional[str] = None  # --compare SPEC: every round carries the reference's count
    compare_tol: Optional[float] = None
    info: Optional[SessionInfo] = None  # the first session's (identity, shapes, backend)
    notes: dict[int, tuple[str, ...]] = field(default_factory=dict)  # per block
    target_runs: list[TargetRun] = field(default_factory=list)
    spec_runs: list[SpecRun] = field(default_factory=list)
    complete: bool = False
    wall_s: float = 0.0
    slots: Optional[SlotTally] = None  # --slots
    # the target's weights that hold NaN or Inf (engine/weight_check.py): its notes are in
    # `notes` too; kept apart so that the drafter's NaN logits are not blamed on the drafter
    target_weight_notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.settings.slots and self.slots is None:
            self.slots = SlotTally(len(self.settings.blocks))

    def finished_prompt_ids(self) -> set[str]:
        """Prompts with every block done (an interrupted run reports only those)."""
        done = {}
        for run in self.spec_runs:
            done[run.prompt.id] = done.get(run.prompt.id, 0) + 1
        return {pid for pid, n in done.items() if n == len(self.settings.blocks)}

    def cell_runs(self) -> list[tuple[str, int, list[SpecRun]]]:
        """(workload, block, its finished runs): one per workload and block, then the
        pooled `all` per block; what each cell (and the reference's, bench/compare.py)
        counts."""
        ids = self.finished_prompt_ids()
        runs = [r for r in self.spec_runs if r.prompt.id in ids]
        out = []
        names = [w.name for w in self.workloads if any(r.prompt.workload == w.name for r in runs)]
        for name in names + ([ALL] if len(names) > 1 else []):
            for block in self.settings.blocks:
                chosen = [r for r in runs if r.block == block and name in (ALL, r.prompt.workload)]
                out.append((name, block, chosen))
        return out

    def cells(self) -> list[Cell]:
        """One per workload and block, then the pooled `all` row per block."""
        return [cell(name, block, runs, self.target_runs) for name, block, runs in self.cell_runs()]

    @property
    def target_nonfinite(self) -> list[TargetRun]:
        """The prompts whose decode by the target alone picked from NaN/Inf logits."""
        return [t for t in self.target_runs if t.run.nonfinite_at is not None]

    @property
    def divergent(self) -> list[SpecRun]:
        return [r for r in self.spec_runs if r.divergence is not None]

    @property
    def lossless(self) -> Optional[bool]:
        """True/False at temperature 0; None when nothing was checked."""
        if not any(r.checked for r in self.spec_runs):
            return None
        return not self.divergent


def nonfinite_logits(bad: int, rounds: int, whose: str = "drafter logits") -> str:
    """The words the bench's progress and report use for rounds with non-finite logits."""
    return f"{whose} NaN/Inf in {bad} of {rounds} rounds"


def oracle_proposer(prompt_len: int, reference: BaselineRun, eos: set[int]) -> Proposer:
    """Proposals forced to the target's own greedy continuation: a drafter that cannot miss
    (the ceiling for a block on this machine). Past the reference's end (EOS) it pads."""
    tokens = list(reference.tokens)
    pad = tokens[-1] if tokens and tokens[-1] in eos else (min(eos) if eos else 0)

    def propose(committed: list[int], gamma: int) -> list[int]:
        done = len(committed) - prompt_len
        out = tokens[done:done + gamma]
        return out + [pad] * (gamma - len(out))

    return propose


class BenchRunner:
    def __init__(self, pair: Pair, workloads: Sequence[Workload], settings: Settings, *,
                 progress: Optional[Progress] = None, proposer_for: Optional[ProposerFor] = None):
        self.pair, self.target = pair, pair.target
        self.settings = settings
        self.progress = progress or Progress()
        if proposer_for is None and settings.oracle:
            stop = eos_ids(pair.target)
            proposer_for = lambda prompt, ids, ref: oracle_proposer(len(ids), ref, stop)  # noqa: E731
        self.proposer_for = proposer_for
        self.result = BenchResult(settings, tuple(workloads), str(pair.target.spec.path),
                                  str(pair.draft_dir),
                                  pair.reference.spec.text if pair.reference else None,
                                  pair.reference.tolerance if pair.reference else None,
                                  target_weight_notes=pair.target.weight_notes.notes)

    def run(self) -> BenchResult:
        """Fills self.result as it goes, so an interrupted run still has what finished."""
        t0 = time.perf_counter()
        s = self.settings
        prompts = [p for w in self.result.workloads for p in w.prompts]
        self._check_inputs(prompts)
        self.progress.start(len(prompts) * (1 + len(s.blocks)) * s.max_tokens)
        try:
            if s.warm_up and prompts:
                self._warm_up(prompts[0])
            for prompt in prompts:
                self._run_prompt(prompt)
            self.result.complete = True
        finally:
            self.result.wall_s = time.perf_counter() - t0
        return self.result

    def _check_inputs(self, prompts: Sequence[Prompt]) -> None:
        """Every prompt and block fits the target's context, before the first run."""
        self.target.check_block(max(self.settings.blocks),
                                self.pair.drafter.config.max_position_embeddings)
        for prompt in prompts:
            ids = encode_prompt(self.target.tokenizer, prompt.text, self.settings.chat)
            self.target.check_prompt(ids, source=str(prompt.path))

    def _options(self, block: int, max_tokens: int, proposer: Optional[Proposer]) -> SessionOptions:
        s = self.settings
        # Probes and ranks are what the TUI shows; the tables need none of them (--slots
        # needs the ranks).
        return SessionOptions(gamma=block, temperature=s.temperature, seed=s.seed,
                              max_tokens=max_tokens, probes=False, ranks=s.slots,
                              layer_offset=s.layer_offset, proposer=proposer)

    def _warm_up(self, prompt: Prompt) -> None:
        """First calls pay one-off costs (allocations, thread pools); keep them out of the
        timings. Nothing from here is recorded."""
        s = self.settings
        ids = encode_prompt(self.target.tokenizer, prompt.text, s.chat)
        target_decode(self.target, ids, WARM_UP_TOKENS, temperature=s.temperature, seed=s.seed)
        session = self.pair.open(prompt.text, chat=s.chat,
                                 options=self._options(s.blocks[0], s.max_tokens, None))
        try:
            for _ in session.run(WARM_UP_ROUNDS):
                pass
        finally:
            session.close()

    def _run_prompt(self, prompt: Prompt) -> None:
        s = self.settings
        ids = encode_prompt(self.target.tokenizer, prompt.text, s.chat)
        self.progress.begin(f"{prompt.id}  target alone")
        alone = target_decode(self.target, ids, s.max_tokens, temperature=s.temperature,
                              seed=s.seed, on_token=self.progress.advance)
        self.progress.advance(s.max_tokens - len(alone.tokens))
        self.result.target_runs.append(TargetRun(prompt, alone))
        self.progress.finished_run(
            f"{prompt.id}  target alone",
            f"{len(alone.tokens)} tokens, {alone.decode_s:.2f} s ({alone.finish_reason})"
            + ("" if alone.nonfinite_at is None
               else f", its logits NaN/Inf from generated token {alone.nonfinite_at}"))
        proposer = self.proposer_for(prompt, ids, alone) if self.proposer_for else None
        for block in s.blocks:
            run = self._run_block(prompt, ids, block, alone, proposer)
            self.result.spec_runs.append(run)

    def _run_block(self, prompt: Prompt, ids: list[int], block: int, alone: BaselineRun,
                   proposer: Optional[Proposer]) -> SpecRun:
        s = self.settings
        label = f"{prompt.id}  block {block}"
        self.progress.begin(label)
        session = self.pair.open(prompt.text, chat=s.chat,
                                 options=self._options(block, s.max_tokens, proposer))
        self.progress.advance(len(session.generated))  # the prefill's first token
        try:
            if self.result.info is None:
                self.result.info = session.info
            self.result.notes.setdefault(block, session.info.notes)
            rounds, records = [], []
            t0 = time.perf_counter()
            while session.finished is None:
                record = session.step_round()
                rounds.append(round_stat(record))
                if self.result.slots is not None:
                    records.append(record)
                self.progress.advance(len(record.committed_tokens))
            decode_s = time.perf_counter() - t0
            tokens = tuple(session.generated)
            prefill_s = session.prefill_record.ms / 1000
            finish = session.finished
        finally:
            session.close()
        self.progress.advance(s.max_tokens - len(tokens))
        divergence = None
        if s.checks_lossless:
            # a block past the target's context ends a spec run before the target alone
            # stops: what it committed is checked against as many of the target's tokens
            reference = alone.tokens[:len(tokens)] if finish == "context" else alone.tokens
            divergence = compare(self.target, ids, reference, tokens)
        if self.result.slots is not None:
            self.result.slots.add_run(prompt.id, prompt.workload, block, records)
        run = SpecRun(prompt=prompt, block=block, tokens=tokens, rounds=tuple(rounds),
                      prefill_s=prefill_s, decode_s=decode_s, finish_reason=finish,
                      checked=s.checks_lossless, divergence=divergence)
        accepted = sum(r.accepted for r in rounds)
        summary = (f"{len(tokens)} tokens in {len(rounds)} rounds, "
                   f"{accepted / max(len(rounds), 1):.2f} accepted/round, {decode_s:.2f} s")
        if run.nonfinite_logit_rounds:
            summary += f", {nonfinite_logits(run.nonfinite_logit_rounds, len(rounds))}"
        reference_bad = sum(1 for r in rounds if r.compare_nonfinite_logit_count)
        if reference_bad:  # --compare: a reference that overflowed says so as it happens
            summary += f", {nonfinite_logits(reference_bad, len(rounds), 'reference logits')}"
        if finish == "context":
            summary += f", stopped at the target's context ({self.target.context_length} positions)"
        if divergence is not None:
            summary += f", DIVERGED at token {divergence.index}"
        self.progress.finished_run(label, summary)
        return run
