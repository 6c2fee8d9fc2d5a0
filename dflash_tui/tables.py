"""Flat tables of a recorded session, for a notebook or a spreadsheet (docs/SNAPSHOT.md):

    rounds   one row per round
    slots    one row per round x proposal slot
    buffers  one row per round x probed buffer (stage, layer, name)

A session run with --compare SPEC adds a column set to each table (COMPARE): the reference
configuration's side of the same rounds, slots and buffers. Its columns are there exactly
when the session ran one (its header says so, or its first round carries a reference).

`rows(record)` turns one round record into its rows of each table, so the same code serves
`dflash-tui export` (streamed to CSV or Parquet, one round at a time) and `load_trace`,
which gives a notebook the three tables of a trace or snapshot directory:

    from dflash_tui import load_trace
    tables = load_trace("dflash-snapshots/20250301-142233")   # rows as dicts
    rounds, slots, buffers = tables.to_pandas()                # with pandas installed

Pure Python: no MLX, no Textual.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .engine.errors import InputError
from .engine.records import STAGE_ORDER, RoundRecord

# (column, type) in file order; a cell may also be empty (None) where the round had no value
ROUNDS = (
    ("round", int), ("position", int), ("gamma", int), ("accepted", int), ("bonus", int),
    ("committed", int), ("rollback_kind", str), ("rollback_rows", int),
    *((f"ms_{stage}", float) for stage in STAGE_ORDER),
    ("first_nonfinite", str), ("top_k", int),
)
SLOTS = (
    ("round", int), ("slot", int), ("proposal", int), ("target", int), ("accepted", bool),
    ("rank", int), ("p_target", float), ("in_candidates", bool), ("chosen_index", int),
    ("argmax", int), ("left_argmax", bool), ("logits_nonfinite", bool), ("target_p1", float),
)
BUFFERS = (
    ("round", int), ("stage", str), ("layer", int), ("buffer", str), ("shape", str),
    ("dtype", str), ("nan", int), ("posinf", int), ("neginf", int), ("min", float),
    ("max", float), ("absmax", float), ("mean", float), ("rms", float),
    ("fp16_headroom_bits", float),
)
TABLES = {"rounds": ROUNDS, "slots": SLOTS, "buffers": BUFFERS}
# --compare: the reference configuration's columns, after each table's own
COMPARE = {
    "rounds": (("compare_accepted", int), ("compare_first_divergent", str), ("compare_ms", float),
               ("compare_top_k", int)),
    "slots": (("compare_proposal", int), ("compare_rank", int), ("compare_accepted", bool),
              ("compare_target", int), ("compare_argmax", int), ("compare_left_argmax", bool),
              ("compare_in_candidates", bool), ("compare_logits_nonfinite", bool),
              ("compare_target_p1", float)),
    "buffers": (("compare_max_abs_diff", float), ("compare_rel_err", float),
                ("compare_nonfinite", str), ("compare_rms_rel_err", float)),
}


def columns(compared: bool = False) -> dict[str, tuple]:
    """Each table's (column, type) pairs: with the compare set when the session ran one."""
    return {name: cols + (COMPARE[name] if compared else ()) for name, cols in TABLES.items()}


def rows(record: RoundRecord, compared: bool = False) -> dict[str, list[tuple]]:
    """The record's rows of each table (cells in the order of `columns(compared)`; a round
    without a reference record leaves the compare cells empty)."""
    c = record.compare if compared else None
    first = record.first_nonfinite
    timings = record.timings_ms
    rounds = [(
        record.round, record.position, record.gamma, record.accepted, record.bonus,
        len(record.committed_tokens), record.rollback.kind, record.rollback.rows,
        *(timings.get(stage) for stage in STAGE_ORDER),
        None if first is None else first.where,
        None if record.selector is None else record.selector.top_k,
    )]
    if compared:
        divergent = c.first_divergent if c is not None else None
        rounds = [rounds[0] + (None if c is None else c.accepted,
                               None if divergent is None else divergent.where,
                               None if c is None else c.ms,
                               None if c is None else c.top_k)]
    ranks = {r.slot: r for r in record.ranks}
    picks = {s.slot: s for s in record.selector.slots} if record.selector is not None else {}
    bad_logits = record.nonfinite_logit_slots
    reference_p1 = record.reference_target_p1() if c is not None else ()
    slots = []
    for slot, proposal in enumerate(record.proposals or ()):
        rank, pick = ranks.get(slot), picks.get(slot)
        row = (
            record.round, slot, proposal,
            None if rank is None else rank.target,
            None if rank is None else rank.accepted,
            None if rank is None else rank.rank,
            None if rank is None else rank.p_target,
            None if rank is None else rank.in_candidates,
            None if pick is None else pick.chosen_index,
            None if pick is None else pick.argmax,
            None if pick is None else pick.off_argmax,
            None if bad_logits is None else slot in bad_logits,
            None if rank is None else rank.target_p1,
        )
        if compared:
            row += (None,) * 9 if c is None else (
                c.proposals[slot], c.ranks[slot], slot < c.accepted,
                *(_at(cells, slot) for cells in (c.targets, c.argmax, c.left_argmax,
                                                 c.in_candidates)),
                None if c.nonfinite_logit_slots is None else slot in c.nonfinite_logit_slots,
                _at(reference_p1, slot))
        slots.append(row)
    drift = {(b.stage, b.layer, b.buffer): b for b in c.buffers} if c is not None else {}
    buffers = []
    for p in record.probes:
        row = (
            record.round, p.stage, p.layer, p.name, "x".join(str(d) for d in p.shape), p.dtype,
            p.nan, p.posinf, p.neginf, p.min, p.max, p.absmax, p.mean, p.rms, p.fp16_headroom_bits,
        )
        if compared:
            row += _drift_cells(drift.pop((p.stage, p.layer, p.name), None))
        buffers.append(row)
    # compared but not probed (probe --no-probes): the buffer's statistics stay empty
    buffers += [(record.round, b.stage, b.layer, b.buffer, *(None,) * 11, *_drift_cells(b))
                for b in drift.values()]
    return {"rounds": rounds, "slots": slots, "buffers": buffers}


