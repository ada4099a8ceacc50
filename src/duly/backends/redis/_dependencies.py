"""Dependencies on Redis: storing dependents (``enqueue_after.lua``, one call per batch) and the
reads. Releasing and cancelling them happens in the scripts that end a job (finish, recover,
cancel), through ``lua/_dependencies.lua``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from duly._errors import ConfigurationError, JobNotFound
from duly._records import EnqueueResult, NewJob
from duly.backends.dependencies import MAX_DEPTH, too_deep
from duly.backends.redis._scripts import Value, opt

if TYPE_CHECKING:
    from duly.backends.redis._connection import RedisConnection

__all__ = ["RedisDependencies"]


def _args(
    jobs: Sequence[NewJob], retention: float, now: float, prefix: str, wake: str
) -> list[Value]:
    """enqueue_after.lua's ARGV (see its header)."""
    args: list[Value] = [prefix, wake, float(retention), now, MAX_DEPTH]
    for job in jobs:
        args += (
            job.id,
            job.task,
            job.queue,
            job.max_attempts,
            job.key or "",
            job.priority,
            float(job.enqueued_at),
            float(job.scheduled_for),
            job.payload,
            job.unique_key or "",
            job.unique_until,
            opt(job.unique_expires_at),
            job.gate or "",
            job.gate_limit,
            job.pipe_from or "",
            opt(job.expires_at),
            len(job.after),
            *job.after,
        )
    return args


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisDependencies:
    """``duly.backends.dependencies.DependencyStore`` on Redis (``backend.dependencies``)."""

    def __init__(self, conn: RedisConnection) -> None:
        self._conn = conn

    async def enqueue(self, jobs: Sequence[NewJob], retention: float) -> list[EnqueueResult]:
        """Store ``jobs`` and their waits in one script call."""
        if not jobs:
            return []
        c, k = self._conn, self._conn.keys
        now = float(max(job.enqueued_at for job in jobs))
        keys = (k.due, k.all, k.queues, k.queue_counts, k.unique)
        args = _args(jobs, retention, now, k.prefix, k.wake)
        with c.guard("enqueue_after"):
            if c.durability is None:
                reply = await c.call(c.scripts.enqueue_after, keys, args)
            else:  # ?wait_replicas=: the call then WAIT on one connection (_durable.py)
                [reply] = await c.durability.enqueue(
                    c.client, c.scripts.enqueue_after, keys, [args], c.safe_url
                )
        if reply and _text(reply[0]) == "?":
            raise JobNotFound(f"after=: no job {_text(reply[1])!r}")
        if reply and _text(reply[0]) == "!":
            raise ConfigurationError(too_deep(_text(reply[1]), int(reply[2])))
        results = []
        for job, found in zip(jobs, reply, strict=True):
            other = _text(found)
            stored = EnqueueResult(job.id)
            results.append(EnqueueResult(other, deduplicated=True) if other else stored)
        return results

    async def dependents(self, job_id: str) -> list[str]:
        """The jobs that wait (or waited) for ``job_id``."""
        c = self._conn
        with c.guard("dependents"):
            members = await c.client.smembers(f"{c.keys.prefix}da:{job_id}")
        return sorted(_text(m) for m in cast(set[Any], members))

    async def input(self, job_id: str) -> bytes | None:
        """A chain step's input (its dependency's result), or None."""
        c = self._conn
        with c.guard("dependency_input"):
            value = await c.client.hget(c.keys.job(job_id), "ai")
        return None if value is None else bytes(cast(bytes, value))
