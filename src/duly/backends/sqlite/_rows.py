"""The row codec of SqliteBackend: result rows are read by column name, never by position.

A named query's column names (its SELECT or RETURNING list, with an alias for each computed
column) are read from ``cursor.description`` on its first execution, and its ``Codec`` kept: it
knows where each field of the record sits in the row (``at`` gives any other column's position,
looked up once per execution, not per row). So a query may list its columns in any order, and
a column added to a query or to a record cannot shift another one.
"""

from __future__ import annotations

import dataclasses
import operator
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Final, Generic, TypeVar

from duly._records import JobRecord, StatRow

__all__ = ["JOB_FIELDS", "Codec", "columns", "job_codec", "positions", "stat_codec"]

R = TypeVar("R")
Row = tuple[Any, ...]

#: JobRecord's fields, in the order of its constructor.
JOB_FIELDS: Final = tuple(field.name for field in dataclasses.fields(JobRecord))
_STAT_FIELDS: Final = tuple(field.name for field in dataclasses.fields(StatRow))


class Codec(Generic[R]):
    """Builds records with ``make`` from the rows of one column list, each field from the
    column of its name."""

    __slots__ = ("_make", "at", "values")

    def __init__(self, make: Callable[..., R], fields: Sequence[str], names: Sequence[str]) -> None:
        #: Column name -> position in the row.
        self.at: dict[str, int] = {name: i for i, name in enumerate(names)}
        missing = [field for field in fields if field not in self.at]
        if missing:
            raise LookupError(f"the query returns no column {', '.join(missing)}: {names}")
        positions = [self.at[field] for field in fields]
        start = positions[0]
        #: A row's values in ``fields`` order. Columns selected in that order (as the queries
        #: do) are one slice, the cost of the positional ``row[:n]`` it replaces.
        self.values: Callable[[Row], Row] = (
            operator.itemgetter(slice(start, start + len(positions)))
            if positions == list(range(start, start + len(positions)))
            else operator.itemgetter(*positions)
        )
        self._make = make

    def __call__(self, row: Row) -> R:
        """The record of ``row``."""
        return self._make(*self.values(row))


def columns(cursor: sqlite3.Cursor) -> tuple[str, ...]:
    """The names of the columns ``cursor``'s statement returns."""
    return tuple(column[0] for column in cursor.description)


def positions(cursor: sqlite3.Cursor) -> dict[str, int]:
    """Column name -> position in the rows of ``cursor``."""
    return {name: i for i, name in enumerate(columns(cursor))}


def job_codec(query: str, cursor: sqlite3.Cursor) -> Codec[JobRecord]:
    """The JobRecord codec of named query ``query``, whose cursor is ``cursor`` (its columns
    are read on the query's first execution: a name always has the same text)."""
    codec = _JOB_CODECS.get(query)
    if codec is None:
        codec = _JOB_CODECS[query] = Codec(JobRecord, JOB_FIELDS, columns(cursor))
    return codec


def stat_codec(query: str, cursor: sqlite3.Cursor) -> Codec[StatRow]:
    """The StatRow codec of named query ``query`` (see ``job_codec``)."""
    codec = _STAT_CODECS.get(query)
    if codec is None:
        codec = _STAT_CODECS[query] = Codec(StatRow, _STAT_FIELDS, columns(cursor))
    return codec


_JOB_CODECS: dict[str, Codec[JobRecord]] = {}
_STAT_CODECS: dict[str, Codec[StatRow]] = {}
