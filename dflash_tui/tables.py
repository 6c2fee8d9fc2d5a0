"""Flat tables of a recorded session, for a notebook or a spreadsheet (docs/SNAPSHOT.md):

    rounds   one row per round
    slots    one row per round x proposal slot
    buffers  one row per round x probed buffer (stage, layer, name)

`rows(record)` turns one round record into its rows of each table, so the same code serves
`dflash-tui export` (streamed to CSV or Parquet, one round at a time) and `load_trace`,
which gives a notebook the three tables of a trace or snapshot directory:

    from dflash_tui import load_trace
    tables = load_trace("dflash-snapshots/20250301-142233")   # rows as dicts
    rounds, slots, buffers = tables.to_pandas()                # with pandas installed

Pure Python: no MLX, no Textual.
"""

from __future__ import annotations

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
    ("first_nonfinite", str),
)
SLOTS = (
    ("round", int), ("slot", int), ("proposal", int), ("target", int), ("accepted", bool),
    ("rank", int), ("p_target", float), ("in_candidates", bool), ("chosen_index", int),
    ("argmax", int), ("left_argmax", bool),
)
BUFFERS = (
    ("round", int), ("stage", str), ("layer", int), ("buffer", str), ("shape", str),
    ("dtype", str), ("nan", int), ("posinf", int), ("neginf", int), ("min", float),
    ("max", float), ("absmax", float), ("mean", float), ("rms", float),
    ("fp16_headroom_bits", float),
)
TABLES = {"rounds": ROUNDS, "slots": SLOTS, "buffers": BUFFERS}


def rows(record: RoundRecord) -> dict[str, list[tuple]]:
    """The record's rows of each table (cells in the tables' column order)."""
    first = record.first_nonfinite
    timings = record.timings_ms
    rounds = [(
        record.round, record.position, record.gamma, record.accepted, record.bonus,
        len(record.committed_tokens), record.rollback.kind, record.rollback.rows,
        *(timings.get(stage) for stage in STAGE_ORDER),
        None if first is None else first.where,
    )]
    ranks = {r.slot: r for r in record.ranks}
    picks = {s.slot: s for s in record.selector.slots} if record.selector is not None else {}
    slots = []
    for slot, proposal in enumerate(record.proposals or ()):
        rank, pick = ranks.get(slot), picks.get(slot)
        slots.append((
            record.round, slot, proposal,
            None if rank is None else rank.target,
            None if rank is None else rank.accepted,
            None if rank is None else rank.rank,
            None if rank is None else rank.p_target,
            None if rank is None else rank.in_candidates,
            None if pick is None else pick.chosen_index,
            None if pick is None else pick.argmax,
            None if pick is None else pick.off_argmax,
        ))
    buffers = [(
        record.round, p.stage, p.layer, p.name, "x".join(str(d) for d in p.shape), p.dtype,
        p.nan, p.posinf, p.neginf, p.min, p.max, p.absmax, p.mean, p.rms, p.fp16_headroom_bits,
    ) for p in record.probes]
    return {"rounds": rounds, "slots": slots, "buffers": buffers}


def session_records(source: Path, session: Optional[int] = None):
    """(number of sessions in the source, an iterator over the chosen session's rounds).

    session: 1-based; None picks the last one (the most recent). Rounds are read one at a
    time, so a long trace never sits in memory whole."""
    from .app.replay import Header, Skipped, count_sessions, entries

    count = count_sessions(source)
    chosen = count if session is None else session
    if not 1 <= chosen <= count:
        raise InputError(f"--session {session}: {source} holds {count} session"
                         f"{'s' * (count != 1)} (expected 1..{count})")

    def rounds():
        index = 0
        for entry in entries(source):
            if isinstance(entry, Header):
                index += 1
            elif not isinstance(entry, Skipped) and max(index, 1) == chosen:
                yield entry

    return count, rounds()


@dataclass
class Tables:
    """The three tables as lists of rows (dicts keyed by column)."""
    rounds: list[dict] = field(default_factory=list)
    slots: list[dict] = field(default_factory=list)
    buffers: list[dict] = field(default_factory=list)

    def to_pandas(self):
        """(rounds, slots, buffers) as pandas DataFrames."""
        try:
            import pandas as pd
        except ImportError:
            raise InputError("Tables.to_pandas needs pandas: pip install pandas") from None
        return tuple(pd.DataFrame(getattr(self, name), columns=[c for c, _ in columns])
                     for name, columns in TABLES.items())


def load_trace(source, session: Optional[int] = None) -> Tables:
    """The flat tables of a trace, a snapshot or a directory of them (one session: the last,
    or `session`, 1-based)."""
    tables = Tables()
    _, records = session_records(Path(source), session)
    for record in records:
        for name, table_rows in rows(record).items():
            names = [c for c, _ in TABLES[name]]
            getattr(tables, name).extend(dict(zip(names, row)) for row in table_rows)
    return tables
