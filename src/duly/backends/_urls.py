"""Checking backend URLs before a driver sees them, and showing them without their secrets.

The drivers are lenient in ways that hide typos: redis-py reads ``redis://host/abc`` as
database 0 and reports ``:abc`` as "Port could not be cast to integer value"; libpq only
complains about a bad port when it connects. duly checks what it can up front and says so in
its own words (``ConfigurationError``).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from duly._errors import ConfigurationError

__all__ = ["check_postgres_url", "check_redis_url", "redact_url"]

#: Query parameters whose value is a secret (libpq's ``?password=``).
_SECRET_PARAMS = frozenset({"password", "sslpassword"})


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (safe to print and log)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    netloc = parts.netloc
    if password is not None:
        userinfo, _, hosts = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}:***@{hosts}"
    query = parts.query
    if query and any(name.lower() in _SECRET_PARAMS for name, _ in parse_qsl(query)):
        query = urlencode(
            [
                (name, "***" if name.lower() in _SECRET_PARAMS else value)
                for name, value in parse_qsl(query, keep_blank_values=True)
            ],
            safe="*",
        )
    if (netloc, query) == (parts.netloc, parts.query):
        return url
    # By hand: urlunsplit drops the empty authority of "postgresql:///db" (and its "//").
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")


def _bad(url: str, problem: str, expected: str) -> ConfigurationError:
    return ConfigurationError(f"invalid URL {redact_url(url)!r}: {problem} ({expected})")


def _check_port(url: str, host_port: str, expected: str) -> None:
    """``host[:port]`` or ``[v6]:port``: the port, when given, is 1-65535."""
    if host_port.startswith("["):
        after = host_port.partition("]")[2]
        port = after[1:] if after.startswith(":") else ""
    else:
        port = host_port.rpartition(":")[2] if ":" in host_port else ""
    if port and (not port.isdigit() or not 0 < int(port) < 65536):
        raise _bad(url, f"port {port!r} is not a number from 1 to 65535", expected)


def check_redis_url(url: str) -> None:
    """Raise ``ConfigurationError`` unless ``url``'s port and database number are integers."""
    expected = "expected redis://[:password@]host[:port][/db] with db an integer"
    parts = urlsplit(url)
    if parts.scheme.lower() != "unix":
        _check_port(url, parts.netloc.rpartition("@")[2], expected)
        db = unquote(parts.path).strip("/")
        if db and not db.isdigit():
            raise _bad(url, f"database {db!r} is not an integer", expected)
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name == "db" and not value.isdigit():
            raise _bad(url, f"database {value!r} is not an integer", expected)


def check_postgres_url(url: str) -> None:
    """Raise ``ConfigurationError`` unless every host's port in ``url`` is an integer."""
    expected = "expected postgresql://[user[:password]@]host[:port]/dbname"
    hosts = urlsplit(url).netloc.rpartition("@")[2]
    for host_port in hosts.split(","):  # libpq allows host1:5432,host2:5433
        _check_port(url, host_port, expected)
    for name, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        if name == "port":
            for port in value.split(","):
                if port and not port.isdigit():
                    raise _bad(url, f"port {port!r} is not a number from 1 to 65535", expected)
