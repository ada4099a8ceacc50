"""A fake upstream API (the role Virtuozzo plays in seed 000), served on 127.0.0.1.

``GET /teams/<team>/environments?page=N&per_page=M[&modified_since=T]`` lists a team's
environments a page at a time (``{"items": [...], "next_page": N + 1 | null}``), only those
modified after ``T`` when given. Every answer carries rate-limit headers
(``X-RateLimit-Limit``, ``X-RateLimit-Remaining``, ``X-RateLimit-Reset`` in seconds); past the
limit it answers ``429`` with ``Retry-After``. ``POST /teams/<team>/environments/<id>/restart``
is a user's mutation. ``GET /stats`` counts the list requests per team (for the tests).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["Upstream"]


class Upstream:
    """The fake API's data and server. ``limit`` requests per ``window`` seconds."""

    def __init__(self, limit: int = 1000, window: float = 1.0) -> None:
        self.limit = limit
        self.window = window
        self.teams: dict[str, dict[str, dict[str, Any]]] = {}
        self.requests: Counter[str] = Counter()
        #: How many requests were answered 429.
        self.throttled = 0
        self._lock = threading.Lock()
        self._window_start = time.monotonic()
        self._used = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Upstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- data ------------------------------------------------------------------------------
    def put(self, team: str, env_id: str, **fields: Any) -> None:
        """Create or change an environment (now modified)."""
        with self._lock:
            envs = self.teams.setdefault(team, {})
            env = envs.setdefault(env_id, {"id": env_id, "status": "running"})
            env.update(fields, modified_at=time.time())

    def delete(self, team: str, env_id: str) -> None:
        """Remove an environment upstream."""
        with self._lock:
            self.teams.get(team, {}).pop(env_id, None)

    # -- rate limit ------------------------------------------------------------------------
    def limit_to(self, limit: int, window: float) -> None:
        """``limit`` requests per ``window`` seconds from now on, starting a fresh window."""
        with self._lock:
            self.limit, self.window = limit, window
            self._window_start, self._used = time.monotonic(), 0

    def _take(self) -> tuple[bool, int, float]:
        """Take one request of the window: (allowed, remaining, seconds to the reset)."""
        with self._lock:
            now = time.monotonic()
            if now - self._window_start >= self.window:
                self._window_start, self._used = now, 0
            reset = self.window - (now - self._window_start)
            if self._used >= self.limit:
                return False, 0, reset
            self._used += 1
            return True, self.limit - self._used, reset

    def _list(self, team: str, query: dict[str, list[str]]) -> dict[str, Any]:
        page = int(query.get("page", ["1"])[0])
        per_page = int(query.get("per_page", ["50"])[0])
        since = float(query["modified_since"][0]) if "modified_since" in query else None
        with self._lock:
            self.requests[team] += 1
            envs = sorted(self.teams.get(team, {}).values(), key=lambda e: e["id"])
            if since is not None:
                envs = [e for e in envs if e["modified_at"] > since]
            items = [dict(e) for e in envs[(page - 1) * per_page : page * per_page]]
        more = page * per_page < len(envs)
        return {"items": items, "next_page": page + 1 if more else None}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                return None

            def _send(self, code: int, body: Any, headers: dict[str, str]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str) -> None:
                url = urlsplit(self.path)
                parts = [p for p in url.path.split("/") if p]
                if parts == ["stats"]:
                    self._send(200, dict(upstream.requests), {})
                    return
                allowed, remaining, reset = upstream._take()
                headers = {
                    "X-RateLimit-Limit": str(upstream.limit),
                    "X-RateLimit-Remaining": str(remaining),
                    "X-RateLimit-Reset": f"{reset:.3f}",
                }
                if not allowed:
                    upstream.throttled += 1
                    headers["Retry-After"] = f"{reset:.3f}"
                    self._send(429, {"error": "rate limited"}, headers)
                elif method == "GET" and parts[::2] == ["teams", "environments"]:
                    self._send(200, upstream._list(parts[1], parse_qs(url.query)), headers)
                elif method == "POST" and len(parts) == 5 and parts[4] == "restart":
                    upstream.put(parts[1], parts[3], status="restarting")
                    self._send(200, {"ok": True}, headers)
                else:
                    self._send(404, {"error": "not found"}, headers)

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

        return Handler
