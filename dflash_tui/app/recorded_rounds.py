"""A recorded session's rounds, in order: held in memory (snapshots: a few, small), or read
back from a trace by byte offset when asked for (a trace may hold thousands of rounds of
hundreds of KB each in memory, so replay keeps none of it but a few recently read).

Both give a round's number without reading it (`numbers`, from the trace's index), the
round itself or None where its line turns out damaged (`get`: remembered in `damaged`),
and the same rounds judged some other way, one record at a time as it is read (`judged`:
replay --compare-tol).

Pure Python: no MLX, no Textual.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator, Optional

from ..engine.errors import InputError
from ..engine.records import RoundRecord
from .trace_lines import parse_round

READ_BACK = 8  # records read from a trace and kept (the round on screen, the one before it, ...)

Judge = Callable[[RoundRecord], RoundRecord]


class Rounds(Sequence):
    """A session's rounds. Indexing raises InputError on a damaged one (a recording that
    `replay.load` checked has none); `get` says None."""

    numbers: Sequence[int]

    def __init__(self) -> None:
        self.damaged: set[int] = set()  # positions whose line turned out unreadable

    def __len__(self) -> int:
        return len(self.numbers)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        record = self.get(range(len(self))[i])
        if record is None:
            raise InputError(f"{self.where(i)}: round {self.numbers[i]} no longer reads "
                             "(the file changed since it was opened?)")
        return record

    def get(self, i: int) -> Optional[RoundRecord]:
        raise NotImplementedError

    def kept(self) -> int:
        """Full records held in memory."""
        raise NotImplementedError

    def where(self, i: int) -> str:
        raise NotImplementedError

    def position(self, number: int) -> Optional[int]:
        """The position of round `number` (the first, where a folder holds it twice)."""
        i = bisect_left(self.numbers, number)
        return i if i < len(self.numbers) and self.numbers[i] == number else None

    def first(self) -> Optional[RoundRecord]:
        """The first round that reads."""
        return next((r for r in map(self.get, range(len(self))) if r is not None), None)

    def bounds(self) -> Optional[tuple[int, int]]:
        """The first and last round numbers, less those known to be damaged."""
        readable = [i for i in range(len(self)) if i not in self.damaged] if self.damaged \
            else range(len(self))
        return (self.numbers[readable[0]], self.numbers[readable[-1]]) if readable else None

    def readable_numbers(self) -> Iterator[int]:
        """The round numbers, less those known to be damaged."""
        return (n for i, n in enumerate(self.numbers) if i not in self.damaged)

    def judged(self, judge: Judge) -> "Rounds":
        raise NotImplementedError

    def readable(self) -> "Rounds":
        """The same rounds less those known to be damaged."""
        return self


class RoundsInMemory(Rounds):
    def __init__(self, records: Iterable[RoundRecord], where: Path) -> None:
        super().__init__()
        self.records = tuple(records)
        self.numbers = [r.round for r in self.records]
        self._where = where

    def get(self, i: int) -> Optional[RoundRecord]:
        return self.records[i]

    def kept(self) -> int:
        return len(self.records)

    def where(self, i: int) -> str:
        return str(self._where)

    def judged(self, judge: Judge) -> "RoundsInMemory":
        return RoundsInMemory(map(judge, self.records), self._where)


class RoundsReadBack(Rounds):
    """Rounds read from disk when asked for (`_load`); the last READ_BACK read are kept,
    and one found damaged is remembered as such."""

    def __init__(self) -> None:
        super().__init__()
        self._kept: OrderedDict[int, RoundRecord] = OrderedDict()

    def _load(self, i: int) -> Optional[RoundRecord]:
        raise NotImplementedError

    def get(self, i: int) -> Optional[RoundRecord]:
        if i in self.damaged:
            return None
        record = self._kept.get(i)
        if record is not None:
            self._kept.move_to_end(i)
            return record
        record = self._load(i)
        if record is None:
            self.damaged.add(i)
            return None
        self._kept[i] = record
        while len(self._kept) > READ_BACK:
            self._kept.popitem(last=False)
        return record

    def kept(self) -> int:
        return len(self._kept)


class RoundsInTrace(RoundsReadBack):
    """Rounds in a trace file, each read (and checked) when asked for."""

    def __init__(self, path: Path, offsets: array, numbers: array, lines: array,
                 judge: Optional[Judge] = None) -> None:
        super().__init__()
        self.path = Path(path)
        self.offsets, self.numbers, self.lines = offsets, numbers, lines
        self._judge = judge

    def _load(self, i: int) -> Optional[RoundRecord]:
        try:
            with open(self.path, "rb") as f:
                return self.read(i, f)
        except OSError:
            return None

    def read(self, i: int, f: BinaryIO) -> Optional[RoundRecord]:
        """Round i read from the open trace, kept nowhere (safe off the thread that shows
        the rounds: it touches nothing shared)."""
        f.seek(self.offsets[i])
        record = parse_round(f.readline(), self.numbers[i])
        return record if record is None or self._judge is None else self._judge(record)

    def where(self, i: int) -> str:
        return f"{self.path}:{self.lines[i]}"

    def judged(self, judge: Judge) -> "RoundsInTrace":
        return RoundsInTrace(self.path, self.offsets, self.numbers, self.lines, judge)

    def readable(self) -> "RoundsInTrace":
        """The same rounds less those known to be damaged."""
        keep = [i for i in range(len(self)) if i not in self.damaged]
        return RoundsInTrace(self.path, *(array("q", (a[i] for i in keep))
                                        for a in (self.offsets, self.numbers, self.lines)),
                           self._judge)


class RoundsInFiles(RoundsReadBack):
    """Rounds in a directory of snapshots (`probe --out` writes one a round: thousands of
    them in a long run), each read (and checked) when asked for, as a trace's are; the last
    READ_BACK read are kept. Held whole, a 2,012-round `probe --out` of the fixture pair
    kept replay's first frame waiting 7 s for every file to parse, and 207 MB resident
    (0.7 s and 82 MB for a trace of more rounds). `files[i]` are round i's exports in
    order (`x` at several stages, or twice): the round is the one furthest through it, the
    last of those, as replay._snapshot_entries reads them."""

    def __init__(self, files: list, numbers: list, judge: Optional[Judge] = None) -> None:
        super().__init__()
        self.files, self.numbers = files, numbers
        self._judge = judge

    def _load(self, i: int) -> Optional[RoundRecord]:
        return self.read(i)

    def read(self, i: int) -> Optional[RoundRecord]:
        """Round i read from its files, kept nowhere (safe off the thread that shows the
        rounds); None where one of them is damaged or unreadable."""
        held = None
        for file in self.files[i]:
            try:
                record = parse_round(Path(file).read_bytes(), self.numbers[i])
            except OSError:
                record = None
            if record is None:
                return None
            if held is None or len(record.stages) >= len(held.stages):
                held = record
        return held if held is None or self._judge is None else self._judge(held)

    def where(self, i: int) -> str:
        return str(self.files[i][-1])

    def judged(self, judge: Judge) -> "RoundsInFiles":
        return RoundsInFiles(self.files, self.numbers, judge)

    def readable(self) -> "RoundsInFiles":
        keep = [i for i in range(len(self)) if i not in self.damaged]
        return RoundsInFiles([self.files[i] for i in keep], [self.numbers[i] for i in keep],
                             self._judge)


def read_all(rounds: Rounds) -> Iterator[tuple[int, Optional[RoundRecord]]]:
    """(position, record or None where damaged) for every round, in order, nothing kept:
    one pass over a trace, safe on a thread of its own."""
    if isinstance(rounds, RoundsInFiles):
        yield from ((i, rounds.read(i)) for i in range(len(rounds)))
        return
    if not isinstance(rounds, RoundsInTrace):
        yield from enumerate(map(rounds.get, range(len(rounds))))
        return
    try:
        with open(rounds.path, "rb") as f:
            for i in range(len(rounds)):
                yield i, rounds.read(i, f)
    except OSError:
        raise InputError(f"{rounds.path}: unreadable since it was opened") from None
