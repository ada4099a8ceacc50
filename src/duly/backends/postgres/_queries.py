"""The named queries of ``queries.sql``, bound to one schema."""

from __future__ import annotations

import dataclasses
import functools
from typing import Final

from psycopg import sql

from duly._records import JobRecord
from duly.backends._sql import load_queries

__all__ = ["PACKAGE", "Queries", "bind"]

#: The package that holds ``queries.sql`` and ``migrations/``.
PACKAGE: Final = __name__.rpartition(".")[0]
#: The ``jobs`` columns in ``JobRecord`` field order, read through the alias ``j``.
_COLUMNS: Final = ", ".join(f"j.{field.name}" for field in dataclasses.fields(JobRecord))


@functools.cache
def _raw_queries() -> dict[str, str]:
    """The query file, comment lines removed (so ``%(x)s`` in a comment is not a parameter)."""
    return {
        name: "\n".join(
            line for line in body.splitlines() if not line.lstrip().startswith("--")
        ).strip()
        for name, body in {
            **load_queries(PACKAGE),
            **load_queries(PACKAGE, "freshness.sql"),  # PRODUCT §7
        }.items()
    }


def bind(text: str, schema: sql.Identifier) -> bytes:
    """Substitute ``{schema}`` and ``{columns}`` in one query; bytes are a psycopg query."""
    quoted = schema.as_string()
    return text.replace("{schema}", quoted).replace("{columns}", _COLUMNS).encode()


class Queries:
    """Every named query of ``queries.sql``, bound to one schema."""

    def __init__(self, schema: str) -> None:
        identifier = sql.Identifier(schema)
        self._bound = {name: bind(text, identifier) for name, text in _raw_queries().items()}

    def __getitem__(self, name: str) -> bytes:
        return self._bound[name]
