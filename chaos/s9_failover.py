"""9. Failover under load: the Redis primary of the namespace dies while jobs stream in.

Two rows, each on a private topology on loopback ports (``chaos/redis_topologies.py``):

- **cluster**: 3 masters + 3 replicas; the master serving the namespace's slot is SIGKILLed,
  its replica is promoted after the node timeout;
- **sentinel**: one primary, one replica, three sentinels; the primary is SIGKILLed, the
  sentinels promote the replica.

A producer thread enqueues one short job per call, as fast as it can, with durable enqueue
(``?wait_replicas=1&wait_timeout_ms=200``: an enqueue returns once the replica has the job,
docs/scale.md), while
two worker processes drain them. A third of the way in, the primary is killed; once a replica
took over (and at least two seconds later) it is started again, empty (a supervisor's
restart, no persistence), as a replica of the new primary, so durable enqueues can be
confirmed again. Reported: jobs enqueued (calls),
acknowledged (returned), refused (``BackendUnavailable``, ``DurabilityError`` included),
lost (acknowledged, never completed a run), duplicate runs (the runs of jobs the dead
primary had handed out: recovered when their lease lapses, at-least-once) and the time to
resume (from the kill to the end of the first enqueue call the new primary accepted, acked
or not: it includes up to 200 ms of WAIT; the notes add when a replica confirmed one again).
Lost must be 0.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import duly
from chaos import harness as h
from chaos.redis_topologies import LocalCluster, LocalSentinel, _cli

NAME_CLUSTER = "9 cluster failover"
NAME_SENTINEL = "9 sentinel failover"
LEASE = 2.0
RESTART_AFTER = 2.0
#: The producer's WAIT timeout: an unconfirmed enqueue costs this much.
WAIT_MS = 200


def pending_reason(kind: str) -> str | None:
    """Why this scenario does not run on ``kind`` (None: it runs)."""
    if kind != "redis":
        return "Redis only (Cluster and Sentinel)"
    missing = [tool for tool in ("redis-server", "redis-cli") if shutil.which(tool) is None]
    return f"needs {' and '.join(missing)} on PATH" if missing else None


class Producer:
    """Enqueues ``chaos.work(token, 1)`` in a loop (a thread) until ``stop``."""

    def __init__(self, app: duly.App) -> None:
        self.task = app.tasks["chaos.work"]
        self.acked: list[tuple[str, float]] = []  # (token, when)
        self.unconfirmed: list[tuple[str, float]] = []  # DurabilityError: stored, unconfirmed
        self.refused = 0
        self.enqueued = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="s9-producer", daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            tok = h.token()
            self.enqueued += 1
            try:
                self.task.enqueue(tok, 1)
            except duly.DurabilityError:
                self.refused += 1
                self.unconfirmed.append((tok, time.time()))
            except duly.BackendUnavailable:
                self.refused += 1
                time.sleep(0.01)
            else:
                self.acked.append((tok, time.time()))

    def start(self) -> Producer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def _fmt(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:.2f} s"


def _promoted(nodes: LocalCluster | LocalSentinel, namespace: str, old: int) -> None:
    """Wait (at most 30 s) until another node serves the namespace: restarting the old
    primary earlier would bring it back empty (no persistence) as the primary."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if isinstance(nodes, LocalCluster):
                now = nodes.primary_of(f"{{{namespace}}}")
            else:
                now = nodes.current_primary()
        except (RuntimeError, ValueError, IndexError):
            now = old
        if now != old:
            return
        time.sleep(0.1)


def run(kind: str, workdir: Path, short: bool = False, tiny: bool = False) -> list[h.Result]:
    return [
        _failover("cluster", workdir, short, tiny),
        _failover("sentinel", workdir, short, tiny),
    ]


def _failover(topology: str, workdir: Path, short: bool, tiny: bool) -> h.Result:
    load = 5.0 if tiny else 12.0 if short else 30.0
    name = NAME_CLUSTER if topology == "cluster" else NAME_SENTINEL
    result = h.Result(name, "redis", ok=True)
    nodes: LocalCluster | LocalSentinel
    if topology == "cluster":
        nodes = LocalCluster(masters=3, replicas=1).start()
        base = nodes.url
    else:
        nodes = LocalSentinel().start()
        base = nodes.url()
    url = h.fresh_url("redis", workdir, base=base)
    namespace = url.rpartition("namespace=")[2]
    rundir = workdir / f"s9-{topology}"
    try:
        with (
            h.producer(url + f"&wait_replicas=1&wait_timeout_ms={WAIT_MS}") as app,
            h.fleet(url, rundir, concurrency=8, lease=LEASE, grace=5) as fleet,
        ):
            fleet.start(2)
            fleet.wait_registered(app)
            producer = Producer(app).start()
            time.sleep(load / 3)
            if isinstance(nodes, LocalCluster):
                primary = nodes.primary_of(f"{{{namespace}}}")
            else:
                primary = nodes.current_primary()
            nodes.kill(primary)
            killed_at = time.time()
            h.say(f"{name}: primary {primary} killed after {len(producer.acked)} acked")
            _promoted(nodes, namespace, primary)
            time.sleep(max(RESTART_AFTER - (time.time() - killed_at), 0))
            nodes.restart(primary)  # a supervisor's restart (no persistence: empty)
            if isinstance(nodes, LocalSentinel):  # what the sentinels do at their next look
                _cli(primary, "REPLICAOF", "127.0.0.1", str(nodes.current_primary()))
            time.sleep(max(load * 2 / 3 - (time.time() - killed_at), 1.0))
            producer.stop()
            took = h.wait_idle(app, timeout=120)
            result.check(took is not None, "jobs still pending 120 s after the load")
            fleet.stop(app=app)
        runs = h.read_runs(fleet.marks)
        acked = [tok for tok, _ in producer.acked]
        after = [at for _, at in producer.acked if at > killed_at]
        accepted = after + [at for _, at in producer.unconfirmed if at > killed_at]
        result.jobs = len(acked)
        result.enqueued = producer.enqueued
        result.refused = producer.refused
        result.lost = sum(1 for tok in acked if h.completed(runs, tok) == 0)
        result.duplicates = h.duplicates(runs, acked + [tok for tok, _ in producer.unconfirmed])
        result.bound = "-"
        result.recovery = (min(accepted) - killed_at) if accepted else None
        result.check(result.lost == 0, f"{result.lost} acknowledged jobs never ran")
        result.check(bool(accepted), "no enqueue was accepted after the kill")
        result.check(result.refused > 0, "no enqueue was refused while no primary was up")
        unconfirmed_ran = sum(1 for tok, _ in producer.unconfirmed if h.completed(runs, tok))
        durable = f"{min(after) - killed_at:.2f} s" if after else "never"
        result.notes.append(
            f"durable enqueue (wait_replicas=1): writes accepted again {_fmt(result.recovery)} "
            f"after the kill, confirmed by a replica again {durable} after it (the restarted "
            f"node resynced); {len(producer.unconfirmed)} refused as unconfirmed "
            f"(DurabilityError), {unconfirmed_ran} of them ran anyway"
        )
    finally:
        h.drop(url)
        nodes.stop()
    return result
