"""What the read routes answer, on every backend."""

from __future__ import annotations

import pytest
from http_harness import AS_ADMIN, AS_READ, Hub

import duly.testing

pytestmark = pytest.mark.timeout(60)


def test_a_job_from_queue_to_result(hub: Hub) -> None:
    job = hub.add.options(key="team:7").enqueue(2, 3)
    queued = hub.get(f"/api/v1/jobs/{job.id}")
    assert queued["status"] == "queued" and queued["args"] == [2, 3] and queued["key"] == "team:7"
    hub.run(job.id)
    done = hub.get(f"/api/v1/jobs/{job.id}")
    assert done["status"] == "succeeded" and done["result"] == 5
    assert done["finished_at"].endswith("Z") and done["errors"] == [] and done["error"] is None
    status_keys = {"id", "task", "status", "attempts", "result", "error", "enqueued_at"}
    assert status_keys | {"started_at", "finished_at", "key"} <= set(done)


def test_a_failed_job_shows_every_attempt(hub: Hub) -> None:
    job = hub.boom.enqueue("abc")
    hub.run(job.id)
    failed = hub.get(f"/api/v1/jobs/{job.id}")
    assert failed["status"] == "failed"
    assert failed["error"]["type"] == "RuntimeError"
    assert "upstream refused abc" in failed["error"]["message"]
    assert "Traceback" in failed["error"]["traceback"]
    assert len(failed["errors"]) == 1


def test_unknown_job_and_group_are_404(hub: Hub) -> None:
    for path in ("/api/v1/jobs/01NOPE", "/api/v1/groups/01NOPE"):
        response = hub.client.get(path, headers=AS_ADMIN)
        assert response.status_code == 404 and "error" in response.json()


def test_jobs_list_filters_and_pages(hub: Hub) -> None:
    ids = [hub.add.options(key="link:456").enqueue(i, i).id for i in range(5)]
    other = hub.add.options(key="link:4567").enqueue(0, 0).id
    page = hub.get("/api/v1/jobs", params={"key": "link:456", "limit": 2})
    assert [j["id"] for j in page["jobs"]] == ids[::-1][:2]
    seen = [j["id"] for j in page["jobs"]]
    while page["next"] is not None:
        page = hub.get(
            "/api/v1/jobs", params={"key": "link:456", "limit": 2, "before": page["next"]}
        )
        seen += [j["id"] for j in page["jobs"]]
    assert seen == ids[::-1]
    everything = hub.get("/api/v1/jobs", params={"limit": 500})
    assert [j["id"] for j in everything["jobs"]][:6] == [other, *ids[::-1]]
    assert everything["next"] is None
    assert hub.get("/api/v1/jobs", params={"status": "failed"}) == {"jobs": [], "next": None}
    by_task = hub.get("/api/v1/jobs", params={"task": "add", "queue": "default", "limit": 1})
    assert [j["id"] for j in by_task["jobs"]] == [other] and by_task["next"] is not None


def test_queues_workers_and_stats(hub: Hub) -> None:
    hub.add.enqueue(1, 1)
    hub.sync_link.enqueue(1, access_token="t")
    queues = hub.get("/api/v1/queues")
    assert [q["name"] for q in queues["queues"]] == ["default", "sync"]
    first = hub.get("/api/v1/queues", params={"limit": 1})
    assert [q["name"] for q in first["queues"]] == ["default"]
    second = hub.get("/api/v1/queues", params={"limit": 1, "cursor": first["next"]})
    assert [q["name"] for q in second["queues"]] == ["sync"] and second["next"] is None
    assert queues["queues"][0]["queued"] == 1
    ids = [j["id"] for j in hub.get("/api/v1/jobs")["jobs"]]
    hub.run(*ids)
    stats = hub.get("/api/v1/stats", params={"minutes": 5})
    assert stats["minutes"] == 5 and stats["totals"]["succeeded"] == 2
    assert {r["task"] for r in stats["rows"]} == {"add", "sync_link"}
    assert hub.get("/api/v1/workers")["workers"] == []  # the burst worker left


