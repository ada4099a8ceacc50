"""Issue 28 item 8: what a hostile or careless client sends, and the headers of every answer.

Each test failed before its fix: API answers cacheable and sniffable, 405s without ``Allow``,
refresh of an over-long or control-character scope a 500, names and scopes with ``/``
unroutable, ``?status=`` silently "no filter", ``%ff%fe`` turned into U+FFFD scopes, and
login/logout performed for another site."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import quote

import pytest
from http_harness import ADMIN, AS_ADMIN, AS_READ, READ, Hub

from duly._freshness import _MAX_SCOPE
from duly._http.schedules import MAX_SCOPE

pytestmark = pytest.mark.timeout(60)


def _seg(value: str) -> str:
    return quote(value, safe="")


def test_api_answers_are_never_cached_nor_sniffed(hub: Hub) -> None:
    job = hub.add.enqueue(1, 2)
    for path in (f"/api/v1/jobs/{job.id}", "/api/v1/jobs", "/api/v1/jobs/01NOPE", "/api/v1/x"):
        response = hub.client.get(path, headers=AS_READ)
        assert response.headers["cache-control"] == "no-store", path
        assert response.headers["x-content-type-options"] == "nosniff", path
    unauthorised = hub.client.get("/api/v1/jobs")
    assert unauthorised.status_code == 401
    assert unauthorised.headers["cache-control"] == "no-store"
    metrics = hub.client.get("/metrics", headers=AS_READ)
    assert metrics.headers["x-content-type-options"] == "nosniff"


def test_a_405_says_which_methods_are_allowed(hub: Hub) -> None:
    response = hub.client.delete("/api/v1/jobs", headers=AS_ADMIN)
    assert response.status_code == 405 and "error" in response.json()
    assert set(response.headers["allow"].split(", ")) == {"GET", "HEAD"}
    response = hub.client.get("/api/v1/jobs/01ABC/retry", headers=AS_ADMIN)
    assert response.status_code == 405 and response.headers["allow"] == "POST"


@pytest.mark.parametrize(
    "scope",
    ["x" * (MAX_SCOPE + 1), "x" * 512, "a\x1fb", "a\x7fb", "a\x01b", "tab\there"],
    ids=["401", "512", "US", "DEL", "SOH", "TAB"],
)
def test_a_scope_the_freshness_refuses_is_a_400(hub: Hub, scope: str) -> None:
    for method in ("POST", "GET"):
        path = f"/api/v1/freshness/links/scopes/{_seg(scope)}"
        path += "/refresh" if method == "POST" else ""
        response = hub.client.request(method, path, headers=AS_ADMIN)
        assert response.status_code == 400, (method, response.text)
        assert "scope" in response.json()["error"]
    assert hub.app.mirrors["links"].scopes() == []


def test_the_longest_scope_is_the_freshness_limit() -> None:
    assert MAX_SCOPE == _MAX_SCOPE  # the API's check says exactly what the freshness takes


def test_the_longest_scope_is_accepted(hub: Hub) -> None:
    scope = "x" * MAX_SCOPE
    response = hub.client.post(f"/api/v1/freshness/links/scopes/{scope}/refresh", headers=AS_ADMIN)
    assert response.status_code == 202 and response.json()["scope"]["scope"] == scope


def test_names_and_scopes_with_a_slash_are_routable(hub: Hub) -> None:
    hub.app.freshness("team/links", sync=_pull, max_staleness=timedelta(minutes=5))
    for name, scope in [
        ("links", "org/7"),
        ("links", "x/scopes/y"),
        ("links", "a/refresh"),
        ("team/links", "user:7/orders"),
        ("team/links", "scopes"),
    ]:
        for sent_name, sent_scope in [(_seg(name), _seg(scope)), (name, scope)]:
            base = f"/api/v1/freshness/{sent_name}/scopes/{sent_scope}"
            one = hub.client.get(base, headers=AS_READ)
            assert one.status_code == 200, (name, scope, one.text)
            assert one.json()["scope"]["scope"] == scope
            refreshed = hub.client.post(f"{base}/refresh", headers=AS_ADMIN)
            assert refreshed.status_code == 202, (name, scope, refreshed.text)
            assert refreshed.json()["scope"]["scope"] == scope
    listed = hub.get(f"/api/v1/freshness/{_seg('team/links')}/scopes")
    assert {s["scope"] for s in listed["scopes"]} == {"user:7/orders", "scopes"}
    assert {s["scope"] for s in hub.get("/api/v1/freshness/links/scopes")["scopes"]} == {
        "org/7",
        "x/scopes/y",
        "a/refresh",
    }
    # The dashboard's key page asks every freshness for the key's scope: each answers.
    for f in hub.get("/api/v1/freshness")["freshness"]:
        path = f"/api/v1/freshness/{_seg(f['name'])}/scopes/{_seg('user:7/orders')}"
        assert hub.client.get(path, headers=AS_READ).status_code == 200
    assert hub.client.get(f"/freshness/{_seg('team/links')}").status_code == 200  # the page


def _pull(scope: str, full: bool) -> None:
    return None


@pytest.mark.parametrize("query", ["status=", "limit=", "key=", "before=", "task=&queue=q"])
def test_an_empty_query_value_is_a_400_not_no_filter(hub: Hub, query: str) -> None:
    response = hub.client.get(f"/api/v1/jobs?{query}", headers=AS_READ)
    assert response.status_code == 400, response.text
    name = query.split("=")[0]
    assert response.json()["error"] == f"{name} is empty: give a value or leave it out"
    stale = hub.client.get("/api/v1/freshness/links/scopes?stale=", headers=AS_READ)
    assert stale.status_code == 400


def test_undecodable_path_bytes_are_a_400_never_a_scope(hub: Hub) -> None:
    for path in (
        "/api/v1/freshness/links/scopes/%ff%fe/refresh",
        "/api/v1/freshness/links/scopes/ok%C3/refresh",
        "/api/v1/jobs/%ff",
        "/key/%ff%fe",
    ):
        response = hub.client.post(path, headers=AS_ADMIN)
        assert response.status_code == 400, (path, response.text)
        assert "UTF-8" in response.json()["error"]
    assert hub.client.get("/api/v1/jobs?key=%ff", headers=AS_READ).status_code == 400
    assert hub.app.mirrors["links"].scopes() == []
    fine = hub.client.post(f"/api/v1/freshness/links/scopes/{_seg('é€')}/refresh", headers=AS_ADMIN)
    assert fine.status_code == 202 and fine.json()["scope"]["scope"] == "é€"


def _session(hub: Hub) -> str | None:
    response = hub.client.get("/api/v1/session")
    return response.json()["role"] if response.status_code == 200 else None


CROSS_SITE = [
    {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
    {"Sec-Fetch-Site": "same-site"},
    {"Origin": "https://evil.example"},
    {"Origin": "null"},
]


@pytest.mark.parametrize("headers", CROSS_SITE)
def test_another_site_cannot_log_the_browser_out(hub: Hub, headers: dict[str, str]) -> None:
    hub.client.get("/login", params={"token": ADMIN}, follow_redirects=False)
    response = hub.client.post("/logout", headers=headers, follow_redirects=False)
    assert response.status_code == 403 and "set-cookie" not in response.headers
    assert _session(hub) == "admin"


@pytest.mark.parametrize("headers", CROSS_SITE)
def test_another_site_cannot_swap_the_session(hub: Hub, headers: dict[str, str]) -> None:
    hub.client.get("/login", params={"token": ADMIN}, follow_redirects=False)
    link = hub.client.get("/login", params={"token": READ}, headers=headers, follow_redirects=False)
    assert link.status_code == 403 and "set-cookie" not in link.headers
    assert "another site" in link.text and READ not in link.text
    form = hub.client.post("/login", data={"token": READ}, headers=headers, follow_redirects=False)
    assert form.status_code == 403 and "set-cookie" not in form.headers
    assert _session(hub) == "admin"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Site": "none"},
        {"Origin": "http://testserver"},
    ],
)
def test_the_same_site_still_logs_in_and_out(hub: Hub, headers: dict[str, str]) -> None:
    login = hub.client.get(
        "/login", params={"token": READ}, headers=headers, follow_redirects=False
    )
    assert login.status_code == 303 and _session(hub) == "read"
    form = hub.client.post("/login", data={"token": ADMIN}, headers=headers, follow_redirects=False)
    assert form.status_code == 303 and _session(hub) == "admin"
    out = hub.client.post("/logout", headers=headers, follow_redirects=False)
    assert out.status_code == 303 and _session(hub) is None
