"""Secret arguments never leave the worker: the API, the event stream, the CLI and the worker's
log never show the value (grepped for), the stored payload holds it sealed (with a key), the
stored error has it scrubbed, and the worker still gets the real value. On every backend."""

from __future__ import annotations

import asyncio
import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from uuid import uuid4

import pytest
from http_harness import ADMIN, AS_ADMIN, READ, SECRET, Served, Stream
from services import BACKENDS, backend_url
from starlette.testclient import TestClient

import duly

pytestmark = pytest.mark.timeout(120)

KEY = "test-key-" + "k" * 30
MODULE = (
    '''
import duly

app = duly.App()


@app.task(name="sync_link", secret=("access_token",), retries=0)
def sync_link(link_id: int, access_token: str) -> bool:
    if link_id < 0:
        raise RuntimeError(f"upstream refused token {access_token} for link {link_id}")
    return access_token == "'''
    + SECRET
    + """"
"""
)


@pytest.fixture(params=BACKENDS)
def tasks(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ModuleType]:
    """The tasks module, imported with this test's backend and the secret key."""
    url, namespace = backend_url(request.param, tmp_path)
    sep = "&" if "?" in url else "?"
    monkeypatch.setenv("DULY_URL", f"{url}{sep}namespace={namespace}")
    monkeypatch.setenv("DULY_SECRET_KEY", KEY)
    name = f"secret_tasks_{uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    yield module
    app: duly.App = module.app

    async def drop() -> None:
        await (await app.backend()).drop()
        await app.aclose()

    app.close()
    asyncio.run(drop())
    app.close()
    sys.modules.pop(name, None)


def _duly(module: ModuleType, *args: str) -> str:
    """Run the real CLI with the module's app; its stdout and stderr together."""
    done = subprocess.run(
        [sys.executable, "-m", "duly", *args],
        cwd=Path(module.__file__ or ".").parent,
        env={**os.environ, "DULY_APP": f"{module.__name__}:app"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout + done.stderr


def test_a_secret_argument_is_never_shown(tasks: ModuleType) -> None:
    app: duly.App = tasks.app
    asgi = app.asgi(read_tokens=[READ], admin_tokens=[ADMIN], keepalive=0.5)
    served = Served(asgi)
    stream = Stream(served.port, "/api/v1/events", AS_ADMIN)
    try:
        ok = tasks.sync_link.enqueue(1, access_token=SECRET)
        bad = tasks.sync_link.enqueue(-1, SECRET)  # positional too

        async def raw() -> list[bytes]:
            backend = await app.backend()
            records = [await backend.get_job(i) for i in (ok.id, bad.id)]
            await app.aclose()
            return [r.payload + (r.errors or b"") for r in records if r is not None]

        at_rest = asyncio.run(raw())
        assert len(at_rest) == 2 and all(b"$sealed" in p for p in at_rest)
        assert not any(SECRET.encode() in p for p in at_rest)

        log = _duly(tasks, "worker", "--burst", "--log-format", "json", "--log-level", "debug")
        assert SECRET not in log and "upstream refused token ***" in log, log
        done, failed = app.get_job(ok.id), app.get_job(bad.id)
        assert done is not None and done.status == "succeeded" and done.result is True
        assert failed is not None and failed.status == "failed"

        stored = asyncio.run(raw())
        assert not any(SECRET.encode() in p for p in stored)  # the error was scrubbed
        outputs = {
            "status --json": _duly(tasks, "status", bad.id, "--json"),
            "status": _duly(tasks, "status", bad.id),
            "jobs --json": _duly(tasks, "jobs", "--json"),
            "jobs": _duly(tasks, "jobs"),
        }
        with TestClient(asgi) as client:
            for path in (f"/api/v1/jobs/{bad.id}", f"/api/v1/jobs/{ok.id}", "/api/v1/jobs"):
                outputs[path] = client.get(path, headers=AS_ADMIN).text
        events = [stream.job_event() for _ in range(6)]  # 2 jobs x queued, running, outcome
        outputs["events"] = repr(events)
        for where, text in outputs.items():
            assert SECRET not in text, where
        assert '"***"' in outputs[f"/api/v1/jobs/{bad.id}"]
        assert "upstream refused token ***" in outputs[f"/api/v1/jobs/{bad.id}"]
        assert '"***"' in outputs["status --json"]
    finally:
        stream.close()
        served.stop()
