"""The HTTP API served by the real ``duly dashboard`` process (uvicorn), on every backend:
tokens from the environment, a job from enqueue to result over HTTP, a webhook, the event
stream, and no token in the server's output."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from e2e_harness import E2E, wait_until

pytestmark = pytest.mark.timeout(120)

READ, ADMIN = "r-e2e-" + "1" * 20, "a-e2e-" + "2" * 20


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _call(url: str, method: str = "GET", token: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")
    except OSError:
        return 0, None


def test_the_api_of_duly_dashboard(e2e: E2E) -> None:
    port = _free_port()
    e2e.env.update(DULY_READ_TOKENS=READ, DULY_ADMIN_TOKENS=f"{ADMIN},other-admin")
    server = e2e.start("dashboard", "--app", "e2e_tasks:app", "--port", str(port))
    base = f"http://127.0.0.1:{port}"
    wait_until(lambda: _call(base + "/healthz")[0] == 200, 30)

    events = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    events.request("GET", "/api/v1/events", headers={"Authorization": f"Bearer {READ}"})
    stream = events.getresponse()
    assert stream.status == 200 and stream.readline().startswith(b"retry:")

    job = e2e.tasks.mark.enqueue(7)
    doomed = e2e.tasks.mark.enqueue(8)
    assert _call(f"{base}/api/v1/jobs/{job.id}")[0] == 401
    status, shown = _call(f"{base}/api/v1/jobs/{job.id}", token=READ)
    assert status == 200 and shown["status"] == "queued" and shown["args"] == [7]
    assert _call(f"{base}/api/v1/jobs/{doomed.id}/cancel", "POST", READ)[0] == 403
    status, cancelled = _call(f"{base}/api/v1/jobs/{doomed.id}/cancel", "POST", ADMIN)
    assert status == 200 and cancelled["job"]["status"] == "cancelled"
    hook = e2e.app.create_webhook(e2e.tasks.mark.s(9))
    status, fired = _call(base + hook.path, "POST")
    assert status == 202
    assert _call(base + "/hooks/" + "x" * 43, "POST")[0] == 404

    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while len({e.get("job_id") for e in seen} - {None}) < 3:
        assert all("job_id" in e for e in seen), seen
        assert time.monotonic() < deadline, seen
        line = stream.readline().decode().strip()
        if line.startswith("data:"):
            seen.append(json.loads(line[5:]))
    assert {e["job_id"] for e in seen} == {job.id, doomed.id, fired["job_id"]}
    events.close()

    burst = e2e.cli("worker", "e2e_tasks:app", "--burst", "--lease", "2", timeout=60)
    assert burst.returncode == 0, burst.stderr
    listed = _call(f"{base}/api/v1/jobs?status=succeeded", token=READ)[1]["jobs"]
    assert {j["id"]: j["result"] for j in listed} == {job.id: 7, fired["job_id"]: 9}
    metrics = urllib.request.Request(base + "/metrics", headers={"Authorization": f"Bearer {READ}"})
    with urllib.request.urlopen(metrics, timeout=10) as response:
        assert b"duly_backend_up 1.0" in response.read()

    server.terminate()
    server.wait(20)
    log = e2e.log_of(server)
    assert "Uvicorn running" in log or "Application startup complete" in log, log
    assert READ not in log and ADMIN not in log and hook.secret not in log
