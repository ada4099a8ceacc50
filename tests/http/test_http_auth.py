"""Tokens, the browser session (cookie + CSRF header), and a backend that is down."""

from __future__ import annotations

from pathlib import Path

import pytest
from http_harness import ADMIN, AS_ADMIN, AS_READ, READ, Hub, build_app
from starlette.testclient import TestClient

from duly._http.auth import Auth, csrf_value

pytestmark = pytest.mark.timeout(60)


def _login(hub: Hub, token: str, **params: str) -> TestClient:
    response = hub.client.get("/login", params={"token": token, **params}, follow_redirects=False)
    assert response.status_code == 303, response.text
    return hub.client


def test_login_sets_an_httponly_strict_cookie_and_the_csrf_value(hub: Hub) -> None:
    response = hub.client.get("/login", params={"token": ADMIN}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/"
    cookies = response.headers.get_list("set-cookie")
    session = next(c for c in cookies if c.startswith("duly_session="))
    csrf = next(c for c in cookies if c.startswith("duly_csrf="))
    assert "HttpOnly" in session and "SameSite=strict" in session and "Path=/" in session
    assert "HttpOnly" not in csrf and csrf_value(ADMIN) in csrf
    assert hub.client.get("/api/v1/session").json() == {"role": "admin", "csrf": csrf_value(ADMIN)}


def test_a_cookie_post_needs_the_csrf_header(hub: Hub) -> None:
    job = hub.add.enqueue(1, 1)
    client = _login(hub, ADMIN)
    refused = client.post(f"/api/v1/jobs/{job.id}/cancel")
    assert refused.status_code == 403 and "X-Duly-CSRF" in refused.json()["error"]
    wrong = client.post(f"/api/v1/jobs/{job.id}/cancel", headers={"X-Duly-CSRF": "0" * 64})
    assert wrong.status_code == 403
    done = client.post(f"/api/v1/jobs/{job.id}/cancel", headers={"X-Duly-CSRF": csrf_value(ADMIN)})
    assert done.status_code == 200 and done.json()["job"]["status"] == "cancelled"
    assert client.get("/api/v1/jobs").status_code == 200  # GETs need no header


def test_a_read_session_cannot_post_even_with_the_header(hub: Hub) -> None:
    job = hub.add.enqueue(1, 1)
    client = _login(hub, READ)
    assert client.get("/api/v1/session").json()["role"] == "read"
    response = client.post(
        f"/api/v1/jobs/{job.id}/cancel", headers={"X-Duly-CSRF": csrf_value(READ)}
    )
    assert response.status_code == 403


def test_the_login_form_and_bad_tokens(hub: Hub) -> None:
    page = hub.client.get("/login")
    assert page.status_code == 200 and "name='token'" in page.text.replace('"', "'")
    bad = hub.client.get("/login", params={"token": "guess"}, follow_redirects=False)
    assert bad.status_code == 401 and "set-cookie" not in bad.headers
    form = hub.client.post(
        "/login", data={"token": READ, "next": "/api/v1/session"}, follow_redirects=False
    )
    assert form.status_code == 303 and form.headers["location"] == "/api/v1/session"


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "/\\evil", "x"])
def test_login_never_redirects_off_site(hub: Hub, target: str) -> None:
    response = hub.client.get(
        "/login", params={"token": READ, "next": target}, follow_redirects=False
    )
    assert response.headers["location"] == "/"


def test_logout_clears_the_session(hub: Hub) -> None:
    client = _login(hub, ADMIN)
    assert client.get("/api/v1/session").status_code == 200
    response = client.post("/logout", follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/login"
    assert client.get("/api/v1/session").status_code == 401


def test_a_bearer_token_wins_over_a_cookie_and_needs_no_csrf(hub: Hub) -> None:
    job = hub.add.enqueue(1, 1)
    client = _login(hub, READ)
    response = client.post(f"/api/v1/jobs/{job.id}/cancel", headers=AS_ADMIN)
    assert response.status_code == 200
    assert client.get("/api/v1/session", headers=AS_READ).json()["csrf"] == ""


def test_token_lookup() -> None:
    auth = Auth(read_tokens=["r1", "both"], admin_tokens=["a1", "both"])
    assert [auth.role_of(t) for t in ("r1", "a1", "both", "r", "", "a1 ")] == [
        "read",
        "admin",
        "admin",
        None,
        None,
        None,
    ]
    assert "r1" not in repr(auth)
    with pytest.raises(TypeError):
        Auth(read_tokens="r1")
    with pytest.raises(ValueError):
        Auth(admin_tokens=[""])


def test_a_backend_that_is_down_is_a_503(tmp_path: Path) -> None:
    app, _ = build_app("redis://127.0.0.1:1/0?socket_timeout=0.5", "down")
    asgi = app.asgi(read_tokens=[READ], admin_tokens=[ADMIN])
    with TestClient(asgi) as client:
        health = client.get("/healthz")
        assert health.status_code == 503 and health.json()["status"] == "unavailable"
        for path in ("/api/v1/jobs", "/api/v1/jobs/01ABC", "/api/v1/queues"):
            response = client.get(path, headers=AS_READ)
            assert response.status_code == 503, (path, response.text)
            assert "unavailable" in response.json()["error"]
    app.close()
