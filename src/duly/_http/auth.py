"""Who may call what: bearer tokens, and the browser session the dashboard logs in with.

- ``Authorization: Bearer <token>``: a read token may GET, an admin token may also POST. No
  token or an unknown one is a 401, a read token on a POST a 403. Tokens are compared as
  SHA-256 digests with ``hmac.compare_digest`` against every configured token (no early exit,
  equal lengths), so timing tells nothing about a token.
- A browser logs in once (``GET login?token=`` or the login form's POST): the answer sets the
  HttpOnly, SameSite=Strict cookie ``duly_session`` (the token) and the readable cookie
  ``duly_csrf``. A cookie-authenticated POST must carry ``X-Duly-CSRF`` equal to
  ``HMAC-SHA256(token, "duly-csrf-v1")`` (double submit: another site can neither read the
  cookie nor compute the value); bearer requests need none.

Tokens are never logged nor echoed back.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Final, Literal

from starlette.requests import Request

from duly._errors import ConfigurationError, ConfigurationTypeError
from duly._http.api import Access, ApiError

__all__ = ["CSRF_COOKIE", "CSRF_HEADER", "SESSION_COOKIE", "Auth", "Role", "csrf_value"]

Role = Literal["read", "admin"]

SESSION_COOKIE: Final = "duly_session"
CSRF_COOKIE: Final = "duly_csrf"
CSRF_HEADER: Final = "X-Duly-CSRF"
_CSRF_MESSAGE: Final = b"duly-csrf-v1"
_READ_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})


def csrf_value(token: str) -> str:
    """The CSRF value of a session logged in with ``token`` (the same in every process)."""
    return hmac.new(token.encode(), _CSRF_MESSAGE, hashlib.sha256).hexdigest()


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def _tokens(tokens: Iterable[str] | None, what: str) -> list[str]:
    if tokens is None:
        return []
    if isinstance(tokens, str):
        raise ConfigurationTypeError(f"{what} takes a list of tokens, not one str")
    found = list(tokens)
    for token in found:
        if not isinstance(token, str) or not token.strip():
            raise ConfigurationError(f"{what}: a token is a non-empty str, got {token!r}")
    return found


class Auth:
    """The configured tokens, and the check every route makes."""

    def __init__(
        self, read_tokens: Iterable[str] | None = None, admin_tokens: Iterable[str] | None = None
    ) -> None:
        admin = _tokens(admin_tokens, "admin_tokens")
        read = _tokens(read_tokens, "read_tokens")
        self._known: list[tuple[bytes, Role]] = [(_digest(t), "admin") for t in admin]
        self._known += [(_digest(t), "read") for t in read]

    def __repr__(self) -> str:  # never the tokens
        return f"<duly.http.Auth {len(self._known)} tokens>"

    def role_of(self, token: str) -> Role | None:
        """The role of ``token``, or None; every configured token is compared (constant
        time per token, no early exit)."""
        digest = _digest(token)
        role: Role | None = None
        for known, known_role in self._known:
            if hmac.compare_digest(digest, known) and role != "admin":
                role = known_role
        return role

    def caller(self, request: Request) -> tuple[Role, str | None]:
        """The caller's role and, for a cookie session, its token (None for a bearer).

        ``ApiError(401)`` when neither a known bearer token nor a session cookie comes."""
        header = request.headers.get("authorization")
        if header is not None:
            scheme, _, token = header.partition(" ")
            role = self.role_of(token.strip()) if scheme.lower() == "bearer" else None
            if role is None:
                raise ApiError(401, "missing or unknown token")
            return role, None
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie:
            role = self.role_of(cookie)
            if role is not None:
                return role, cookie
        raise ApiError(401, "missing or unknown token")

    def check(self, request: Request, access: Access) -> str:
        """Raise ``ApiError`` unless the caller may make this request; its role ("public"
        for a public route)."""
        if access == "public":
            return "public"
        role, session = self.caller(request)
        if request.method in _READ_METHODS and access == "read":
            return role
        if role != "admin":
            raise ApiError(403, "this token may only read; admin actions need an admin token")
        if session is not None:
            sent = request.headers.get(CSRF_HEADER, "")
            if not hmac.compare_digest(sent.encode(), csrf_value(session).encode()):
                raise ApiError(403, f"missing or wrong {CSRF_HEADER} header")
        return role
