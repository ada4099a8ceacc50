"""Schemathesis against the served OpenAPI schema, on every backend: no 5xx, and every answer
conforms to the schema (status codes, content types, bodies, headers).

Each operation gets ``EXAMPLES`` positive and negative cases. Two
checks are left out on purpose: ``positive_data_acceptance`` (an opaque cursor is any string
to a schema, but only the API's own cursors are accepted: 400 is right) and
``negative_data_rejection`` (unknown query parameters are ignored, as browsers and caches add
their own). The SSE stream (never ends) has its own tests (test_http_events.py).
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from depth import examples
from http_harness import AS_ADMIN, Hub
from hypothesis import HealthCheck, given, settings

pytestmark = pytest.mark.timeout(240)

# per operation: 15 by default, 50 in `make thorough` (tests/depth.py)
EXAMPLES = examples(quick=15, thorough=50)
_EXCLUDED = [
    schemathesis.checks.positive_data_acceptance,
    schemathesis.checks.negative_data_rejection,
]


def test_no_server_error_and_schema_conformance(hub: Hub) -> None:
    job = hub.add.enqueue(1, 2)
    hub.app.create_webhook(hub.add.s(3, 4))
    schema = schemathesis.openapi.from_asgi(
        "/api/v1/openapi.json", hub.client.app, headers=AS_ADMIN
    )
    cases = 0
    failures: list[tuple[str, str]] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path == "/api/v1/events":
            continue
        operations += 1
        strategy = operation.as_strategy() | operation.as_strategy(
            schemathesis.GenerationMode.NEGATIVE
        )

        @given(case=strategy)
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: Any) -> None:
            nonlocal cases
            cases += 1
            try:
                case.call_and_validate(headers=AS_ADMIN, excluded_checks=_EXCLUDED)
            except Exception as exc:  # every failure is collected, then reported at once
                failures.append((case.operation.label, str(exc)[:800]))

        run()
    print(
        f"schemathesis [{hub.kind}]: {operations} operations, {cases} cases, "
        f"{len(failures)} failures"
    )
    assert not failures, "\n\n".join(f"{label}: {text}" for label, text in failures[:5])
    assert operations >= 17 and cases >= operations * EXAMPLES // 2
    assert hub.app.get_job(job.id) is not None
