"""Backstroke's link operations (seed 003) in duly.

Backstroke keeps forks in sync with their upstream. Each "link operation" compares an upstream
branch with a fork and opens a pull request when they differ. The original design kept, by hand
in Redis: a queue of operations, each operation's status under its id for 24 h, success/error
counters, and a per-link sorted set of operation ids. In duly each of those is one line:

- the queue and the status by id: ``sync_link.enqueue(...)`` and ``app.get_job(op_id)``;
- 24 h of status: ``retention=timedelta(hours=24)`` on the task (failed ones are kept 7 days);
- the per-link history, newest first, never scanning other links: ``key=f"link:{id}"`` and
  ``app.jobs(key=...)``;
- success and error counters: ``app.stats()`` (per-minute buckets, 24 h).

The HTTP face (``http.py``): the status route, the per-link list, the counters and a secret
webhook per link, served by ``app.asgi()``; the user's GitHub token rides as a ``secret=``
argument.

Run it: ``python -m examples.operations.app`` (add DULY_URL to use Redis or PostgreSQL).
"""

from __future__ import annotations

import os
import random
from datetime import timedelta
from typing import Any

import duly
import duly.testing

app = duly.App(os.environ.get("DULY_URL", "sqlite:///operations.db"))


class UpstreamMissing(Exception):
    """The link's upstream repository does not exist (any more)."""


@app.task(
    name="backstroke.sync_link",
    retries=2,
    backoff=duly.Backoff(base=0.2, cap=1),
    retry_on=(ConnectionError,),
    retention=timedelta(hours=24),
    secret=("access_token",),  # "***" in the API, the dashboard, the CLI and the logs
)
def sync_link(
    link: dict[str, Any], kind: str = "AUTOMATIC", access_token: str = ""
) -> dict[str, Any]:
    """Compare the link's upstream with its fork (as the link's owner, with their GitHub
    ``access_token``); 'open a pull request' when they differ."""
    if not link.get("upstream"):
        raise UpstreamMissing(f"link {link['id']}: upstream repository is gone")
    if link.get("flaky") and duly.current_job().attempt == 1:
        raise ConnectionError("GitHub API timed out")
    behind = random.Random(link["id"]).randint(0, 3)
    return {
        "link": link["id"],
        "kind": kind,
        "pull_request": f"{link['fork']}#pr-{link['id']}" if behind else None,
        "commits_behind": behind,
    }


def start_operation(link: dict[str, Any], kind: str = "MANUAL") -> str:
    """Enqueue a link operation; its id is the operation id."""
    return sync_link.options(key=f"link:{link['id']}").enqueue(link, kind).id


def operation_status(operation_id: str) -> dict[str, Any] | None:
    """What ``GET /v1/operations/:id`` returned: status, times, output — or None."""
    info = app.get_job(operation_id)
    return None if info is None else status_of(info)


def status_of(info: duly.JobInfo) -> dict[str, Any]:
    """An operation's job in Backstroke's ``/v1/operations/:id`` shape."""
    return {
        "status": {"succeeded": "OK", "failed": "ERROR"}.get(info.status, info.status.upper()),
        "startedAt": info.started_at.isoformat() if info.started_at else None,
        "finishedAt": info.finished_at.isoformat() if info.finished_at else None,
        "output": info.result if info.status == "succeeded" else info.error,
        "link": info.args[0]["id"] if info.args else None,
    }


def link_history(link_id: int, limit: int = 20) -> list[dict[str, Any]]:
    """The operations of one link, newest first."""
    return [
        {"id": info.id, "status": info.status, "enqueuedAt": info.enqueued_at.isoformat()}
        for info in app.jobs(key=f"link:{link_id}", limit=limit)
    ]


def counters(minutes: int = 1440) -> dict[str, int]:
    """Successful and failed operations in the last ``minutes`` (default 24 h)."""
    rows = [r for r in app.stats(minutes) if r.task == sync_link.name]
    return {
        "successes": sum(r.succeeded for r in rows),
        "errors": sum(r.failed for r in rows),
        "retries": sum(r.retried for r in rows),
    }


def main() -> None:
    links = [
        {"id": 456, "upstream": "octo/widget", "fork": "me/widget"},
        {"id": 457, "upstream": "octo/gadget", "fork": "me/gadget", "flaky": True},
        {"id": 458, "upstream": None, "fork": "me/orphan"},
    ]
    ops = [start_operation(link, "AUTOMATIC") for link in links]
    ops.append(start_operation(links[0], "MANUAL"))
    duly.testing.run_jobs(app, ops, concurrency=4)  # in production: duly worker ...
    for op in ops:
        print(op, operation_status(op))
    print("link 456 history:", link_history(456))
    print("counters:", counters())


if __name__ == "__main__":
    main()
