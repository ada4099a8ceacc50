"""Backends: pick one from a URL, importing its driver only when it is used."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from duly.backends.base import Backend
from duly.errors import ConfigurationError

__all__ = ["DEFAULT_URL", "Backend", "backend_from_url", "split_url"]

DEFAULT_URL = "sqlite:///duly.db"

_EXTRA_HINT = "install it with: pip install 'duly[{extra}]'"


def split_url(url: str) -> tuple[str, str | None]:
    """Return ``url`` without its ``namespace=`` query parameter, and that parameter."""
    base, sep, query = url.partition("?")
    if not sep:
        return url, None
    params = parse_qs(query, keep_blank_values=True)
    namespace = params.pop("namespace", [None])[-1]
    rest = "&".join(f"{k}={v}" for k, values in params.items() for v in values)
    return (f"{base}?{rest}" if rest else base), namespace


def backend_from_url(url: str, namespace: str = "duly") -> Backend:
    """Create (not open) the backend for ``url``.

    ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``; ``redis://`` or
    ``rediss://`` (keys prefixed by ``namespace``); ``postgresql://`` (tables in the schema
    ``namespace``). A ``?namespace=`` query parameter overrides the argument.
    """
    url, from_query = split_url(url)
    namespace = from_query or namespace
    if not namespace or not namespace.replace("_", "").replace("-", "").isalnum():
        raise ConfigurationError(f"invalid namespace {namespace!r}: use letters, digits, _ and -")
    scheme = urlsplit(url).scheme.lower()
    if scheme == "sqlite":
        from duly.backends.sqlite import SqliteBackend

        return SqliteBackend(url)
    if scheme in ("redis", "rediss", "unix"):
        try:
            from duly.backends.redis import RedisBackend
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigurationError(
                f"the Redis backend needs redis-py; {_EXTRA_HINT.format(extra='redis')}"
            ) from exc
        return RedisBackend(url, namespace=namespace)
    if scheme in ("postgres", "postgresql"):
        try:
            from duly.backends.postgres import PostgresBackend
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigurationError(
                f"the PostgreSQL backend needs psycopg; {_EXTRA_HINT.format(extra='postgres')}"
            ) from exc
        return PostgresBackend(url, schema=namespace)
    raise ConfigurationError(
        f"unsupported backend URL {url!r}: expected sqlite:///path, redis://host or "
        "postgresql://host/db"
    )