def test_periodic_watches_groups_freshness(hub: Hub) -> None:
    periodic = hub.get("/api/v1/periodic")["periodic"]
    assert [p["task"] for p in periodic] == ["hourly"]
    assert periodic[0]["every"] == 3600 and periodic[0]["last_job"] is None

    hub.app.tasks["watch_link"].start(456)  # type: ignore[attr-defined]
    watches = hub.get("/api/v1/watches")["watches"]
    assert [(w["watch"], w["args"], w["state"]) for w in watches] == [
        ("watch_link", [456], "watching")
    ]
    assert hub.get("/api/v1/watches", params={"active": "false"})["watches"] == []
    missing = hub.client.get("/api/v1/watches", params={"watch": "nope"}, headers=AS_ADMIN)
    assert missing.status_code == 404

    group = hub.app.group([hub.add.s(1, 1), hub.add.s(2, 2)], key="event:9")
    shown = hub.get(f"/api/v1/groups/{group.id}")
    assert shown["total"] == 2 and shown["pending"] == 2 and shown["key"] == "event:9"

    assert hub.get("/api/v1/freshness")["freshness"] == [
        {"name": "links", "task": "freshness.links", "stale": 0}
    ]
    refreshed = hub.client.post("/api/v1/freshness/links/scopes/link:1/refresh", headers=AS_ADMIN)
    assert refreshed.status_code == 202, refreshed.text
    scope = refreshed.json()["scope"]
    assert scope["scope"] == "link:1" and scope["state"] == "never" and scope["syncing"]
    assert scope["score"] is None and scope["job"]
    scopes = hub.get("/api/v1/freshness/links/scopes")
    assert [s["scope"] for s in scopes["scopes"]] == ["link:1"] and scopes["next"] is None
    missing = hub.client.get("/api/v1/freshness/nope/scopes", headers=AS_ADMIN)
    assert missing.status_code == 404


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/jobs/a%00b"),
        ("POST", "/api/v1/jobs/a%00b/retry"),
        ("POST", "/api/v1/jobs/a%00b/cancel"),
        ("GET", "/api/v1/groups/a%00b"),
        ("GET", "/api/v1/freshness/links/scopes/a%00b"),
        ("POST", "/api/v1/freshness/links/scopes/a%00b/refresh"),
        ("DELETE", "/api/v1/freshness/links/scopes/a%00b"),
        ("GET", "/api/v1/jobs/" + "x" * 600),
    ],
)
def test_malformed_path_values_are_a_400(hub: Hub, method: str, path: str) -> None:
    response = hub.client.request(method, path, headers=AS_ADMIN)
    assert response.status_code == 400, response.text
    assert response.json()["error"]


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/v1/jobs", {"limit": "0"}),
        ("/api/v1/jobs", {"limit": "501"}),
        ("/api/v1/jobs", {"limit": "many"}),
        ("/api/v1/jobs", {"status": "sleeping"}),
        ("/api/v1/jobs", {"before": "not a cursor!"}),
        ("/api/v1/jobs", {"key": "a\x00b"}),
        ("/api/v1/queues", {"cursor": "@@@"}),
        ("/api/v1/stats", {"minutes": "-1"}),
        ("/api/v1/stats", {"minutes": "99999"}),
        ("/api/v1/watches", {"active": "perhaps"}),
        ("/api/v1/freshness/links/scopes", {"cursor": "MTpub3QgYW4gaW50"}),
    ],
)
def test_malformed_input_is_a_400_with_a_message(
    hub: Hub, path: str, params: dict[str, str]
) -> None:
    response = hub.client.get(path, params=params, headers=AS_ADMIN)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]


def test_health_and_metrics(hub: Hub) -> None:
    assert hub.client.get("/healthz").json() == {"status": "ok", "error": None}
    assert hub.client.get("/metrics").status_code == 401
    text = hub.client.get("/metrics", headers=AS_ADMIN).text
    assert "duly_backend_up 1.0" in text


def test_retry_and_cancel(hub: Hub) -> None:
    failed = hub.boom.enqueue("x")
    hub.run(failed.id)
    conflict = hub.client.post(f"/api/v1/jobs/{hub.add.enqueue(1, 1).id}/retry", headers=AS_ADMIN)
    assert conflict.status_code == 409 and "queued" in conflict.json()["error"]
    retried = hub.client.post(f"/api/v1/jobs/{failed.id}/retry", headers=AS_ADMIN)
    assert retried.status_code == 200 and retried.json()["job"]["status"] == "queued"
    cancelled = hub.client.post(f"/api/v1/jobs/{failed.id}/cancel", headers=AS_ADMIN)
    assert cancelled.status_code == 200 and cancelled.json()["job"]["status"] == "cancelled"
    again = hub.client.post(f"/api/v1/jobs/{failed.id}/cancel", headers=AS_ADMIN)
    assert again.status_code == 409
    for action in ("retry", "cancel"):
        missing = hub.client.post(f"/api/v1/jobs/01NOPE/{action}", headers=AS_ADMIN)
        assert missing.status_code == 404


