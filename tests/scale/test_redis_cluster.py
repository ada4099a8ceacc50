"""Redis Cluster beyond the contract suite (which runs on a 3-master cluster as the
``redis-cluster`` kind): the sync API, namespaces spread over the masters, a slot migration
(MOVED/ASK) and a master failover under a running worker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from scale_helpers import (
    Ran,
    WorkerThread,
    enqueue_until_accepted,
    recording_app,
    ride_out_failover,
)

from chaos.redis_topologies import LocalCluster

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("topology_tools")]


@pytest.fixture
def cluster(_local_cluster: str) -> str:
    """This test process's 3-master cluster (shared with the contract suite)."""
    return _local_cluster


@pytest.fixture
def private_cluster() -> Iterator[LocalCluster]:
    """A 3-master cluster of this test's own, for tests that move slots or kill nodes."""
    started = LocalCluster(masters=3).start()
    try:
        yield started
    finally:
        started.stop()


def test_sync_enqueue_and_a_worker_on_a_cluster(cluster: str) -> None:
    ran = Ran()
    app = recording_app(cluster, "cl-sync", ran)
    task = app.tasks["scale.record"]
    try:
        ids = [task.enqueue(n).id for n in range(20)]
        ids += [job.id for job in app.enqueue_many([task.s(n) for n in range(20, 40)])]
        worker = WorkerThread(app).start()
        try:
            assert ran.wait_for(lambda seen: seen >= set(range(40)), 30)
        finally:
            worker.stop()
        assert {app.get_job(i).status for i in ids} == {"succeeded"}  # type: ignore[union-attr]
    finally:
        app._sync((app._sync(app.backend())).drop())
        app.close()


def test_namespaces_spread_over_the_masters(cluster: str) -> None:
    """Each namespace is one slot; different namespaces land on different masters."""
    from redis.cluster import RedisCluster

    from duly.backends.redis._keys import Keyspace

    host, port = cluster.removeprefix("redis+cluster://").split(",")[0].split(":")
    client = RedisCluster(host=host, port=int(port))
    try:
        owners = {client.get_node_from_key(Keyspace(f"tenant{i}").all).name for i in range(12)}
        slots = {client.keyslot(Keyspace("tenant0").job(x)) for x in ("a", "b", "c")}
    finally:
        client.close()
    assert len(owners) == 3, owners
    assert slots == {client.keyslot("{tenant0}")}


def test_a_worker_rides_out_a_slot_migration(private_cluster: LocalCluster) -> None:
    """The namespace's slot moves to another master while a worker runs: the client follows
    ASK/MOVED (a script meeting a half-moved slot gets TRYAGAIN and is retried) and every job
    is done exactly as if nothing happened."""
    from redis.cluster import RedisCluster

    ran = Ran()
    app = recording_app(private_cluster.url, "cl-move", ran, ms=5)
    task = app.tasks["scale.record"]
    first = [job.id for job in app.enqueue_many([task.s(n) for n in range(300)])]
    source = private_cluster.primary_of("{cl-move}")
    target = next(p for p in private_cluster.ports if p != source)
    client = RedisCluster(host="127.0.0.1", port=source)
    slot = client.keyslot("{cl-move}")
    client.close()
    worker = WorkerThread(app, concurrency=4).start()
    try:
        assert ran.wait_for(lambda seen: len(seen) >= 50, 30)
        private_cluster.migrate_slot(slot, target)
        assert private_cluster.primary_of("{cl-move}") == target
        later = [enqueue_until_accepted(task, n)[0] for n in range(300, 320)]
        assert ran.wait_for(lambda seen: seen >= set(range(320)), 60), "jobs not done"
    finally:
        worker.stop()
    assert {app.get_job(i).status for i in first + later} == {"succeeded"}  # type: ignore[union-attr]
    app.close()


@pytest.mark.timeout(180)
def test_a_worker_rides_out_a_master_failover() -> None:
    """3 masters + 3 replicas: the namespace's primary is SIGKILLed mid-run, its replica takes
    over. Every job acknowledged before the kill (and replicated: replication is asynchronous,
    see docs/scale.md) and every job acknowledged after it runs; enqueue raises
    BackendUnavailable only while no primary serves the slot."""
    cluster = LocalCluster(masters=3, replicas=1).start()
    ran = Ran()
    app = recording_app(cluster.url, "cl-fail", ran, ms=5)
    try:
        primary = cluster.primary_of("{cl-fail}")
        refused, accepted_after = ride_out_failover(
            app, ran, lambda: cluster.wait_replicated(primary), lambda: cluster.kill(primary)
        )
        assert cluster.primary_of("{cl-fail}") != primary
        print(f"failover: enqueue refused {refused} times, accepted {accepted_after:.1f}s after")
    finally:
        app.close()
        cluster.stop()
