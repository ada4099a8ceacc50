"""The documentation site builds with ``mkdocs build --strict`` (any warning fails: a broken
link, a page missing from the nav, a reference to a name the code no longer has), offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    # the sections of the nav, and the reference generated from the docstrings
    for page in [
        "tutorial",
        "howto/never-lose-a-job",
        "howto/track-operations",
        "howto/fan-out-an-event",
        "howto/check-later",
        "howto/keep-a-mirror-fresh",
        "django",
        "fastapi",
        "coming-from/celery",
        "coming-from/rq",
        "coming-from/dramatiq",
        "reliability",
        "benchmarks",
    ]:
        assert (site / page / "index.html").is_file(), page
    api = (site / "reference" / "api" / "index.html").read_text()
    assert 'id="duly.App"' in api and "Register a function" in api  # App.task's docstring
    integrations = (site / "reference" / "integrations" / "index.html").read_text()
    assert 'id="duly.contrib.starlette.lifespan"' in integrations
