"""`dflash-tui probe`: step the engine headless, one line per round, snapshots on request.

What a run has computed is never lost: ctrl-c stops it after the round in hand, and a
write that fails (a full disk) stops it naming the file; either way summary.json is
written for the rounds that finished, marked interrupted. Memory stays flat over long
runs: each round is printed, written and dropped; the summary keeps a few numbers per
round.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence

from . import sample
from .compare_notes import slow_on_cpu
from .engine.api import load_pair
from .engine.codec import encode
from .engine.errors import InputError
from .engine.records import nonfinite_side
from .engine.session import SessionOptions
from .outputs import clear_run, model_parts, not_a_model_folder, run_dir, writing
from .panels.format import token_cell
from .snapshot import SUMMARY_SCHEMA, export_round, session_json, write_json

DEFAULT_MAX_TOKENS = 64
EXIT_INTERRUPTED = 130
BONUS_WIDTH = 24  # characters of the bonus token a round's line shows


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def round_line(record) -> str:
    # as the TUI's tables show a token: whitespace made visible, a piece of a character as its
    # bytes (`\x82`, which repr() doubled to `'\\x82'`)
    bonus = token_cell(record.text(record.bonus), BONUS_WIDTH)
    bad = record.first_nonfinite
    committed = len(record.committed_tokens)
    # EOS or --max-tokens cut the round short: its bonus (and maybe some accepted proposals)
    # was never committed. Say what was, as the TUI's `+n` and export's `committed` do.
    cut = record.accepted is not None and committed < record.accepted + 1
    line = (
        f"round {record.round:4d}  pos {record.position:5d}  proposals {record.gamma:2d}  "
        f"accepted {record.accepted:2d}  bonus {'—' if cut else bonus}"
    )
    if cut:
        line += f"  committed {committed} ({record.finish_reason or 'cut'})"
    if record.rollback.kind != "none":
        line += f"  {record.rollback.kind} {record.rollback.rows}"
    if bad is not None:
        line += f"  FIRST NON-FINITE: {bad.where}"
    if record.nonfinite_logit_slots:  # probes on or off
        line += (f"  LOGITS NON-FINITE in {len(record.nonfinite_logit_slots)} of "
                 f"{record.gamma} slots")
    if record.comm is not None:
        line += f"  comm {record.comm.total_ms:.1f} ms"
    if record.compare is not None:
        line += compare_note(record.compare)
    return line


def compare_note(compare) -> str:
    """--compare: the reference's accepted count, its logits gone non-finite, where it first
    parts from the primary, and where a buffer first went non-finite on one side only when
    that is further on (a rounding-level divergence before an overflow would hide it)."""
    note = f"  | reference accepted {compare.accepted:2d}"
    if compare.nonfinite_logit_slots:
        note += (f"  LOGITS NON-FINITE in {len(compare.nonfinite_logit_slots)} of "
                 f"{len(compare.proposals)} slots")
    first = compare.first_divergent
    if first is not None:
        note += f"  DIVERGES: {first.where} ({first.why}{_rms_of(compare, first)})"
    bad = compare.nonfinite_after_first
    if bad is not None:
        note += f"; NON-FINITE first at {bad.where} ({nonfinite_side(bad.nonfinite)})"
    return note


def _rms_of(compare, first) -> str:
    """The first divergent buffer's rms relative error, beside the rel err judged: a buffer
    with a few huge values reads its real change there (engine/drift.py)."""
    b = next((b for b in compare.buffers
              if (b.stage, b.layer, b.buffer) == (first.stage, first.layer, first.buffer)), None)
    if b is None or b.rms_rel_err is None or first.rel_err is None:
        return ""
    return f", rms rel {b.rms_rel_err:.3g}"


def once_each(left_out: Iterable) -> list:
    """Buffers left out of the drift (records.LeftOut) over many rounds, each buffer once, as
    first seen: their shapes follow the block, which the token budget cuts in a last round."""
    first: dict = {}
    for b in left_out:
        first.setdefault((b.stage, b.layer, b.buffer), b)
    return list(first.values())


def left_out_line(left_out: Sequence) -> str:
    """--compare: the buffers the drift table could not compare (records.LeftOut, once
    each), in one line."""
    shown = ", ".join(f"{b.where} ({b.why})" for b in left_out[:4])
    more = f" and {len(left_out) - 4} more" if len(left_out) > 4 else ""
    return (f"the drift leaves out {len(left_out)} buffer{'s' * (len(left_out) != 1)} it "
            f"cannot compare (another shape, or on one side only): {shown}{more}")


@dataclass
class Tally:
    """What the summary needs from the rounds done, without keeping their records."""
    accepted: list[int] = field(default_factory=list)
    committed: list[int] = field(default_factory=list)
    first_nonfinite: Optional[dict] = None
    first_where: Optional[str] = None  # that buffer as the round line names it (ProbeRow.where)
    nonfinite_rounds: int = 0  # rounds with a probed buffer non-finite
    nonfinite_logit_rounds: list[int] = field(default_factory=list)  # round numbers
    # --compare: the reference's counts, the rounds that diverged and the first divergence
    compare_accepted: list[int] = field(default_factory=list)
    compare_diverged: int = 0
    compare_first: Optional[dict] = None
    compare_left_out: list = field(default_factory=list)  # records.LeftOut, once each
    # rounds whose reference logits held a NaN or Inf; rounds with a buffer non-finite on one
    # side only, and the first of those buffers
    compare_nonfinite_logit_rounds: list[int] = field(default_factory=list)
    compare_nonfinite: int = 0
    compare_first_nonfinite: Optional[dict] = None

    def add(self, record) -> None:
        self.accepted.append(record.accepted)
        self.committed.append(len(record.committed_tokens))
        bad = record.first_nonfinite
        self.nonfinite_rounds += bad is not None
        if bad is not None and self.first_nonfinite is None:
            self.first_nonfinite = {"round": record.round, "stage": bad.stage,
                                    "layer": bad.layer, "name": bad.name}
            self.first_where = bad.where
        if record.nonfinite_logit_slots:
            self.nonfinite_logit_rounds.append(record.round)
        if record.compare is not None:
            self.compare_accepted.append(record.compare.accepted)
            first = record.compare.first_divergent
            self.compare_diverged += first is not None
            if first is not None and self.compare_first is None:
                self.compare_first = {"round": record.round, **encode(first)}
            self.compare_left_out = once_each([*self.compare_left_out, *record.compare.left_out])
            if record.compare.nonfinite_logit_slots:
                self.compare_nonfinite_logit_rounds.append(record.round)
            bad = record.compare.first_nonfinite
            self.compare_nonfinite += bad is not None
            if bad is not None and self.compare_first_nonfinite is None:
                self.compare_first_nonfinite = {"round": record.round, **encode(bad)}

    @property
    def rounds(self) -> int:
        return len(self.accepted)

    @property
    def mean_accepted(self) -> Optional[float]:
        return _mean(self.accepted)

    def nonfinite_lines(self) -> list[str]:
        """Where the rounds went NaN / Inf: the first buffer the probes found non-finite, in
        the round's data-flow order (a target's NaN shows first in the context capture the
        drafter reads, or in verify's target logits), then the drafter's logits, which the
        engine checks probes on or off. Where the first buffer came before those logits,
        their line says they follow from it: the drafter's logits are not where it began."""
        lines = []
        first = self.first_nonfinite
        if first is not None:
            where = self.first_where
            whose = TARGET_BUFFERS.get((first["stage"], first["layer"], first["name"]))
            whose = f" ({whose})" if whose else ""
            lines.append(f"--- FIRST NON-FINITE: {where}{whose} in round {first['round']}; a "
                         f"buffer went non-finite in {self.nonfinite_rounds} of {self.rounds} "
                         "rounds")
        bad = self.nonfinite_logit_rounds
        if bad:
            line = (f"--- drafter logits NaN/Inf in {len(bad)} of {self.rounds} "
                    f"rounds, first in round {bad[0]}")
            if first is not None and (first["round"], self.first_where) != (bad[0], "draft logits") \
                    and first["round"] <= bad[0]:
                line += f", after {self.first_where} (the first non-finite buffer)"
            lines.append(line)
        return lines

    def compare_line(self, spec: str, tolerance: float) -> str:
        line = (f"--- reference {spec}: mean accepted {_shown(_mean(self.compare_accepted))}; "
                f"diverges beyond {tolerance:g} in {self.compare_diverged} of {self.rounds} "
                "rounds")
        first = self.compare_first
        if first is not None:
            layer = "" if first["layer"] is None else f" layer {first['layer']}"
            line += f", first in round {first['round']} at {first['stage']}{layer} {first['buffer']}"
        return line

    def compare_nonfinite_line(self, spec: str) -> Optional[str]:
        """Where the reference (or the drafter, against it) went NaN / Inf: its logits, and
        the first buffer non-finite on one side only. None when neither did."""
        logits, bad = self.compare_nonfinite_logit_rounds, self.compare_first_nonfinite
        if not logits and bad is None:
            return None
        parts = []
        if logits:
            parts.append(f"logits NaN/Inf in {len(logits)} of {self.rounds} rounds, first in "
                         f"round {logits[0]}")
        if bad is not None:
            layer = "" if bad["layer"] is None else f" layer {bad['layer']}"
            parts.append(f"a buffer non-finite on one side only in {self.compare_nonfinite} of "
                         f"{self.rounds} rounds, first in round {bad['round']} at "
                         f"{bad['stage']}{layer} {bad['buffer']} "
                         f"({nonfinite_side(bad['nonfinite'])})")
        return f"--- reference {spec}: " + "; ".join(parts)

    def compare_summary(self, spec: str) -> dict:
        return {"compare": spec, "compare_accepted_per_round": self.compare_accepted,
                "compare_mean_accepted": _mean(self.compare_accepted),
                "compare_first_divergent": self.compare_first,
                "compare_left_out": [encode(b) for b in self.compare_left_out],
                "compare_nonfinite_logit_rounds": self.compare_nonfinite_logit_rounds,
                "compare_first_nonfinite": self.compare_first_nonfinite}


