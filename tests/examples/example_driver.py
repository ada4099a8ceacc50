"""Runs an example's driver script in a subprocess against a fresh namespace of one backend."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import duly

ROOT = Path(__file__).resolve().parents[2]


def example_url(backend: str, tmp_path: Path) -> str:
    """A URL on a namespace of its own (SQLite: a file in ``tmp_path``)."""
    ns = f"t{uuid.uuid4().hex[:12]}"
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/jobs.db"
    if backend == "redis":
        return f"redis://127.0.0.1:6379/0?namespace={ns}"
    return f"postgresql://postgres@127.0.0.1:5432/test?namespace=t_{ns}"


async def _drop(url: str) -> None:
    app = duly.App(url)
    try:
        await (await app.backend()).drop()
    finally:
        await app.aclose()


def run_driver(
    driver: str,
    backend: str,
    tmp_path: Path,
    env: dict[str, str] | None = None,
    timeout: float = 80,
) -> Any:
    """Run ``driver`` (Python source) with ``DULY_URL`` set; the JSON of its last output line.
    The namespace is dropped afterwards."""
    url = example_url(backend, tmp_path)
    # This checkout's examples and duly (not whichever duly the interpreter has installed).
    path = os.pathsep.join([str(ROOT), str(ROOT / "src")])
    full_env = {**os.environ, "DULY_URL": url, "PYTHONPATH": path, **(env or {})}
    try:
        out = subprocess.run(
            [sys.executable, "-c", driver],
            cwd=tmp_path,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    finally:
        if backend != "sqlite":
            asyncio.run(_drop(url))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])
