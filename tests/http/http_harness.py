"""Helpers of the HTTP tests (imported by conftest.py and the tests): an App with a few tasks
on every backend, served through Starlette's TestClient with a read and an admin token.

Each test gets its own data (a SQLite file, a Redis prefix, a PostgreSQL schema) and teardown
drops it. ``Hub`` bundles the App, its tasks, the client and the tokens.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from starlette.testclient import TestClient

import duly
import duly.testing

READ = "r-" + "1" * 30
ADMIN = "a-" + "2" * 30
AS_READ = {"Authorization": f"Bearer {READ}"}
AS_ADMIN = {"Authorization": f"Bearer {ADMIN}"}
SECRET = "gho_Sup3rS3cretT0ken"


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
        """Run these jobs to an outcome with an in-process worker. No scheduler: a run that
        spans the top of an hour would also tick ``hourly`` (one more job, and its events)."""
        duly.testing.run_jobs(self.app, list(job_ids), queues=["default", "sync"], scheduler=False)

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


class Served:
    """An ASGI app served by a real uvicorn on a free loopback port, in a thread."""

    def __init__(self, asgi: Any) -> None:
        import threading

        import uvicorn

        config = uvicorn.Config(
            asgi, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=2
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert self.thread.is_alive(), "uvicorn did not start"
            assert time.monotonic() < deadline, "uvicorn did not start within 20s"
            time.sleep(0.01)
        self.port: int = self.server.servers[0].sockets[0].getsockname()[1]

    def stop(self) -> None:
        """Ask the server to stop and wait for its thread (bounded)."""
        self.server.should_exit = True
        self.thread.join(20)
        assert not self.thread.is_alive(), "uvicorn did not stop within 20s"


class Stream:
    """A Server-Sent Events connection read line by line, every read bounded by ``timeout``."""

    def __init__(
        self, port: int, path: str, headers: dict[str, str], timeout: float = 15.0
    ) -> None:
        import http.client

        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.conn.request("GET", path, headers=headers)
        self.response = self.conn.getresponse()
        self.status = self.response.status

    def message(self) -> dict[str, str]:
        """The next message or comment: its fields (a comment as ``{"comment": text}``)."""
        fields: dict[str, str] = {}
        while True:
            line = self.response.readline().decode()
            assert line, "the stream ended"
            line = line.rstrip("\n")
            if not line:
                if fields:
                    return fields
                continue
            name, _, value = line.partition(":")
            fields[name or "comment"] = value.strip()
            if not name:  # a comment is a message of its own here
                return fields

    def job_event(self, within: float = 20.0) -> dict[str, Any]:
        """The next ``job`` event's data, with its ``id:`` as ``_id`` (skips comments: fails
        after ``within`` seconds of keep-alives only)."""
        deadline = time.monotonic() + within
        while True:
            assert time.monotonic() < deadline, f"no job event within {within}s"
            fields = self.message()
            assert fields.get("event") != "reset", f"the server ended the stream: {fields}"
            if fields.get("event") == "job":
                data: dict[str, Any] = json.loads(fields["data"])
                data["_id"] = fields["id"]
                return data

    def close(self) -> None:
        """Leave (the server sees the client go)."""
        self.conn.close()
