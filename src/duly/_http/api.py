"""The route table's vocabulary: an ``Endpoint`` declares its method, path, access, query
parameters and response type; ``handler`` turns it into a Starlette endpoint that checks the
caller, parses the query (a bad value is a 400, never a 500), calls the function and encodes
its Struct. ``duly._http.openapi`` reads the same declarations, so the schema cannot drift.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from duly._errors import BackendUnavailable
from duly._http.models import ErrorBody

if TYPE_CHECKING:
    from duly._app import App
    from duly._http.auth import Auth

__all__ = [
    "API_HEADERS",
    "CURSOR",
    "LIMIT",
    "PAGE_HEADERS",
    "Access",
    "ApiError",
    "Call",
    "Endpoint",
    "Param",
    "decode_cursor",
    "encode_cursor",
    "error_response",
    "handler",
    "json_response",
    "page_by_name",
]

T = TypeVar("T")
Access = Literal["public", "read", "admin"]
ParamKind = Literal["str", "int", "bool", "cursor"]

_ENCODER: Final = msgspec.json.Encoder()


class ApiError(Exception):
    """An answer other than success: ``status`` and a message for the caller."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Param:
    """A query parameter. ``cursor``: an opaque page cursor (a bad one is a 400)."""

    name: str
    kind: ParamKind = "str"
    description: str = ""
    default: Any = None
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] | None = None

    def parse(self, raw: str) -> Any:
        """The value of ``raw``; ``ApiError(400)`` when it is not one."""
        if self.kind == "int":
            try:
                value = int(raw)
            except ValueError:
                raise ApiError(400, f"{self.name} must be an integer, got {raw!r}") from None
            low = self.minimum if self.minimum is not None else -(2**63)
            high = self.maximum if self.maximum is not None else 2**63
            if not low <= value <= high:
                raise ApiError(400, f"{self.name} must be from {low} to {high}, got {value}")
            return value
        if self.kind == "bool":
            if raw.lower() in ("true", "1", "yes"):
                return True
            if raw.lower() in ("false", "0", "no"):
                return False
            raise ApiError(400, f"{self.name} must be true or false, got {raw!r}")
        if self.kind == "cursor":
            return decode_cursor(raw, self.name)
        if "\x00" in raw:
            raise ApiError(400, f"{self.name} must not contain NUL characters")
        if self.choices is not None and raw not in self.choices:
            raise ApiError(400, f"{self.name} must be one of {', '.join(self.choices)}")
        return raw


#: Headers of every HTML page: no framing, no sniffing, scripts and styles from files only.
PAGE_HEADERS: Final = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
#: The page cursor of the lists other than jobs.
CURSOR: Final = Param("cursor", "cursor", "The `next` of the previous page.")
#: The ``limit`` of every list (1..500, default 50).
LIMIT: Final = Param(
    "limit", "int", "How many items (1 to 500).", default=50, minimum=1, maximum=500
)


@dataclass(slots=True)
class Call:
    """What a route function gets: the App, the caller's role, path and query values."""

    app: App
    request: Request
    role: str
    path: dict[str, str]
    query: dict[str, Any]
    #: The request's JSON body decoded as the endpoint's ``body`` Struct (None without one).
    body: Any = None


