"""``App(transactions=...)``: ``options(on_commit=True)`` enqueues once the caller's
transaction commits, and a framework's ``connection=`` is unwrapped, on every backend.

``Transactions`` below is a small framework of its own (callbacks kept until ``commit``,
dropped by ``rollback``), as Django's ``transaction.on_commit`` keeps them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from services import POSTGRES_URL

import duly


class Transactions:
    """One open transaction whose on-commit callbacks run at ``commit``."""

    def __init__(self) -> None:
        self.pending: list[Callable[[], object]] = []
        self.unwrapped: list[Any] = []

    def driver_connection(self, connection: Any) -> Any:
        self.unwrapped.append(connection)
        return connection.raw

    def on_commit(self, callback: Callable[[], object]) -> None:
        self.pending.append(callback)

    def commit(self) -> None:
        pending, self.pending = self.pending, []
        for callback in pending:
            callback()

    def rollback(self) -> None:
        self.pending.clear()


def test_on_commit_enqueues_at_commit_and_never_on_rollback(
    make_app: Callable[..., duly.App],
) -> None:
    tx = Transactions()
    app = make_app(transactions=tx)
    seen: list[str] = []

    class Enqueued(duly.Hook):
        def enqueued(self, jobs: Any, results: Any) -> None:
            seen.extend(r.id for r in results)

    app.add_hook(Enqueued())

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    job = add.options(on_commit=True, key="k").enqueue(1, 2)
    assert app.get_job(job.id) is None and seen == []  # not before the commit
    tx.commit()
    info = app.get_job(job.id)
    assert info is not None and (info.status, info.args, info.key) == ("queued", [1, 2], "k")
    assert seen == [job.id]

    dropped = add.options(on_commit=True).enqueue(3, 4)
    tx.rollback()
    tx.commit()
    assert app.get_job(dropped.id) is None
    assert [j.id for j in app.jobs()] == [job.id]


def test_on_commit_in_bulk_and_async(make_app: Callable[..., duly.App]) -> None:
    tx = Transactions()
    app = make_app(transactions=tx)

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    later = add.options(on_commit=True)
    jobs = app.enqueue_many([later.s(1, 1), later.s(2, 2)])

    async def enqueue_async() -> duly.Job:
        try:
            return await later.enqueue_async(3, 3)
        finally:
            await app.aclose()

    jobs.append(asyncio.run(enqueue_async()))
    assert len(tx.pending) == 2 and app.jobs() == []  # one callback per call
    tx.commit()
    assert sorted(j.id for j in app.jobs()) == sorted(j.id for j in jobs)


def test_on_commit_bad_input(make_app: Callable[..., duly.App]) -> None:
    tx = Transactions()
    plain = make_app()
    app = make_app(transactions=tx)

    @plain.task
    def add(a: int, b: int) -> int:
        return a + b

    @app.task
    def mul(a: int, b: int) -> int:
        return a * b

    with pytest.raises(duly.ConfigurationError, match="on_commit=True needs an App"):
        add.options(on_commit=True).enqueue(1, 2)
    with pytest.raises(TypeError, match="missing a required argument"):
        mul.options(on_commit=True).enqueue(1)  # arguments checked at once, nothing pending
    with pytest.raises(TypeError, match="on_commit must be True or False"):
        mul.options(on_commit="yes").enqueue(1, 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not both"):
        mul.options(on_commit=True, connection=object()).enqueue(1, 2)
    with pytest.raises(ValueError, match="share on_commit"):
        app.enqueue_many([mul.options(on_commit=True).s(1, 2), mul.s(3, 4)])
    with pytest.raises(ValueError, match="on_commit=True is not supported"):
        app.group([mul.options(on_commit=True).s(1, 2)])  # stored at once: refused, not ignored
    with pytest.raises(TypeError, match=r"duly\.transactions\.Transactions"):
        make_app(transactions=object())
    assert tx.pending == [] and app.jobs() == [] and plain.jobs() == []


def test_a_frameworks_connection_is_unwrapped(
    make_app: Callable[..., duly.App], backend_kind: str
) -> None:
    """``connection=`` reaches the backend as the framework's driver connection: on
    PostgreSQL the job is stored by that connection's transaction."""
    tx = Transactions()
    app = make_app(transactions=tx)

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    class Wrapper:  # what a framework hands out (Django: django.db.connection)
        raw: Any = None

    wrapper = Wrapper()
    if backend_kind != "postgres":
        with pytest.raises(duly.ConfigurationError, match="needs the PostgreSQL backend"):
            add.options(connection=wrapper).enqueue(1, 2)
        assert tx.unwrapped == [wrapper]
        return
    import psycopg

    with psycopg.connect(POSTGRES_URL) as conn:
        wrapper.raw = conn
        job = add.options(connection=wrapper).enqueue(1, 2)
        assert app.get_job(job.id) is None  # not committed yet
    assert tx.unwrapped == [wrapper]
    info = app.get_job(job.id)
    assert info is not None and info.status == "queued"
