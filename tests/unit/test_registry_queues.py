"""The queues an App's declarations name (PRODUCT §15, issue 29.11): what a worker serves by
default."""

from __future__ import annotations

import duly


def test_default_first_then_every_declared_queue_once_in_declaration_order() -> None:
    app = duly.App("sqlite:///unused.db")

    @app.task(name="t.mail", queue="mail")
    def mail() -> None: ...

    @app.periodic(every=60, name="t.report", queue="reports")
    def report() -> None: ...

    @app.task(name="t.plain")
    def plain() -> None: ...

    @app.task(name="t.more_mail", queue="mail")
    def more_mail() -> None: ...

    app.freshness("nodes", sync=lambda scope, since: None, max_staleness=60, queue="sync")

    assert app.registry.queues() == ["default", "mail", "reports", "sync"]
    assert app.worker().queues == ["default", "mail", "reports", "sync"]
    assert app.worker(queues=["mail"]).queues == ["mail"]


def test_an_app_without_tasks_serves_default() -> None:
    assert duly.App("sqlite:///unused.db").worker().queues == ["default"]