def test_one_scope_and_watches_by_key(hub: Hub) -> None:
    never = hub.get("/api/v1/freshness/links/scopes/link:9")["scope"]
    assert never["state"] == "never" and never["job"] is None and not never["syncing"]
    missing = hub.client.get("/api/v1/freshness/nope/scopes/link:9", headers=AS_ADMIN)
    assert missing.status_code == 404
    hub.client.post("/api/v1/freshness/links/scopes/link:9/refresh", headers=AS_ADMIN)
    one = hub.get("/api/v1/freshness/links/scopes/link:9")["scope"]
    assert one["syncing"] and one["requested_by"] == "request"
    assert hub.get("/api/v1/freshness/links/scopes")["scopes"] == [one]

    watch = hub.app.tasks["watch_link"]
    watch.start(456)  # type: ignore[attr-defined]
    watch.start(789)  # type: ignore[attr-defined]
    by_arg = hub.get("/api/v1/watches", params={"key": "456"})["watches"]
    assert [w["args"] for w in by_arg] == [[456]]
    own_key = by_arg[0]["key"]
    assert own_key and hub.get("/api/v1/watches", params={"key": own_key})["watches"] == by_arg
    assert hub.get("/api/v1/watches", params={"key": "nobody"})["watches"] == []


def test_pause_and_resume_a_queue(hub: Hub) -> None:
    job = hub.add.enqueue(1, 1)
    paused = hub.client.post("/api/v1/queues/default/pause", headers=AS_ADMIN)
    assert paused.status_code == 200
    assert paused.json() == {"name": "default", "paused": True, "changed": True}
    again = hub.client.post("/api/v1/queues/default/pause", headers=AS_ADMIN).json()
    assert again["changed"] is False
    [default] = [q for q in hub.get("/api/v1/queues")["queues"] if q["name"] == "default"]
    assert (default["paused"], default["queued"]) == (True, 1)
    assert (
        'duly_queue_paused{queue="default"} 1.0'
        in hub.client.get("/metrics", headers=AS_ADMIN).text
    )
    duly.testing.run_jobs(hub.app, queues=["default"])  # a burst takes nothing of it
    assert hub.get(f"/api/v1/jobs/{job.id}")["status"] == "queued"

    resumed = hub.client.post("/api/v1/queues/default/resume", headers=AS_ADMIN)
    assert resumed.json() == {"name": "default", "paused": False, "changed": True}
    assert not [q for q in hub.get("/api/v1/queues")["queues"] if q["paused"]]
    bad = hub.client.post("/api/v1/queues/no%20spaces/pause", headers=AS_ADMIN)
    assert bad.status_code == 400 and "invalid queue name" in bad.json()["error"]


def test_forget_a_scope(hub: Hub) -> None:
    """DELETE forgets a scope (issue 31.2): admin only, False for an unknown one, 404 for an
    unknown freshness; the scope is no longer listed."""
    hub.client.post("/api/v1/freshness/links/scopes/a/b/refresh", headers=AS_ADMIN)
    hub.client.post("/api/v1/freshness/links/scopes/link:2/refresh", headers=AS_ADMIN)
    path = "/api/v1/freshness/links/scopes/a/b"
    assert hub.client.delete(path, headers=AS_READ).status_code == 403
    gone = hub.client.delete(path, headers=AS_ADMIN)
    assert gone.status_code == 200, gone.text
    assert gone.json() == {"scope": "a/b", "forgotten": True}
    assert [s["scope"] for s in hub.get("/api/v1/freshness/links/scopes")["scopes"]] == ["link:2"]
    assert hub.client.delete(path, headers=AS_ADMIN).json() == {"scope": "a/b", "forgotten": False}
    missing = hub.client.delete("/api/v1/freshness/nope/scopes/a", headers=AS_ADMIN)
    assert missing.status_code == 404
