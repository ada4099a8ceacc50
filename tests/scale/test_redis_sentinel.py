"""Redis Sentinel (``redis+sentinel://``): one primary, one replica and three sentinels on
loopback ports (``chaos.redis_topologies.LocalSentinel``). Sync and async callers reach the
primary the sentinels name, and a worker rides out a failover."""

from __future__ import annotations

import pytest
from scale_helpers import (
    Ran,
    WorkerThread,
    recording_app,
    ride_out_failover,
)

from chaos.redis_topologies import LocalSentinel, _cli

pytestmark = pytest.mark.timeout(120)


def _keys(port: int, namespace: str) -> set[str]:
    return set(_cli(port, "KEYS", f"{{{namespace}}}:*").split())


def test_sync_and_async_enqueue_reach_the_sentinels_primary(sentinel: LocalSentinel) -> None:
    """A blocking enqueue once went to 127.0.0.1:6379 instead of the sentinels' primary: its
    connection never asked them. Both twins land on the primary (and nowhere else)."""
    ran = Ran()
    app = recording_app(sentinel.url(), "sn-route", ran)
    task = app.tasks["scale.record"]
    try:
        sync_job = task.enqueue(1)
        async_job = app._sync(task.enqueue_async(2))
        stored = _keys(sentinel.primary, "sn-route")
        assert f"{{sn-route}}:j:{sync_job.id}" in stored
        assert f"{{sn-route}}:j:{async_job.id}" in stored
        worker = WorkerThread(app).start()
        try:
            assert ran.wait_for(lambda seen: seen >= {1, 2}, 30)
        finally:
            worker.stop()
    finally:
        app.close()


@pytest.mark.timeout(180)
def test_a_worker_rides_out_a_sentinel_failover(sentinel: LocalSentinel) -> None:
    """The primary is SIGKILLed under a running worker; the sentinels promote the replica.
    Enqueue raises BackendUnavailable during the switch and succeeds after it, the worker
    reconnects to the new primary, and every job enqueued (and replicated) before the kill
    or accepted after it runs: nothing acknowledged is lost."""
    ran = Ran()
    app = recording_app(sentinel.url(), "sn-fail", ran, ms=5)
    old = sentinel.primary
    try:
        refused, accepted_after = ride_out_failover(
            app, ran, sentinel.wait_replicated, lambda: sentinel.kill(old)
        )
    finally:
        app.close()
    assert sentinel.current_primary() == sentinel.replica
    assert refused > 0, "no enqueue was refused while no primary was up"
    print(f"sentinel failover: enqueue refused {refused} times, ok {accepted_after:.1f}s after")