# the probed buffers that are the target's own outputs (probes.BUFFERS): a NaN there began in
# the target, however much of the drafter goes non-finite after it
TARGET_BUFFERS = {("context", None, "capture"): "the target's layer outputs",
                  ("verify", None, "capture"): "the target's layer outputs",
                  ("verify", None, "target_logits"): "the target's logits"}


def _mean(values: list[int]) -> Optional[float]:
    """None for no rounds (--max-tokens 1 is the prefill's token alone): not a mean of 0."""
    return sum(values) / len(values) if values else None


def _shown(mean: Optional[float]) -> str:
    return "—" if mean is None else f"{mean:.2f}"


def _export(out: Path, record, info, npz: bool) -> None:
    stem = out / f"round-{record.round:04d}"
    files = [stem.with_suffix(".json")] + ([stem.with_suffix(".npz")] if npz and record.raw else [])
    try:
        export_round(out, record, info, npz=npz)
    except OSError:
        # write_atomic renames each file into place last: the first one missing failed. A
        # round is on disk whole or not at all, so the summary can list exactly those.
        failed = next((f for f in files if not f.exists()), files[0])
        for written in files:
            written.unlink(missing_ok=True)
        with writing(failed):
            raise


def distributed_line(d) -> str:
    return (f"target sharded over {d.world_size} ranks ({d.backend}, {d.sharding} parallel: "
            f"{d.per_rank} per rank); {d.collectives_per_forward} all_sums per forward, "
            f"{d.all_sum_us:.0f} us each (+{d.all_sum_us_per_row:.1f} us per row)")


