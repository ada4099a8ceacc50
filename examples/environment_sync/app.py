"""Seed 000 in duly: keep a mirror of an upstream API fresh against per-tier staleness SLAs,
without syncing on every login.

- ``envs = app.freshness("environments", sync=sync_environments, ...)``: a scope is a team
  (``team:<id>``); enterprise teams (``team:ent-...``) get 5 minutes of staleness, the others
  10; every known team gets a baseline full sync each hour, spread over the hour; a failing
  sync backs off, capped at 5 minutes.
- ``login(team)`` reads the mirror and answers at once with ``{"freshness": "stale" |
  "current", "lastSyncedAt": ...}``; its ``check`` enqueues a sync only when needed, so a storm
  of 100 logins makes one sync job.
- ``sync_environments(scope, full)`` pages through the upstream (``modified_since`` for a
  delta), writes only the rows whose ``duly.fingerprint`` changed, soft-deletes the ones that
  vanished (full syncs), defers itself on a 429 (``duly.Throttled(retry_after=...)``), and,
  when the upstream's rate-limit headers say the budget is nearly spent, pushes non-critical
  teams later (hot-spot protection) while enterprise teams go on.
- ``restart_environment(team, env)`` is a user's mutation followed by ``envs.touch``;
  ``admin_refresh(team)`` is the "refresh now" button (``envs.request``); ``delete_team(team)``
  forgets the team's scope (``envs.forget``), so its baselines stop.

Settings (environment): ``DULY_URL`` (jobs), ``MIRROR_URL`` / ``MIRROR_SCHEMA`` (the mirror,
see mirror.py), ``UPSTREAM_URL`` (the API; upstream.py serves a fake one), ``ENV_SYNC_MINUTE``
(seconds in a minute, default 60: shrink it to try the SLAs quickly), ``ENV_SYNC_FULL_EVERY``
(seconds between baseline syncs, default 60 minutes), ``ENV_SYNC_LOW_WATER``
(requests left under which non-critical teams wait for the rate-limit window to reset).
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from datetime import timedelta
from typing import Any

import duly
from examples.environment_sync.mirror import Mirror

app = duly.App(os.environ.get("DULY_URL", "sqlite:///environment_sync.db"))
MINUTE = timedelta(seconds=float(os.environ.get("ENV_SYNC_MINUTE", "60")))
#: Baseline full sync of every team (default: hourly).
FULL_EVERY = timedelta(seconds=float(os.environ.get("ENV_SYNC_FULL_EVERY", "0"))) or 60 * MINUTE
PER_PAGE = 3
#: Scopes deferred by hot-spot protection in this process (for the demo and its test).
deferred: list[str] = []
_budget = {"remaining": float("inf"), "reset_at": 0.0}
_budget_lock = threading.Lock()


_mirror: list[Mirror] = []
_mirror_lock = threading.Lock()


def mirror() -> Mirror:
    """The mirror database (opened once, on first use, by whichever thread comes first)."""
    with _mirror_lock:
        if not _mirror:
            _mirror.append(Mirror())
        return _mirror[0]


def critical(scope: str) -> bool:
    """Enterprise teams are never pushed back by hot-spot protection."""
    return scope.startswith("team:ent-")


def max_staleness(scope: str) -> timedelta:
    """The SLA of a team's data: 5 minutes for enterprise teams, else 10."""
    return 5 * MINUTE if critical(scope) else 10 * MINUTE


def _get(path: str) -> dict[str, Any]:
    """GET from the upstream; a 429 defers the sync to the Retry-After it names."""
    url = os.environ.get("UPSTREAM_URL", "http://127.0.0.1:8700") + path
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            _note_budget(response.headers)
            body: dict[str, Any] = json.load(response)
            return body
    except urllib.error.HTTPError as error:
        if error.code == 429:
            _note_budget(error.headers)
            raise duly.Throttled(retry_after=float(error.headers["Retry-After"])) from None
        raise


def _note_budget(headers: Any) -> None:
    with _budget_lock:
        _budget["remaining"] = float(headers["X-RateLimit-Remaining"])
        _budget["reset_at"] = time.monotonic() + float(headers["X-RateLimit-Reset"])


def _hot_spot_wait(scope: str) -> float:
    """Seconds a non-critical scope should wait for the upstream's window (0: go on)."""
    low_water = float(os.environ.get("ENV_SYNC_LOW_WATER", "2"))
    with _budget_lock:
        wait = _budget["reset_at"] - time.monotonic()
        if critical(scope) or _budget["remaining"] >= low_water or wait <= 0:
            return 0.0
        return wait


def sync_environments(scope: str, full: bool) -> dict[str, Any]:
    """Pull one team's environments into the mirror (all of them, or those modified since the
    last one mirrored)."""
    wait = _hot_spot_wait(scope)
    if wait > 0:
        deferred.append(scope)
        raise duly.Throttled(retry_after=wait)
    team = scope.removeprefix("team:")
    since = None if full else mirror().watermark(team)
    items: list[dict[str, Any]] = []
    page: int | None = 1
    while page is not None:
        query = f"?page={page}&per_page={PER_PAGE}"
        if since is not None:
            query += f"&modified_since={since!r}"
        body = _get(f"/teams/{team}/environments{query}")
        items += body["items"]
        page = body["next_page"]
    written = mirror().upsert_changed(team, items)
    gone = mirror().soft_delete_missing(team, {i["id"] for i in items}) if full else 0
    return {"full": full, "fetched": len(items), "written": written, "deleted": gone}


envs = app.freshness(
    "environments",
    sync=sync_environments,
    max_staleness=max_staleness,
    full_every=FULL_EVERY,
    max_backoff=5 * MINUTE,
    timeout=60,
)


def login(team: str) -> dict[str, Any]:
    """The login response: the mirrored environments and how fresh they are. Never waits on
    the upstream; a stale (or never synced) team gets a sync in the background."""
    f = envs.check(f"team:{team}", active=True)
    return {
        "environments": mirror().rows(team),
        "freshness": "current" if f.state == "current" else "stale",
        "lastSyncedAt": None if f.last_synced_at is None else f.last_synced_at.isoformat(),
        "syncing": f.syncing,
    }


def restart_environment(team: str, env_id: str) -> duly.Freshness:
    """A user's mutation upstream, then a confirmation sync of the team (a delta)."""
    url = os.environ.get("UPSTREAM_URL", "http://127.0.0.1:8700")
    request = urllib.request.Request(
        f"{url}/teams/{team}/environments/{env_id}/restart", method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        _note_budget(response.headers)
    return envs.touch(f"team:{team}")


def delete_team(team: str) -> bool:
    """A team deleted on our side: its mirrored rows are soft-deleted and its scope is
    forgotten, so no baseline syncs it again (whether duly knew the scope)."""
    mirror().soft_delete_missing(team, set())
    return envs.forget(f"team:{team}")


def admin_refresh(team: str) -> duly.Freshness:
    """The admin's "refresh now": a full sync even when current."""
    return envs.request(f"team:{team}")


if __name__ == "__main__":  # pragma: no cover - a quick tour against the fake upstream
    import duly.testing
    from examples.environment_sync.upstream import Upstream

    with Upstream() as upstream:
        os.environ["UPSTREAM_URL"] = upstream.url
        for n in range(5):
            upstream.put("acme", f"env-{n}", name=f"env {n}")
        print(login("acme"))
        duly.testing.run_jobs(app)
        print(login("acme"))