RouteFunction = Callable[[Call], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One route of the API, as the router and the OpenAPI schema see it."""

    method: Literal["GET", "POST", "PUT", "DELETE"]
    path: str
    function: RouteFunction
    response: Any
    summary: str
    access: Access = "read"
    status: int = 200
    params: Sequence[Param] = ()
    errors: Sequence[int] = ()
    #: Answered with something other than JSON (``media``), e.g. SSE or Prometheus text.
    media: str = "application/json"
    tags: Sequence[str] = field(default_factory=tuple)
    #: Path values that may hold ``/`` (sent as is or as ``%2F``, which the server decodes
    #: before routing): the router matches them with Starlette's ``path`` convertor.
    slashes: Sequence[str] = ()
    #: The msgspec Struct the JSON request body decodes to (a bad body is a 400), or None.
    body: Any = None

    @property
    def route(self) -> str:
        """The router's pattern of ``path``."""
        path = self.path
        for name in self.slashes:
            path = path.replace(f"{{{name}}}", f"{{{name}:path}}")
        return path


#: Headers of every API answer: job arguments, results and tracebacks are never kept by a
#: cache (the cookie session makes them per user), nor sniffed as another type.
API_HEADERS: Final = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


def json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """``value`` (a Struct or builtins) as a JSON answer (with ``API_HEADERS``)."""
    return Response(
        _ENCODER.encode(value),
        status,
        headers={**API_HEADERS, **(headers or {})},
        media_type="application/json",
    )


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """The JSON error answer ``{"error": message}``."""
    return json_response(ErrorBody(message), status, headers)


def encode_cursor(value: str) -> str:
    """An opaque page cursor for ``value``."""
    return base64.urlsafe_b64encode(b"1:" + value.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, name: str = "cursor") -> str:
    """The value inside ``cursor``; ``ApiError(400)`` for anything ``encode_cursor`` did not
    make."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        text = raw.decode()
    except (binascii.Error, ValueError):
        raise ApiError(400, f"{name} is not a cursor this API returned") from None
    if not text.startswith("1:") or "\x00" in text or len(text) > 512:
        raise ApiError(400, f"{name} is not a cursor this API returned")
    return text[2:]


#: Longest path value (a job id, a scope, a secret...) the API looks up.
MAX_PATH_VALUE: Final = 512
#: C0 controls and DEL: never part of a job id, a name, a scope or a secret.
_CONTROL: Final = re.compile("[\x00-\x1f\x7f]")


def _path(request: Request) -> dict[str, str]:
    values = {k: str(v) for k, v in request.path_params.items()}
    for name, value in values.items():
        if _CONTROL.search(value):
            raise ApiError(
                400, f"{name} must not contain control characters (U+0000-U+001F, U+007F)"
            )
        if len(value) > MAX_PATH_VALUE:
            raise ApiError(400, f"{name} is longer than {MAX_PATH_VALUE} characters")
    return values


def _query(endpoint: Endpoint, request: Request) -> dict[str, Any]:
    """The declared query values; one left out is its default. ``?status=`` is given but empty:
    a 400, not "no filter" (an empty filter silently matching everything would surprise)."""
    values: dict[str, Any] = {}
    given = request.query_params
    for param in endpoint.params:
        raw = given.get(param.name)
        if raw == "":
            raise ApiError(400, f"{param.name} is empty: give a value or leave it out")
        values[param.name] = param.default if raw is None else param.parse(raw)
    return values


#: The largest request body decoded (a schedule's arguments are capped by the App anyway).
MAX_BODY_BYTES: Final = 1024 * 1024


async def _body(endpoint: Endpoint, request: Request) -> Any:
    """The request's JSON body as ``endpoint.body``; ``ApiError(400)`` for anything else."""
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise ApiError(400, f"the request body is over {MAX_BODY_BYTES} bytes")
    try:
        return msgspec.json.decode(raw, type=endpoint.body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ApiError(400, f"invalid request body: {exc}") from None


def handler(endpoint: Endpoint, app: App, auth: Auth) -> Callable[[Request], Awaitable[Response]]:
    """The Starlette endpoint of ``endpoint``: auth, parsing, errors as JSON."""

    async def run(request: Request) -> Response:
        try:
            role = auth.check(request, endpoint.access)
            call = Call(app, request, role, _path(request), _query(endpoint, request))
            if endpoint.body is not None:
                call.body = await _body(endpoint, request)
            result = await endpoint.function(call)
        except ApiError as exc:
            headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
            return error_response(exc.status, exc.message, headers)
        except BackendUnavailable as exc:
            return error_response(503, f"the backend is unavailable: {exc}")
        if isinstance(result, Response):
            for name, value in API_HEADERS.items():
                result.headers.setdefault(name, value)
            return result
        return json_response(result, endpoint.status)

    run.__name__ = endpoint.function.__name__
    return run


def page_by_name(
    items: Sequence[T], name: Callable[[T], str], call: Call
) -> tuple[list[T], str | None]:
    """One page of ``items`` (sorted by ``name``): those after the ``cursor`` query value, at
    most ``limit``; and the cursor of the next page (None on the last)."""
    after: str | None = call.query.get("cursor")
    ordered = sorted(items, key=name)
    if after is not None:
        ordered = [item for item in ordered if name(item) > after]
    limit: int = call.query["limit"]
    more = len(ordered) > limit
    ordered = ordered[:limit]
    return ordered, encode_cursor(name(ordered[-1])) if more else None
