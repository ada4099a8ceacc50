"""The dashboard's routes without a browser: headers, the mount point, the static files, the
login page's escaping, and a scan of the page's own code for HTML sinks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
from served import ADMIN, READ
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

import duly
from duly._http.dashboard import PAGES, login_page

STATIC = Path(str(resources.files("duly._http").joinpath("static")))
SCRIPTS = sorted(STATIC.rglob("*.js"))


@pytest.fixture
def app(tmp_path: Path) -> Iterator[duly.App]:
    with duly.App(f"sqlite:///{tmp_path / 'duly.db'}") as app:
        yield app


@pytest.fixture
def client(app: duly.App) -> Iterator[TestClient]:
    with TestClient(app.asgi(read_tokens=[READ], admin_tokens=[ADMIN])) as client:
        yield client


def page_paths() -> list[str]:
    examples = {
        "{id}": "01ABC",
        "{name:path}": "team/profiles",
        "{key:path}": "user:7/orders",
    }
    paths = []
    for path in PAGES:
        for pattern, value in examples.items():
            path = path.replace(pattern, value)
        paths.append(path)
    return paths


@pytest.mark.parametrize("path", page_paths())
def test_every_page_address_answers_the_page_with_strict_headers(
    client: TestClient, path: str
) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    csp = response.headers["content-security-policy"]
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "script-src 'self'" in csp and "style-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["cache-control"] == "no-store"
    assert '<base href="/">' in response.text


def test_the_page_needs_no_token_its_api_does(client: TestClient) -> None:
    response = client.get("/")  # no cookie, no bearer: the page is public, its API is not
    assert response.status_code == 200
    assert client.get("/api/v1/jobs").status_code == 401


def test_the_base_is_the_mount_point(app: duly.App) -> None:
    outer = Starlette(routes=[Mount("/ops/duly", app=app.asgi(admin_tokens=[ADMIN]))])
    with TestClient(outer) as client:
        page = client.get("/ops/duly/jobs/01ABC")
        assert page.status_code == 200
        assert '<base href="/ops/duly/">' in page.text
        script = client.get("/ops/duly/static/js/app.js")
        assert script.status_code == 200
    with TestClient(app.asgi(), root_path='/a"b<') as client:
        assert '<base href="/a&quot;b&lt;/">' in client.get("/").text


def test_static_files_have_their_types_and_revalidate(client: TestClient) -> None:
    types = {
        "js/app.js": "text/javascript",
        "dashboard.css": "text/css",
        "favicon.svg": "image/svg+xml",
    }
    for name, kind in types.items():
        response = client.get(f"/static/{name}")
        assert response.status_code == 200, name
        assert response.headers["content-type"].startswith(kind)
        assert response.headers["x-content-type-options"] == "nosniff"
        again = client.get(f"/static/{name}", headers={"If-None-Match": response.headers["etag"]})
        assert again.status_code == 304 and again.content == b""


@pytest.mark.parametrize(
    "path", ["nope.js", "index.html", "login.html", "../dashboard.py", "js/../../bulk.py", ""]
)
def test_only_the_static_files_are_served(client: TestClient, path: str) -> None:
    assert client.get(f"/static/{path}").status_code == 404


def test_the_login_page_escapes_what_it_shows() -> None:
    html = login_page("<script>alert(1)</script>", '/jobs?x="><script>alert(2)</script>')
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'value="/jobs?x=&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;"' in html
    # A value holding a slot's name is not filled in again.
    assert "{{NEXT}}" in login_page("{{NEXT}}", "/")


def test_the_login_page_is_served_with_the_form(client: TestClient) -> None:
    response = client.get("/login?next=/jobs")
    assert response.status_code == 200
    assert 'action="login"' in response.text and 'name="token"' in response.text
    assert 'value="/jobs"' in response.text


@pytest.mark.parametrize("name", ["index.html", "login.html"])
def test_the_html_has_no_inline_script_style_or_handler(name: str) -> None:
    text = (STATIC / name).read_text()
    assert re.search(r"<script(?![^>]*\bsrc=)", text) is None
    assert re.search(r"<style\b", text) is None
    assert re.search(r"\sstyle=|\son[a-z]+=", text) is None


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(STATIC)))
def test_the_scripts_never_write_html(script: Path) -> None:
    """Data reaches the page through textContent / setAttribute only (dom.js)."""
    text = script.read_text().replace("http://www.w3.org/2000/svg", "SVG_NS")
    code = re.sub(r"^\s*//.*$", "", text, flags=re.M)  # comments may name the sinks
    sinks = r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function\("
    assert re.search(sinks, code) is None
    assert re.search(r"https?://", code) is None  # no CDN, no third-party URL


def test_the_page_is_small() -> None:
    size = sum(p.stat().st_size for p in STATIC.rglob("*") if p.is_file())
    assert size < 100_000, f"the dashboard's files weigh {size} bytes"
