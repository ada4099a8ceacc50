"""Browser login and logout (see ``duly._http.auth`` for the cookies and the CSRF rule).

Neither may be triggered by another site: a cross-site form POST to ``/logout`` would end the
session, and a cross-site link to ``/login?token=<a read token>`` (or a form POSTing one) would
swap an admin's session for the attacker's choice. A request a browser marks as coming from
elsewhere (``Sec-Fetch-Site`` other than ``same-origin``/``none``, else an ``Origin`` whose host
is not this one) changes no cookie: logout answers 403, login shows the form with a notice.
Requests without either header (curl, scripts) are not a browser's and are served as before.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from duly._http.api import PAGE_HEADERS
from duly._http.auth import CSRF_COOKIE, SESSION_COOKIE, Auth, csrf_value
from duly._http.dashboard import login_page

__all__ = ["session_routes"]

#: Most bytes of a login form read.
_MAX_FORM: Final = 16 * 1024
#: How long a session cookie lives (seconds).
SESSION_AGE: Final = 12 * 3600


def _local(next_url: str | None) -> str:
    """``next_url`` if it is a path of this site, else ``/`` (no open redirect)."""
    if not next_url or not next_url.startswith("/") or next_url.startswith(("//", "/\\")):
        return "/"
    if any(c in next_url for c in "\r\n\x00") or len(next_url) > 2000:
        return "/"
    return next_url


def _foreign(request: Request) -> bool:
    """Whether a browser says this request comes from another site (see the module doc)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        # "same-site" is another origin too (a sibling subdomain may be anyone's).
        return site not in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None:
        return False
    # The host only: behind a TLS-terminating proxy the scheme seen here differs.
    return urlsplit(origin).netloc.lower() != request.headers.get("host", "").lower()


_FOREIGN_LOGIN: Final = (
    "a login from another site's link or form is not accepted: paste your token here"
)


def _mount(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


def _page(error: str | None, next_url: str, status: int) -> HTMLResponse:
    return HTMLResponse(login_page(error, next_url), status, headers=PAGE_HEADERS)


def session_routes(auth: Auth) -> list[BaseRoute]:
    """``/login`` (GET with ``?token=``, or the form's POST) and ``/logout``."""

    async def _login(request: Request, token: str | None, next_url: str) -> Response:
        if not token:
            return _page(None, next_url, 200)
        if _foreign(request):
            return _page(_FOREIGN_LOGIN, next_url, 403)
        if auth.role_of(token) is None:
            return _page("unknown token", next_url, 401)
        mount = _mount(request)
        response = RedirectResponse(mount + next_url, 303)
        secure = request.url.scheme == "https"
        common = {
            "path": mount or "/",
            "secure": secure,
            "samesite": "strict",
            "max_age": SESSION_AGE,
        }
        response.set_cookie(SESSION_COOKIE, token, httponly=True, **common)  # type: ignore[arg-type]
        response.set_cookie(CSRF_COOKIE, csrf_value(token), httponly=False, **common)  # type: ignore[arg-type]
        return response

    async def login(request: Request) -> Response:
        if request.method == "GET":
            q = request.query_params
            return await _login(request, q.get("token"), _local(q.get("next")))
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > _MAX_FORM:
                return _page("the form is too large", "/", 413)
        form = parse_qs(body.decode("utf-8", "replace"))
        token = (form.get("token") or [""])[0].strip()
        return await _login(request, token, _local((form.get("next") or ["/"])[0]))

    async def logout(request: Request) -> Response:
        if _foreign(request):
            return _page("a logout from another site is not accepted", "/", 403)
        mount = _mount(request)
        response = RedirectResponse(mount + "/login", 303)
        for name in (SESSION_COOKIE, CSRF_COOKIE):
            response.delete_cookie(name, path=mount or "/", samesite="strict")
        return response

    return [
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
    ]