def run(args) -> int:
    model, draft = sample.resolve(args.model, args.draft)
    prompt = args.prompt_text if args.prompt_text is not None else sample.DEFAULT_PROMPT
    if args.max_tokens is not None:
        max_tokens = args.max_tokens
    else:
        max_tokens = 10**9 if args.rounds else DEFAULT_MAX_TOKENS
    options = SessionOptions(
        gamma=args.block, temperature=args.temperature, seed=args.seed, max_tokens=max_tokens,
        probes=not args.no_probes, keep_raw=args.npz, layer_offset=args.layer_offset,
    )
    if args.force and not args.out:
        raise InputError("--force replaces an earlier run in --out DIR; give --out too")
    out = None
    if args.out:
        reference = args.compare.draft_dir if args.compare else None
        not_a_model_folder("--out", Path(args.out), model_parts(model, draft, reference))
        out = run_dir("--out", args.out, args.force)
    pair = load_pair(model, draft, dtype=args.dtype, keep_quantized=args.keep_quantized,
                     progress=_say, mesh=getattr(args, "mesh", None),
                     compare=args.compare, compare_tol=args.compare_tol)
    session = pair.open(prompt, options=options, chat=args.chat, progress=_say,
                        source=args.prompt_source)
    if out is not None and args.force:  # everything is checked: the earlier run can go
        clear_run(out)
    info = session.info
    _say(f"{pair.describe()}; {session.gamma} proposals per round; rollback by {info.rollback_kind}")
    if info.layer_offset:  # what the drafter reads is no longer what its config names
        _say(f"layer offset {info.layer_offset:+d}: reading target layers "
             f"{list(info.target_layer_ids)} (config.json names "
             f"{[i - info.layer_offset for i in info.target_layer_ids]})")
    if info.distributed is not None:
        _say(distributed_line(info.distributed))
    slow = slow_on_cpu(info)
    for note in info.notes + ((slow,) if slow else ()):
        _say(f"note: {note}")
    tally, interrupted, failed = Tally(), False, None
    t0 = time.perf_counter()
    try:
        _step(session, out, args.rounds, args.npz, tally)
    except KeyboardInterrupt:
        interrupted = True
    except InputError as error:  # a write failed: the rounds before it are whole on disk
        failed = str(error)
    seconds = time.perf_counter() - t0
    # The prefill's token and the rounds counted (a round cut short by ctrl-c or a failed
    # write may have committed tokens that no round file records).
    generated = session.generated[: 1 + sum(tally.committed)]
    text = pair.target.tokenizer.decode(generated)
    # tokens/s as the bench counts it: what the rounds committed over the rounds' time (the
    # prefill's token came before the clock started)
    rate = f" ({sum(tally.committed) / seconds:.1f} tokens/s)" if tally.rounds and seconds > 0 else ""
    print(f"--- {len(generated)} tokens in {tally.rounds} rounds, {seconds:.2f} s{rate}; "
          f"mean accepted {_shown(tally.mean_accepted)}", flush=True)
    for line in tally.nonfinite_lines():
        print(line, flush=True)
    if session.finished == "context":  # eos and length stop where one expects; this says why
        _say(f"probe: stopped: {session.finish_message}")
    if args.compare:
        print(tally.compare_line(args.compare.text, args.compare_tol), flush=True)
        nonfinite = tally.compare_nonfinite_line(args.compare.text)
        if nonfinite:
            print(nonfinite, flush=True)
        if tally.compare_left_out:
            print(f"--- {left_out_line(tally.compare_left_out)}", flush=True)
    print(text, flush=True)
    session.close()
    summary = None
    if out is not None:
        summary = _write_summary(out, session, info, generated, text, tally, seconds,
                                 stopped=interrupted or failed is not None, error=failed,
                                 compare=args.compare.text if args.compare else None)
    if failed is not None:
        raise InputError(f"{failed}; stopped after {tally.rounds} rounds"
                         + ("" if summary or out is None else " (summary.json not written either)"))
    if interrupted:
        _say(f"probe: interrupted after {tally.rounds} rounds"
             + (f"; {summary} records them, marked interrupted" if summary else ""))
        return EXIT_INTERRUPTED
    return 0


