"""The mirror: our copy of the upstream's environments, in SQLite or PostgreSQL through
SQLAlchemy Core (``MIRROR_URL``, default ``sqlite:///mirror.db``; ``MIRROR_SCHEMA`` for a
PostgreSQL schema of its own).

Each row keeps the ``duly.fingerprint`` of the upstream payload it came from, so a sync writes
only the rows whose payload changed (an upsert), and marks the rows that vanished upstream as
deleted (``deleted_at``) instead of dropping them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

from sqlalchemy import (
    Column,
    Float,
    MetaData,
    String,
    Table,
    create_engine,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine

import duly

__all__ = ["Mirror", "environments"]

metadata = MetaData(schema=os.environ.get("MIRROR_SCHEMA") or None)
environments = Table(
    "environments",
    metadata,
    Column("team", String, primary_key=True),
    Column("env_id", String, primary_key=True),
    Column("name", String),
    Column("status", String),
    Column("modified_at", Float, nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("deleted_at", Float),
)


class Mirror:
    """Reads and writes of the mirror table."""

    def __init__(self, url: str | None = None) -> None:
        url = url or os.environ.get("MIRROR_URL", "sqlite:///mirror.db")
        if url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
        self.engine: Engine = create_engine(url)
        if metadata.schema is not None:
            with self.engine.begin() as conn:
                conn.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{metadata.schema}"')
        metadata.create_all(self.engine)

    def _insert(self) -> Any:
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        return dialect.insert(environments)

    def fingerprints(self, team: str) -> dict[str, str]:
        """env_id -> fingerprint of the team's live rows."""
        query = select(environments.c.env_id, environments.c.fingerprint).where(
            environments.c.team == team, environments.c.deleted_at.is_(None)
        )
        with self.engine.connect() as conn:
            return {row.env_id: row.fingerprint for row in conn.execute(query)}

    def upsert_changed(self, team: str, items: Iterable[dict[str, Any]]) -> int:
        """Write the items whose fingerprint changed (or that are new); how many were written."""
        known = self.fingerprints(team)
        rows = []
        for item in items:
            fp = duly.fingerprint(item)
            if known.get(item["id"]) != fp:
                rows.append(
                    {
                        "team": team,
                        "env_id": item["id"],
                        "name": item.get("name"),
                        "status": item.get("status"),
                        "modified_at": item["modified_at"],
                        "fingerprint": fp,
                        "deleted_at": None,
                    }
                )
        if rows:
            insert = self._insert()
            upsert = insert.on_conflict_do_update(
                index_elements=["team", "env_id"],
                set_={
                    name: insert.excluded[name]
                    for name in ("name", "status", "modified_at", "fingerprint", "deleted_at")
                },
            )
            with self.engine.begin() as conn:
                conn.execute(upsert, rows)
        return len(rows)

    def soft_delete_missing(self, team: str, seen: set[str]) -> int:
        """Mark the team's live rows not in ``seen`` as deleted; how many."""
        gone = set(self.fingerprints(team)) - seen
        if not gone:
            return 0
        with self.engine.begin() as conn:
            conn.execute(
                update(environments)
                .where(environments.c.team == team, environments.c.env_id.in_(gone))
                .values(deleted_at=time.time())
            )
        return len(gone)

    def watermark(self, team: str) -> float | None:
        """The latest upstream modification mirrored for the team (a delta sync's start)."""
        query = select(environments.c.modified_at).where(environments.c.team == team)
        with self.engine.connect() as conn:
            times = [row.modified_at for row in conn.execute(query)]
        return max(times, default=None)

    def rows(self, team: str) -> list[dict[str, Any]]:
        """The team's live environments, as the app serves them."""
        query = (
            select(environments.c.env_id, environments.c.name, environments.c.status)
            .where(environments.c.team == team, environments.c.deleted_at.is_(None))
            .order_by(environments.c.env_id)
        )
        with self.engine.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def deleted(self, team: str) -> list[str]:
        """The team's soft-deleted env ids."""
        query = select(environments.c.env_id).where(
            environments.c.team == team, environments.c.deleted_at.is_not(None)
        )
        with self.engine.connect() as conn:
            return sorted(row.env_id for row in conn.execute(query))
