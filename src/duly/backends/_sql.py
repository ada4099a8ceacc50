"""Shared by the SQL backends: named queries and versioned migrations kept in ``.sql`` files.

A query file holds blocks that each start with a line ``-- name: <query_name>``; everything up to
the next such line is that query. A backend keeps its query files in one folder, one file per
capability (``load_query_folder``). Migrations are files ``migrations/NNNN_<title>.sql`` applied in
order of NNNN, each recorded in a version table by the backend's own runner. The highest
version applied is the storage format of the data (``Backend.storage_format``): a duly that
lacks it refuses the data (``StorageTooNew``) instead of running on a schema it does not know.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import resources

from duly._errors import StorageTooNew
from duly._records import StorageFormat

__all__ = [
    "Migration",
    "check_format",
    "format_of",
    "load_migrations",
    "load_query_folder",
    "parse_queries",
]

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_MIGRATION = re.compile(r"^(\d{4})_(\w+)\.sql$")


def parse_queries(text: str, where: str) -> dict[str, str]:
    """The ``{name: sql}`` of one query file's ``text`` (``where`` names it in errors)."""
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"{where}: query {name!r} defined twice")
        queries[name] = body.strip()
    return queries


def load_query_folder(package: str, folder: str = "queries") -> dict[str, str]:
    """Every ``*.sql`` file of ``folder`` in ``package`` as one ``{name: sql}``; a name that two
    files define is a ``ValueError`` (naming both)."""
    queries: dict[str, str] = {}
    where: dict[str, str] = {}
    entries = resources.files(package).joinpath(folder).iterdir()
    for entry in sorted(entries, key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        text = entry.read_text(encoding="utf-8")
        for name, body in parse_queries(text, f"{package}/{folder}/{entry.name}").items():
            if name in queries:
                raise ValueError(
                    f"{package}/{folder}: query {name!r} defined in {where[name]} and {entry.name}"
                )
            queries[name], where[name] = body, entry.name
    return queries


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema migration file."""

    version: int
    title: str
    sql: str


def load_migrations(package: str) -> list[Migration]:
    """All migrations under ``package``/migrations, in version order. A version may be
    missing (parallel branches reserve numbers; each runner applies every version it has not
    applied yet, whatever its place); a repeated version is an error."""
    folder = resources.files(package).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    for before, migration in itertools.pairwise(found):
        if migration.version == before.version:
            raise ValueError(f"{package}: two migrations {migration.version:04d}")
    return found


def format_of(migrations: Sequence[Migration], applied: Iterable[int]) -> StorageFormat:
    """The storage format of a schema with the ``applied`` versions, for a duly that has
    ``migrations``."""
    return StorageFormat(max(applied, default=0), migrations[-1].version if migrations else 0)


def check_format(
    migrations: Sequence[Migration], applied: Iterable[int], where: str | Callable[[], str]
) -> StorageFormat:
    """``format_of``, or ``StorageTooNew`` (saying ``where``) when a newer duly applied a
    migration past the last of ``migrations``."""
    found = format_of(migrations, applied)
    if found.stored > found.readable:
        place = where if isinstance(where, str) else where()
        raise StorageTooNew(place, found.stored, found.readable)
    return found
