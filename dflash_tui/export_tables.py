"""`dflash-tui export SOURCE --out DIR [--format csv|parquet] [--session N] [--compare-tol TOL]`:
the flat tables of a trace, a snapshot or a directory of them (tables.py), written as rounds /
slots / buffers .csv or .parquet. Rounds are read and written one at a time: a trace of any
length fits. Each file is written beside its final name and renamed into place when complete.
"""

from __future__ import annotations

import csv
import math
import os
import sys
import tempfile
from functools import partial
from pathlib import Path

from .engine.errors import InputError
from .outputs import same_file
from .tables import TABLES, columns, rows, session_records

PARQUET_BATCH = 4096  # rows buffered per Parquet record batch


def run(args) -> int:
    source, out = Path(args.source).expanduser(), Path(args.out).expanduser()
    if args.format == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InputError("--format parquet needs pyarrow: pip install 'dflash-tui[parquet]'") from None
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a directory")
    home = source if source.is_dir() else source.parent  # a trace's or a snapshot's folder
    if source.exists() and same_file(out, home):  # tables there go stale with its rounds
        raise InputError(f"--out {out}: is SOURCE's own folder (give the tables a folder of their own)")
    present = next((f for f in (out / f"{name}.{args.format}" for name in TABLES) if f.exists()), None)
    if present is not None and not args.force:
        raise InputError(f"--out {out}: already holds {present.name} (an earlier export?); "
                         "give an empty or new folder, or --force to replace its tables")
    from .app.replay import Damage, judged_at

    damage = Damage()  # the lines skipped, said once every round is read
    count, compared, records = session_records(source, args.session, damage)
    if args.compare_tol is not None:  # refused before --out is made
        if not compared:
            raise InputError(f"--compare-tol: the exported session of {source} has no round "
                             "with a reference configuration (a session run with --compare)")
        records = map(partial(judged_at, args.compare_tol), records)  # one at a time
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"--out {out}: cannot create it ({error.strerror or error})") from None
    if count > 1 and args.session is None:
        print(f"note: {source} holds {count} sessions; exporting the last one with rounds "
              "(--session N picks one)", file=sys.stderr)
    tables = columns(compared)
    writer = ParquetTables(out, tables) if args.format == "parquet" else CsvTables(out, tables)
    written = {name: 0 for name in tables}
    try:
        for record in records:
            for name, table_rows in rows(record, compared).items():
                writer.write(name, table_rows)
                written[name] += len(table_rows)
        writer.close()
    except OSError as error:
        writer.discard()
        raise InputError(f"{error.filename or out}: {error.strerror or error}") from None
    except BaseException:
        writer.discard()
        raise
    for name in tables:
        print(f"{out / (name + '.' + args.format)}: {written[name]} rows")
    for note in damage.notes(source, plain=True):
        print(f"note: {note}", file=sys.stderr)
    return 0


class CsvTables:
    """Three CSV files: a header line, then one line per row; empty cells for no value,
    true / false for booleans, floats with every digit (repr)."""

    def __init__(self, out: Path, tables: dict[str, tuple]) -> None:
        self._files, self._writers = {}, {}
        for name, cols in tables.items():
            final = out / f"{name}.csv"
            fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{final.name}.", suffix=".tmp")
            f = os.fdopen(fd, "w", encoding="utf-8", newline="")
            self._files[name] = (f, Path(tmp), final)
            self._writers[name] = csv.writer(f)
            self._writers[name].writerow([c for c, _ in cols])

    def write(self, name: str, table_rows: list[tuple]) -> None:
        self._writers[name].writerows([_csv_cell(v) for v in row] for row in table_rows)

    def close(self) -> None:
        for f, tmp, final in self._files.values():
            f.flush()
            os.fsync(f.fileno())
            f.close()
            os.chmod(tmp, 0o644)
            os.replace(tmp, final)

    def discard(self) -> None:
        for f, tmp, _ in self._files.values():
            f.close()
            tmp.unlink(missing_ok=True)


def _csv_cell(value):
    if value is None or isinstance(value, float) and not math.isfinite(value):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return value


class ParquetTables:
    """Three Parquet files with fixed schemas (the tables' column types), written in batches."""

    def __init__(self, out: Path, tables: dict[str, tuple]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        types = {int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()}
        self._pa = pa
        self._tables = {}
        for name, cols in tables.items():
            schema = pa.schema([(c, types[t]) for c, t in cols])
            final = out / f"{name}.parquet"
            fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{final.name}.", suffix=".tmp")
            os.close(fd)
            self._tables[name] = (pq.ParquetWriter(tmp, schema), schema, [], Path(tmp), final)

    def write(self, name: str, table_rows: list[tuple]) -> None:
        writer, schema, pending, _, _ = self._tables[name]
        pending.extend(table_rows)
        if len(pending) >= PARQUET_BATCH:
            self._flush(name)

    def _flush(self, name: str) -> None:
        writer, schema, pending, _, _ = self._tables[name]
        if pending:
            cells = list(zip(*pending))
            writer.write_batch(self._pa.record_batch(
                [self._pa.array(col, type=field.type) for col, field in zip(cells, schema)],
                schema=schema))
            pending.clear()

    def close(self) -> None:
        for name, (writer, _, _, tmp, final) in self._tables.items():
            self._flush(name)
            writer.close()
            os.chmod(tmp, 0o644)
            os.replace(tmp, final)

    def discard(self) -> None:
        for writer, _, _, tmp, _ in self._tables.values():
            try:
                writer.close()
            finally:
                tmp.unlink(missing_ok=True)
