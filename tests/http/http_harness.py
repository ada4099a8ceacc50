"""Helpers of the HTTP tests (imported by conftest.py and the tests): an App with a few tasks
on every backend, served through Starlette's TestClient with a read and an admin token.

Each test gets its own data (a SQLite file, a Redis prefix, a PostgreSQL schema) and teardown
drops it. ``Hub`` bundles the App, its tasks, the client and the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

from services import POSTGRES_URL, REDIS_URL, require_service
from starlette.testclient import TestClient

import duly
import duly.testing

READ = "r-" + "1" * 30
ADMIN = "a-" + "2" * 30
AS_READ = {"Authorization": f"Bearer {READ}"}
AS_ADMIN = {"Authorization": f"Bearer {ADMIN}"}
SECRET = "gho_Sup3rS3cretT0ken"


def backend_url(kind: str, tmp_path: Path) -> tuple[str, str]:
    """A URL and a namespace of this test's own on ``kind``."""
    require_service(kind)
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'duly.db'}", "duly"
    if kind == "redis":
        return REDIS_URL, f"t{uuid4().hex[:12]}"
    return POSTGRES_URL, f"t_{uuid4().hex[:12]}"


@dataclass
class Hub:
    """One test's App, tasks and client."""

    app: duly.App
    client: TestClient
    add: duly.Task[..., Any]
    boom: duly.Task[..., Any]
    sync_link: duly.Task[..., Any]
    kind: str

    def run(self, *job_ids: str) -> None:
        """Run these jobs to an outcome with an in-process worker."""
        duly.testing.run_jobs(self.app, list(job_ids), queues=["default", "sync"])

    def get(self, path: str, **kwargs: Any) -> Any:
        """GET as the admin, expecting 200; the JSON."""
        response = self.client.get(path, headers=AS_ADMIN, **kwargs)
        assert response.status_code == 200, response.text
        return response.json()


def build_app(url: str, namespace: str, **options: Any) -> tuple[duly.App, dict[str, Any]]:
    """The App every HTTP test serves, and its tasks by name."""
    app = duly.App(url, namespace=namespace, **options)

    @app.task(name="add", retries=0)
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(name="boom", retries=0)
    def boom(token: str) -> None:
        raise RuntimeError(f"upstream refused {token}")

    @app.task(name="sync_link", secret=("access_token",), retries=0, queue="sync")
    def sync_link(link_id: int, access_token: str = "") -> str:
        if access_token == "fail":
            raise RuntimeError("token fail rejected")
        return f"synced {link_id}"

    @app.periodic(every=timedelta(hours=1), name="hourly")
    def hourly() -> None:
        return None

    @app.watch(max_checks=3, name="watch_link")
    def watch_link(link_id: int) -> timedelta | None:
        return None

    def pull(scope: str, full: bool) -> None:
        return None

    app.freshness("links", sync=pull, max_staleness=timedelta(minutes=5))
    return app, {"add": add, "boom": boom, "sync_link": sync_link}