def _at(cells: tuple, slot: int):
    """A per-slot cell of the reference, empty where it has none (DFlash's selector; a
    trace written before the field)."""
    return cells[slot] if slot < len(cells) else None


def _drift_cells(b) -> tuple:
    return (None,) * 4 if b is None else (b.max_abs_diff, b.rel_err, b.nonfinite, b.rms_rel_err)


def session_records(source: Path, session: Optional[int] = None, damage=None):
    """(number of sessions in the source, whether the chosen one ran a reference
    configuration, an iterator over its rounds).

    session: 1-based; None picks the last one with a round (the most recent). Rounds are read one at a
    time, so a long trace never sits in memory whole. A session with no readable round is
    refused as replay refuses it. damage: a replay.Damage that counts the lines skipped."""
    from .app.replay import Damage, Header, Skipped, count_sessions, entries, no_round

    damage = Damage() if damage is None else damage
    count = count_sessions(source)
    chosen = count if session is None else session
    if not 1 <= chosen <= count:
        raise InputError(f"--session {session}: {source} holds {count} session"
                         f"{'s' * (count != 1)} (expected 1..{count})")
    header: list[Header] = []  # the chosen session's, once read
    headers, rounds_in = [0], {}  # sessions seen; rounds per session

    def rounds():
        index = 0
        for entry in entries(source):
            if isinstance(entry, Header):
                index += 1
                headers[0] += 1
                if index == chosen:
                    header.append(entry)
            elif isinstance(entry, Skipped):
                damage.add(entry)
            else:
                rounds_in[max(index, 1)] = rounds_in.get(max(index, 1), 0) + 1
                if max(index, 1) == chosen:
                    yield entry

    records = rounds()
    first = next(records, None)  # reads as far as the session's first round
    if first is None:  # then the whole recording was read
        if rounds_in and session is None:  # the last session has none (a restart, then q)
            damage.skipped, damage.newer = 0, {}  # counted again by the second reading
            return session_records(source, max(rounds_in), damage)
        if rounds_in:
            raise InputError(f"--session {chosen}: {source}'s session {chosen} holds no "
                             "complete round (its rounds are in other sessions)")
        raise no_round(source, damage.skipped, headers=bool(headers[0]))
    info = header[0].info if header else None
    compared = (info is not None and info.compare is not None) or first.compare is not None
    return count, compared, itertools.chain([first], records)


@dataclass
class Tables:
    """The three tables as lists of rows (dicts keyed by column)."""
    rounds: list[dict] = field(default_factory=list)
    slots: list[dict] = field(default_factory=list)
    buffers: list[dict] = field(default_factory=list)
    columns: dict[str, tuple] = field(default_factory=columns)  # each table's (column, type)

    def to_pandas(self):
        """(rounds, slots, buffers) as pandas DataFrames."""
        try:
            import pandas as pd
        except ImportError:
            raise InputError("Tables.to_pandas needs pandas: pip install pandas") from None
        return tuple(pd.DataFrame(getattr(self, name), columns=[c for c, _ in cols])
                     for name, cols in self.columns.items())


def load_trace(source, session: Optional[int] = None) -> Tables:
    """The flat tables of a trace, a snapshot or a directory of them (one session: the last,
    or `session`, 1-based); with the compare columns when the session ran --compare."""
    _, compared, records = session_records(Path(source), session)
    tables = Tables(columns=columns(compared))
    names = {name: [c for c, _ in cols] for name, cols in tables.columns.items()}
    for record in records:
        for name, table_rows in rows(record, compared).items():
            getattr(tables, name).extend(dict(zip(names[name], row)) for row in table_rows)
    return tables
