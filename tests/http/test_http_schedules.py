"""``GET /api/v1/schedules``, ``PUT`` and ``DELETE /api/v1/schedules/{name}`` (PRODUCT §15)
on every backend: stored and decorated schedules, admin-only changes, bad input as a 400."""

from __future__ import annotations

import pytest
from http_harness import AS_ADMIN, AS_READ, Hub

pytestmark = pytest.mark.timeout(60)

NIGHTLY = {
    "task": "add",
    "args": [1],
    "kwargs": {"b": 2},
    "cron": "0 3 * * *",
    "tz": "Europe/Berlin",
}


def test_put_lists_and_deletes_a_stored_schedule(hub: Hub) -> None:
    put = hub.client.put("/api/v1/schedules/nightly", json=NIGHTLY, headers=AS_ADMIN)
    assert put.status_code == 200, put.text
    shown = put.json()
    assert (shown["name"], shown["kind"], shown["task"]) == ("nightly", "stored", "add")
    assert (shown["args"], shown["kwargs"], shown["cron"], shown["tz"]) == (
        [1], {"b": 2}, "0 3 * * *", "Europe/Berlin",
    )  # fmt: skip
    assert (shown["overlap"], shown["skipped"], shown["last_tick"]) == ("skip", 0, None)
    listed = hub.get("/api/v1/schedules")["schedules"]
    assert [(s["name"], s["kind"]) for s in listed] == [
        ("hourly", "decorated"),
        ("nightly", "stored"),
    ]
    # a PUT of the same name replaces it
    again = {"task": "add", "args": [5, 6], "every": 30, "overlap": "queue", "queue": "sync"}
    assert (
        hub.client.put("/api/v1/schedules/nightly", json=again, headers=AS_ADMIN).status_code == 200
    )
    (stored,) = [s for s in hub.app.schedules() if s.kind == "stored"]
    assert (stored.every, stored.cron, stored.args, stored.queue) == (30.0, None, [5, 6], "sync")
    gone = hub.client.delete("/api/v1/schedules/nightly", headers=AS_ADMIN)
    assert gone.status_code == 200 and gone.json() == {"name": "nightly", "removed": True}
    assert hub.client.delete("/api/v1/schedules/nightly", headers=AS_ADMIN).status_code == 404
    assert [s["kind"] for s in hub.get("/api/v1/schedules")["schedules"]] == ["decorated"]


def test_changes_are_for_admins(hub: Hub) -> None:
    put = hub.client.put("/api/v1/schedules/nightly", json=NIGHTLY, headers=AS_READ)
    assert put.status_code == 403
    hub.app.schedule("kept", hub.add.s(1, 2), every=60)
    assert hub.client.delete("/api/v1/schedules/kept", headers=AS_READ).status_code == 403
    assert hub.client.get("/api/v1/schedules", headers=AS_READ).status_code == 200
    assert [s.name for s in hub.app.schedules()] == ["hourly", "kept"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"task": "nope", "every": 60}, "no task named"),
        ({**NIGHTLY, "cron": "every day"}, "invalid cron"),
        ({**NIGHTLY, "tz": "Mars/Base"}, "unknown time zone"),
        ({**NIGHTLY, "every": 60}, "exactly one of"),
        ({"task": "add", "args": [1, 2]}, "exactly one of"),
        ({"task": "add", "args": [1, 2, 3], "every": 60}, ""),
        ({"task": "add", "args": [1, 2], "every": 1e300}, "at most"),
        ({**NIGHTLY, "cron": "0 0 30 2 *"}, "never ticks"),
        ({"task": "add", "every": "often"}, "invalid request body"),
        ({"task": "add", "every": 60, "surprise": 1}, "invalid request body"),
    ],
)
def test_bad_input_is_a_400_and_nothing_is_stored(hub: Hub, body: object, message: str) -> None:
    put = hub.client.put("/api/v1/schedules/x", json=body, headers=AS_ADMIN)
    assert put.status_code == 400, put.text
    assert message in put.json()["error"]
    assert [s.kind for s in hub.app.schedules()] == ["decorated"]


def test_a_name_of_a_periodic_task_is_refused(hub: Hub) -> None:
    body = {"task": "add", "args": [1, 2], "every": 60}
    put = hub.client.put("/api/v1/schedules/hourly", json=body, headers=AS_ADMIN)
    assert put.status_code == 400 and "periodic task of this app" in put.json()["error"]


def test_the_routes_are_in_the_openapi_schema(hub: Hub) -> None:
    paths = hub.get("/api/v1/openapi.json")["paths"]
    assert set(paths["/api/v1/schedules/{name}"]) == {"put", "delete"}
    assert "requestBody" in paths["/api/v1/schedules/{name}"]["put"]
    assert "get" in paths["/api/v1/schedules"]
