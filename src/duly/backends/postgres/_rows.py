"""Rows of the PostgreSQL backend as records, each field read from the column of its name.

A ``Rows`` is a psycopg row factory for ONE named query of ``queries/*.sql``: on the query's
first result it looks up, by name, the column of every field it fills (a missing column is
an error then, not a shifted field), and builds every later row from those indexes. A
query's columns never change, so that lookup runs once per process, off the claim path.
``claim`` (the hot path) keeps psycopg's plain tuple rows and reads them through the
indexes its ``Columns`` learnt by name the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from psycopg.rows import RowMaker, no_result

from duly._records import JobRecord, QueueStats, StatRow, WorkerRecord

if TYPE_CHECKING:
    from psycopg.cursor_async import AsyncCursor

__all__ = [
    "CLAIM",
    "GET_JOB",
    "LIST_JOBS",
    "LIST_JOBS_BY_KEY",
    "QUEUE_STATS",
    "STATS",
    "WORKERS",
    "ClaimColumns",
    "Columns",
    "Rows",
]

R = TypeVar("R")


class Rows(Generic[R]):
    """The row factory of one query: ``build`` gets the result's column names, once, and
    returns what turns one row (a tuple) into an ``R``."""

    __slots__ = ("_build", "_make")

    def __init__(self, build: Callable[[Sequence[str]], RowMaker[R]]) -> None:
        self._build = build
        self._make: RowMaker[R] | None = None

    def __call__(self, cursor: AsyncCursor[Any]) -> RowMaker[R]:
        make = self._make
        if make is None:
            names = _names(cursor)
            if not names:
                return no_result  # psycopg asks for a maker even without rows
            make = self._make = self._build(names)
        return make


def _names(cursor: AsyncCursor[Any]) -> list[str]:
    """The column names of the cursor's current result (cheaper than ``description``)."""
    result = cursor.pgresult
    if result is None:
        return []
    return [(result.fname(i) or b"").decode() for i in range(result.nfields)]


def _getter(names: Sequence[str], wanted: Sequence[str], what: str) -> Callable[[Any], Any]:
    """What takes the values of the columns ``wanted`` (a tuple, in that order) from a row
    whose columns are ``names``: a slice when they are side by side (as ``{columns}`` puts
    them), else one index per column."""
    index = {name: i for i, name in enumerate(names)}
    missing = [name for name in wanted if name not in index]
    if missing:
        raise RuntimeError(f"the query for {what} returns no column {missing} ({names})")
    at = [index[name] for name in wanted]
    if at == list(range(at[0], at[0] + len(at))):
        return itemgetter(slice(at[0], at[0] + len(at)))
    return itemgetter(*at)


def _fields(cls: type[Any]) -> list[str]:
    return [field.name for field in dataclasses.fields(cls)]


def record(cls: type[R]) -> Callable[[Sequence[str]], RowMaker[R]]:
    """Build ``cls`` (a dataclass) from each row: every field from the column of its name."""

    def build(names: Sequence[str]) -> RowMaker[R]:
        values = _getter(names, _fields(cls), cls.__name__)
        return lambda row: cls(*values(row))

    return build


class ClaimColumns:
    """Where the columns of ``claim`` are in its rows, by name: ``run`` (taken, or parked),
    ``pos`` (the place of the job's queue in the claim's list), ``position``, ``gate``,
    ``gate_limit``, then the job's. Its rows stay plain tuples (psycopg's fastest path: no
    Python call per row) and only taken jobs become records."""

    __slots__ = ("_at", "_job")

    def __init__(self, names: Sequence[str]) -> None:
        at = {name: i for i, name in enumerate(names)}
        _getter(names, ["run", "pos", "position", "gate", "gate_limit"], "claim")
        self._at = at
        self._job = _getter(names, _fields(JobRecord), "claim")

    def read(self, rows: list[tuple[Any, ...]]) -> tuple[list[JobRecord], dict[str, int], bool]:
        """The jobs taken, in claim order (RETURNING has none: queue, priority, position,
        id); the limit each full gate had, by gate (from parked rows); whether any row had a
        gate."""
        at, job = self._at, self._job
        run, gate, gate_limit = at["run"], at["gate"], at["gate_limit"]
        pos, priority, position, id_ = at["pos"], at["priority"], at["position"], at["id"]
        taken = sorted(
            (row for row in rows if row[run]),
            key=lambda row: (row[pos], -row[priority], row[position], row[id_]),
        )
        full = {row[gate]: row[gate_limit] for row in rows if row[run] is False}
        gated = any(row[gate] is not None for row in rows if row[run] is not None)
        return [JobRecord(*job(row)) for row in taken], full, gated

    def expired(self, rows: list[tuple[Any, ...]]) -> list[str]:
        """The ids of the expired jobs the claim reported (``run`` NULL: not taken)."""
        run, id_ = self._at["run"], self._at["id"]
        return [row[id_] for row in rows if row[run] is None]


class Columns:
    """The ``ClaimColumns`` of ``claim``, learnt from its first result (as ``Rows`` does)."""

    __slots__ = ("_columns",)

    def __init__(self) -> None:
        self._columns: ClaimColumns | None = None

    def __call__(self, cursor: AsyncCursor[Any]) -> ClaimColumns:
        columns = self._columns
        if columns is None:
            columns = self._columns = ClaimColumns(_names(cursor))
        return columns


#: One per query (see the module docstring), named after it.
CLAIM: Final = Columns()
GET_JOB: Final = Rows(record(JobRecord))
LIST_JOBS: Final = Rows(record(JobRecord))
LIST_JOBS_BY_KEY: Final = Rows(record(JobRecord))
WORKERS: Final = Rows(record(WorkerRecord))
QUEUE_STATS: Final = Rows(record(QueueStats))
STATS: Final = Rows(record(StatRow))
