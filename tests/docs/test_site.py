"""The documentation site builds with ``mkdocs build --strict`` (any warning fails: a broken
link, a page missing from the nav, a reference to a name the code no longer has), offline."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import duly
import duly.backends
import duly.observability
import duly.testing

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
        "howto/resume-long-jobs",
        "howto/pause-a-queue",
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
    _assert_the_reference_is_the_public_surface(api)
    integrations = (site / "reference" / "integrations" / "index.html").read_text()
    assert 'id="duly.contrib.starlette.lifespan"' in integrations


def _assert_the_reference_is_the_public_surface(api: str) -> None:
    """The reference documents every public class and function of ``duly``, ``duly.testing``,
    ``duly.observability`` and ``duly.backends`` (their ``__all__``), and nothing internal."""
    documented = set(re.findall(r'id="(duly\.[A-Za-z_.]+)"', api))
    internal = [
        name
        for name in documented
        if any(part.startswith("_") and not part.endswith("__") for part in name.split("."))
    ]
    assert not internal, f"internal names in the reference: {internal}"
    for module in (duly, duly.testing, duly.observability, duly.backends):
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                assert f"{module.__name__}.{name}" in documented, f"{module.__name__}.{name}"
