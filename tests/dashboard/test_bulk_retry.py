"""``POST /api/v1/jobs/retry`` (duly.http.bulk) on every backend, through the ASGI app."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from served import ADMIN, READ, backend_url, in_thread, register_tasks
from services import BACKENDS
from starlette.testclient import TestClient

import duly
from duly._http import bulk
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


def test_bulk_retry_stops_at_its_cap_and_says_more(
    app: duly.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "MAX_RETRIED", 2)
    boom = app.tasks["t.boom"]
    jobs = [boom.enqueue(str(i)) for i in range(3)]
    run_all(app)
    admin = {"Authorization": f"Bearer {ADMIN}"}
    with TestClient(app.asgi(admin_tokens=[ADMIN])) as client:
        first = client.post("/api/v1/jobs/retry?status=failed", headers=admin).json()
        second = client.post("/api/v1/jobs/retry?status=failed", headers=admin).json()
    assert (first, second) == ({"retried": 2, "more": True}, {"retried": 1, "more": False})
    assert {app.get_job(j.id).status for j in jobs} == {"queued"}


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
    operation = schema.json()["paths"]["/api/v1/jobs/retry"]["post"]
    assert {p["name"] for p in operation["parameters"]} >= {"status", "task", "queue", "key"}
