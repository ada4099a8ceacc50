"""Durable enqueue (``?wait_replicas=N``, src/duly/backends/redis/durable.py): an enqueue
returns once N replicas hold its jobs, or raises ``DurabilityError`` when fewer confirmed.

Checked on the replica itself: right after the call returns, the replica has the job (WAIT
made the primary wait for its acknowledgement), on one primary with a replica and on a
cluster's namespace slot.
"""

from __future__ import annotations

import asyncio
from uuid import uuid4

import pytest
import redis
from services import require_service

import duly
from chaos.redis_topologies import LocalCluster, LocalSentinel, _cli, _fields

pytestmark = pytest.mark.timeout(120)


def _app(url: str) -> tuple[duly.App, duly.Task[[int], int]]:
    app = duly.App(url, namespace=f"t{uuid4().hex[:10]}")

    @app.task(name="durable.double")
    def double(n: int) -> int:
        return 2 * n

    return app, double


def _on(port: int, namespace: str, job_id: str) -> bool:
    """Whether the server on ``port`` (a replica: reads allowed) holds the job now."""
    client = redis.Redis(port=port)
    try:
        if _cluster_node(client):
            client.execute_command("READONLY")
        return bool(client.exists(f"{{{namespace}}}:j:{job_id}"))
    finally:
        client.close()


def _cluster_node(client: redis.Redis) -> bool:
    return bool(client.info("cluster").get("cluster_enabled"))


def test_every_enqueue_returns_once_the_replica_has_it(sentinel: LocalSentinel) -> None:
    app, double = _app(f"redis://127.0.0.1:{sentinel.primary}/0?wait_replicas=1")
    try:
        ids = [double.enqueue(1).id]
        ids += [job.id for job in app.enqueue_many([double.s(n) for n in range(2, 700)])]
        ids.append(app._sync(double.enqueue_async(700)).id)
        for job_id in ids:  # no waiting here: the replica must have them already
            assert _on(sentinel.replica, app.namespace, job_id), job_id
        _cli(sentinel.primary, "SCRIPT", "FLUSH")  # as on a restarted or promoted primary
        again = [double.enqueue(701).id, app._sync(double.enqueue_async(702)).id]
        assert all(_on(sentinel.replica, app.namespace, i) for i in again)
    finally:
        app.close()


def test_fewer_replicas_than_asked_raise_durability_error(sentinel: LocalSentinel) -> None:
    url = f"redis://127.0.0.1:{sentinel.primary}/0?wait_replicas=2&wait_timeout_ms=50"
    app, double = _app(url)
    try:
        with pytest.raises(duly.DurabilityError) as refused:
            double.enqueue(1)
        assert (refused.value.acked, refused.value.wanted) == (1, 2)
        assert "1 of 2 replicas confirmed the enqueue within 50 ms" in str(refused.value)
        assert isinstance(refused.value, duly.BackendUnavailable)
        with pytest.raises(duly.DurabilityError):
            app._sync(double.enqueue_async(2))
        # The jobs are on the primary all the same (only not known to be safe).
        assert len(app.jobs(limit=10)) == 2
    finally:
        app.close()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("sqlite:///x.db?wait_replicas=1", "is a Redis option"),
        ("redis://127.0.0.1:6379/0?wait_replicas=0", "wait_replicas must be a whole number"),
        ("redis://127.0.0.1:6379/0?wait_replicas=x", "wait_replicas must be a whole number"),
        ("redis://127.0.0.1:6379/0?wait_replicas=1&wait_timeout_ms=-1", "wait_timeout_ms"),
        ("redis://127.0.0.1:6379/0?wait_timeout_ms=10", "needs wait_replicas"),
    ],
)
def test_a_bad_durability_option_fails_at_once(url: str, problem: str) -> None:
    with pytest.raises(duly.ConfigurationError, match=problem):
        duly.App(url)


def test_durable_enqueue_on_a_cluster_waits_for_the_slots_replica() -> None:
    require_service("redis-cluster")
    cluster = LocalCluster(masters=3, replicas=1).start()
    try:
        app, double = _app(cluster.url + "/?wait_replicas=1")
        namespace = app.namespace
        primary_port = cluster.primary_of(f"{{{namespace}}}")
        info = _fields(_cli(primary_port, "INFO", "replication"))
        replica = int(dict(kv.split("=") for kv in info["slave0"].split(","))["port"])
        try:
            ids = [double.enqueue(1).id, app._sync(double.enqueue_async(2)).id]
            ids += [job.id for job in app.enqueue_many([double.s(n) for n in range(3, 30)])]
            assert all(_on(replica, namespace, i) for i in ids)
            worker = app.worker(install_signal_handlers=False, burst=True, lease=2)
            asyncio.run(_run(app, worker))
            assert {app.get_job(i).status for i in ids} == {"succeeded"}  # type: ignore[union-attr]
        finally:
            app.close()
    finally:
        cluster.stop()


async def _run(app: duly.App, worker: duly.Worker) -> None:
    try:
        await worker.run()
    finally:
        await app.aclose()


def test_a_chain_waits_for_replicas_too() -> None:
    # A lone Redis has no replica: a durable enqueue of dependents must say so.
    require_service("redis")
    app, double = _app("redis://127.0.0.1:6379/0?wait_replicas=1&wait_timeout_ms=20")
    try:
        with pytest.raises(duly.DurabilityError):
            app.chain(double.s(3), double.s())
        assert len(app.jobs(limit=10)) == 2  # stored, only not known to be safe
    finally:
        app.close()
