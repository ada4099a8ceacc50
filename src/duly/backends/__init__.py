"""Backends: pick one from a URL, importing its driver only when it is used."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from duly._errors import ConfigurationError
from duly.backends._urls import check_postgres_url, check_redis_url, redact_url
from duly.backends.base import Backend

__all__ = ["DEFAULT_URL", "Backend", "backend_from_url", "redact_url", "split_url"]

DEFAULT_URL = "sqlite:///duly.db"

#: Query parameters duly reads (and removes) before handing a URL to the driver.
_OWN_PARAMS = ("namespace", "auto_migrate", "wait_replicas", "wait_timeout_ms")
#: Of those, the ones only the Redis backend reads.
_REDIS_PARAMS = ("wait_replicas", "wait_timeout_ms")

_EXTRA_HINT = "install it with: pip install 'duly[{extra}]'"


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """Return ``url`` without duly's own query parameters, and those parameters."""
    base, sep, query = url.partition("?")
    if not sep:
        return url, {}
    params = parse_qs(query, keep_blank_values=True)
    ours = {name: params.pop(name)[-1] for name in _OWN_PARAMS if name in params}
    rest = "&".join(f"{k}={v}" for k, values in params.items() for v in values)
    return (f"{base}?{rest}" if rest else base), ours


def _flag(value: str) -> bool:
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"expected true or false in the URL, got {value!r}")


def backend_from_url(url: str, namespace: str = "duly") -> Backend:
    """Create (not open) the backend for ``url``.

    ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``; ``redis://`` or
    ``rediss://`` (keys prefixed by ``namespace``), ``redis+cluster://host:port[,host:port]``
    or ``redis+sentinel://host:port[,host:port]/<master-name>[/<db>]``; ``postgresql://``
    (tables in the schema ``namespace``). A ``?namespace=`` query parameter overrides the argument;
    ``?auto_migrate=false`` stops PostgreSQL from migrating its schema on first use;
    ``?wait_replicas=N[&wait_timeout_ms=T]`` makes every Redis enqueue wait for N replicas.
    """
    url, params = split_url(url)
    scheme = urlsplit(url).scheme.lower()
    redis_only = [name for name in _REDIS_PARAMS if name in params]
    if redis_only and not scheme.startswith(("redis", "rediss", "unix")):
        raise ConfigurationError(f"?{redis_only[0]}= is a Redis option, not one of {scheme}://")
    namespace = params.get("namespace") or namespace
    if not namespace or not namespace.replace("_", "").replace("-", "").isalnum():
        raise ConfigurationError(f"invalid namespace {namespace!r}: use letters, digits, _ and -")
    if scheme == "sqlite":
        from duly.backends.sqlite import SqliteBackend

        return SqliteBackend(url)
    if scheme in ("redis", "rediss", "unix", "redis+cluster", "redis+sentinel"):
        if scheme in ("redis", "rediss", "unix"):
            check_redis_url(url)
        try:
            from duly.backends.redis import RedisBackend
            from duly.backends.redis._durable import Durability
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigurationError(
                f"the Redis backend needs redis-py; {_EXTRA_HINT.format(extra='redis')}"
            ) from exc
        return RedisBackend(url, namespace=namespace, durability=Durability.from_params(params))
    if scheme in ("postgres", "postgresql"):
        check_postgres_url(url)
        try:
            from duly.backends.postgres import PostgresBackend
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigurationError(
                f"the PostgreSQL backend needs psycopg; {_EXTRA_HINT.format(extra='postgres')}"
            ) from exc
        auto_migrate = _flag(params.get("auto_migrate", "true"))
        return PostgresBackend(url, schema=namespace, auto_migrate=auto_migrate)
    raise ConfigurationError(
        f"unsupported backend URL {redact_url(url)!r}: expected sqlite:///path, redis://host, "
        "redis+cluster://host:port, redis+sentinel://host:port/master or postgresql://host/db"
    )
