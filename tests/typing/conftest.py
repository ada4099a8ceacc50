"""``check_types(source)``: what ``mypy --strict`` says of a user's module (stdout, stderr)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mypy import api


@pytest.fixture
def check_types(tmp_path: Path) -> Callable[[str], tuple[str, str]]:
    def check(source: str) -> tuple[str, str]:
        path = tmp_path / "use_duly.py"
        path.write_text(source)
        out, err, _code = api.run(
            [str(path), "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache")]
        )
        return out, err

    return check
