"""The releases recorded in ``tests/upgrade/RELEASES`` (oldest first), and git helpers."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
RELEASES = Path(__file__).with_name("RELEASES")


class Release(NamedTuple):
    version: str
    commit: str


def releases() -> list[Release]:
    """Every release, oldest first."""
    found = []
    for line in RELEASES.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            version, commit = line.split()
            found.append(Release(version, commit))
    return found


def git(*args: str) -> subprocess.CompletedProcess[str]:
    """``git ARGS`` in the repository, not raising."""
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    )


def in_history(commit: str) -> bool:
    """Whether ``commit`` is in this clone; a shallow clone (CI's, often) fetches it first."""
    if git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0:
        return True
    git("fetch", "--quiet", "--depth=1", "origin", commit)  # a full id: servers allow it
    return git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0
