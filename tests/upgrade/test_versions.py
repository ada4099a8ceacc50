"""duly's version: one number (pyproject, ``duly.__version__``, ``duly --version``), newer
than every release in RELEASES, and a CHANGELOG section per release under ``Unreleased``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

import pytest
from packaging.version import Version
from releases import ROOT, git, in_history, releases

import duly


def test_one_version_everywhere() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert duly.__version__ == declared
    done = subprocess.run(
        [sys.executable, "-m", "duly", "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == f"duly, version {declared}"


def test_the_version_is_past_every_release() -> None:
    recorded = [Version(r.version) for r in releases()]
    assert recorded == sorted(recorded), "RELEASES is oldest first"
    assert Version(duly.__version__) > recorded[-1]


def test_the_changelog_has_a_section_per_release() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d\d-\d\d))?$", text, re.MULTILINE)
    assert sections[0] == ("Unreleased", "")
    dated = dict(sections[1:])
    assert list(dated) == [r.version for r in reversed(releases())], "newest first"
    for release in releases():
        if not in_history(release.commit):
            if os.environ.get("CI"):
                pytest.fail(f"release commit {release.commit} missing from this clone")
            continue
        day = git("show", "-s", "--format=%cs", release.commit).stdout.strip()
        assert dated[release.version] == day, f"{release.version} was released on {day}"


def _bullets(changelog: str, section: str) -> list[str]:
    """The entries (``- ...`` with their continuation lines) of ``## [section]``."""
    body = re.split(rf"^## \[{re.escape(section)}\].*$", changelog, flags=re.MULTILINE)[1]
    body = re.split(r"^## ", body, flags=re.MULTILINE)[0]
    return [b.strip() for b in re.split(r"^- ", body, flags=re.MULTILINE)[1:]]


def test_a_release_section_says_what_its_commit_had() -> None:
    """A merge can slip a new entry into a released section: each one lists exactly what the
    release commit's CHANGELOG had (under Unreleased, or under its version)."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    for release in releases():
        if not in_history(release.commit):
            continue  # test_the_changelog_has_a_section_per_release fails it under CI
        then = git("show", f"{release.commit}:CHANGELOG.md").stdout
        name = release.version if f"## [{release.version}]" in then else "Unreleased"
        assert _bullets(text, release.version) == _bullets(then, name), release.version
