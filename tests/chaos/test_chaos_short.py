"""Short versions of the chaos scenarios (the full ones: ``python -m chaos.run``).

Each starts real ``duly worker`` processes against a fresh namespace, injects the fault and
counts runs from outside duly (see ``chaos/tasks.py``). Scenario 7 (the hypothesis state
machine) already runs in ``tests/conformance/test_protocol_state_machine.py``.
A backend whose service is down is skipped locally and fails under ``CI``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from services import require_service

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


from chaos import (  # noqa: E402
    harness,
    s1_kill_storm,
    s2_deploy,
    s6_poison,
    s8_group_storm,
    s10_chain_storm,
)

KINDS = ("sqlite", "redis", "postgres")

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    require_service(request.param)
    return request.param


def _assert_ok(result: harness.Result) -> None:
    assert result.ok, f"{result.scenario}/{result.backend}: {result.notes}"


def test_kill_storm_short(kind: str, tmp_path: Path) -> None:
    _assert_ok(s1_kill_storm.run(kind, tmp_path, short=True, tiny=True))


def test_deploy_short(kind: str, tmp_path: Path) -> None:
    for result in s2_deploy.run(kind, tmp_path, short=True, tiny=True):
        _assert_ok(result)


def test_poison_input_short(kind: str, tmp_path: Path) -> None:
    _assert_ok(s6_poison.run(kind, tmp_path, short=True))


def test_group_storm_short(kind: str, tmp_path: Path) -> None:
    _assert_ok(s8_group_storm.run(kind, tmp_path, short=True, tiny=True))


def test_chain_storm_short(kind: str, tmp_path: Path) -> None:
    _assert_ok(s10_chain_storm.run(kind, tmp_path, short=True, tiny=True))
