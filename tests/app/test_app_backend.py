"""``App(backend=...)``: an App built on a backend the caller constructed, on every backend."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

import duly
from duly.backends import backend_from_url
from duly.backends.transactional import TRANSACTIONAL
from duly.testing import run_jobs


def test_an_app_runs_on_a_backend_it_was_given(url_and_namespace: tuple[str, str]) -> None:
    url, namespace = url_and_namespace
    given = backend_from_url(url, namespace)
    app = duly.App(backend=given)
    try:
        assert (app.url, app.namespace) == (given.url, given.namespace)

        @app.task(name="t.add")
        def add(a: int, b: int) -> int:
            return a + b

        job = add.enqueue(2, 3)
        run_jobs(app, [job])
        info = app.get_job(job.id)
        assert info is not None and (info.status, info.result) == ("succeeded", 5)
        # A second App on the same data, built from the URL, sees the same job.
        with duly.App(url, namespace=namespace) as twin:
            same = twin.get_job(job.id)
            assert same is not None and same.status == "succeeded"
        assert app.migrate() == []  # opened once already: nothing left to apply
    finally:
        asyncio.run(_drop(app))
        app.close()


async def _drop(app: duly.App) -> None:
    try:
        await (await app.backend()).drop()
    finally:
        await app.aclose()


def test_backend_and_url_together_are_refused(tmp_path) -> None:
    given = backend_from_url(f"sqlite:///{tmp_path}/a.db")
    with pytest.raises(duly.ConfigurationError, match="a url or a backend, not both"):
        duly.App(f"sqlite:///{tmp_path}/b.db", backend=given)
    with pytest.raises(TypeError, match="takes a duly backend"):
        duly.App(backend="sqlite:///x.db")  # type: ignore[arg-type]


def test_only_postgresql_offers_transactional_enqueue(
    app: duly.App, backend_kind: str, tmp_path
) -> None:
    @app.task(name="t.noop")
    def noop() -> None: ...

    transactional = TRANSACTIONAL.offered_by(app._template)
    assert transactional == (backend_kind == "postgres")
    if not transactional:
        with pytest.raises(duly.ConfigurationError, match="needs the PostgreSQL backend"):
            noop.options(connection=object()).enqueue()
        assert app.jobs() == []


def test_stats_retention_bounds_what_stats_may_ask(make_app) -> None:
    app = make_app(stats_retention=timedelta(hours=1))
    assert app.stats(minutes=60) == []
    with pytest.raises(ValueError, match="from 1 to 60"):
        app.stats(minutes=61)
    with pytest.raises(ValueError, match="at least a minute"):
        make_app(stats_retention=30)