def _step(session, out: Optional[Path], rounds: Optional[int], npz: bool, tally: Tally) -> None:
    """Write each round, count it, print its line, then let it go: a printed round is on
    disk. A ctrl-c while a round is being written finishes that write first."""
    for record in session.run(rounds):
        if out is not None:
            try:
                _export(out, record, session.info, npz)
            except KeyboardInterrupt:
                _export(out, record, session.info, npz)
                tally.add(record)
                raise
        tally.add(record)
        print(round_line(record), flush=True)


def _write_summary(out: Path, session, info, generated, text, tally: Tally, seconds: float,
                   stopped: bool, error: Optional[str], compare: Optional[str]) -> Optional[Path]:
    """summary.json for the rounds done; after a failed write it may fail too (None)."""
    path = out / "summary.json"
    summary = {
        "schema": SUMMARY_SCHEMA,
        "session": session_json(info),
        "tokens": generated,
        "text": text,
        "rounds": tally.rounds,
        "accepted_per_round": tally.accepted,
        "committed_per_round": tally.committed,
        "mean_accepted": tally.mean_accepted,
        "finish_reason": session.finished,
        "first_nonfinite": tally.first_nonfinite,
        "nonfinite_logit_rounds": tally.nonfinite_logit_rounds,
        "seconds": seconds,
        "interrupted": stopped,
        **(tally.compare_summary(compare) if compare else {}),
    }
    if error is not None:
        summary["error"] = error
    try:
        with writing(path):
            write_json(path, summary)
    except InputError:
        if error is None:
            raise
        return None
    _say(f"wrote {tally.rounds} snapshots and summary.json to {out}")
    return path
