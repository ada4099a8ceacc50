"""``POST /api/v1/jobs/retry`` and ``/api/v1/jobs/cancel`` (duly.http.bulk) on every backend,
through the ASGI app."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from served import ADMIN, READ, backend_url, in_thread, register_tasks
from services import BACKENDS
from starlette.testclient import TestClient

import duly
import duly._bulk
from duly._http.auth import csrf_value


@pytest.fixture(params=BACKENDS)
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[duly.App]:
    url, namespace = backend_url(request.param, tmp_path)
    app = duly.App(url, namespace=namespace)
    register_tasks(app)
    yield app
    app.close()

    async def drop() -> None:
        await (await app.backend()).drop()

    in_thread(drop, app)
    app.close()


def run_all(app: duly.App) -> None:
    in_thread(app.worker(burst=True, install_signal_handlers=False, poll=0.02).run, app)


def test_bulk_retry_retries_the_matching_failed_jobs(app: duly.App) -> None:
    once, boom = app.tasks["t.once"], app.tasks["t.boom"]
    mine = [once.options(key="k").enqueue(f"bulk-api-{app.namespace}-{i}") for i in range(3)]
    other_key = once.options(key="other").enqueue(f"bulk-api-{app.namespace}-x")
    other_task = boom.options(key="k").enqueue("no")
    run_all(app)
    admin = {"Authorization": f"Bearer {ADMIN}"}
    with TestClient(app.asgi(read_tokens=[READ], admin_tokens=[ADMIN])) as client:
        answer = client.post("/api/v1/jobs/retry?task=t.once&key=k", headers=admin)
        assert answer.status_code == 200
        assert answer.json() == {"retried": 3, "more": False}
        again = client.post("/api/v1/jobs/retry?task=t.once&key=k", headers=admin)
        assert again.json() == {"retried": 0, "more": False}
    assert {app.get_job(j.id).status for j in mine} == {"queued"}
    assert app.get_job(other_key.id).status == "failed"
    assert app.get_job(other_task.id).status == "failed"


def test_bulk_retry_takes_every_matching_job_a_batch_at_a_time(
    app: duly.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(duly._bulk, "MAX_BATCH", 2)  # batches of 2: three jobs take two
    boom = app.tasks["t.boom"]
    jobs = [boom.enqueue(str(i)) for i in range(3)]
    run_all(app)
    admin = {"Authorization": f"Bearer {ADMIN}"}
    with TestClient(app.asgi(admin_tokens=[ADMIN])) as client:
        first = client.post("/api/v1/jobs/retry?status=failed", headers=admin).json()
        second = client.post("/api/v1/jobs/retry?status=failed", headers=admin).json()
    assert (first, second) == ({"retried": 3, "more": False}, {"retried": 0, "more": False})
    assert {app.get_job(j.id).status for j in jobs} == {"queued"}


def test_bulk_cancel_cancels_the_matching_jobs(app: duly.App) -> None:
    add = app.tasks["t.add"]
    mine = [add.options(key="k").enqueue(i, i) for i in range(3)]
    other = add.options(key="other").enqueue(9, 9)
    later = add.options(key="k", delay=3600).enqueue(1, 1)
    admin = {"Authorization": f"Bearer {ADMIN}"}
    with TestClient(app.asgi(read_tokens=[READ], admin_tokens=[ADMIN])) as client:
        answer = client.post("/api/v1/jobs/cancel?key=k", headers=admin)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"cancelled": 3}  # queued by default
        assert client.post("/api/v1/jobs/cancel?key=k", headers=admin).json() == {"cancelled": 0}
        scheduled = client.post("/api/v1/jobs/cancel?status=scheduled&key=k", headers=admin)
        assert scheduled.json() == {"cancelled": 1}
        bad = client.post("/api/v1/jobs/cancel?status=failed", headers=admin)
        assert bad.status_code == 400
        read = client.post("/api/v1/jobs/cancel", headers={"Authorization": f"Bearer {READ}"})
        assert read.status_code == 403
    assert {app.get_job(j.id).status for j in [*mine, later]} == {"cancelled"}
    assert app.get_job(other.id).status == "queued"


def test_bulk_retry_is_an_admin_action_with_csrf(app: duly.App) -> None:
    job = app.tasks["t.boom"].enqueue("x")
    run_all(app)
    with TestClient(app.asgi(read_tokens=[READ], admin_tokens=[ADMIN])) as client:
        assert client.post("/api/v1/jobs/retry").status_code == 401
        read = client.post("/api/v1/jobs/retry", headers={"Authorization": f"Bearer {READ}"})
        assert read.status_code == 403
        client.cookies.set("duly_session", ADMIN)
        assert client.post("/api/v1/jobs/retry").status_code == 403  # no CSRF header
        bad = client.post("/api/v1/jobs/retry?status=running", headers={"X-Duly-CSRF": "x"})
        assert bad.status_code == 403
        headers = {"X-Duly-CSRF": csrf_value(ADMIN)}
        assert client.post("/api/v1/jobs/retry?status=queued", headers=headers).status_code == 400
        ok = client.post("/api/v1/jobs/retry", headers=headers)
        assert ok.json() == {"retried": 1, "more": False}
    assert app.get_job(job.id).status == "queued"


def test_bulk_retry_is_in_the_schema(app: duly.App) -> None:
    with TestClient(app.asgi(read_tokens=[READ])) as client:
        schema = client.get("/api/v1/openapi.json", headers={"Authorization": f"Bearer {READ}"})
    for path in ("/api/v1/jobs/retry", "/api/v1/jobs/cancel"):
        operation = schema.json()["paths"][path]["post"]
        assert {p["name"] for p in operation["parameters"]} >= {"status", "task", "queue", "key"}
