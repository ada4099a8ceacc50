"""3. Backend restart mid-load; for SQLite, processes SIGKILLed mid-write.

Redis: a private ``redis-server`` (``appendonly yes``, ``appendfsync everysec``, own port and
dir) is SIGKILLed mid-load and started again on the same AOF. PostgreSQL: a private cluster
(own port, own data dir) is stopped ``-m immediate`` (crash; WAL replay) and started again.
A producer keeps enqueueing throughout; only jobs whose ``enqueue`` returned count as
acknowledged. Every acknowledged job must complete and end ``succeeded``; no worker may exit
(they reconnect with backoff); duplicate runs are bounded by the jobs in flight at the restart.
Recovery = server back up -> first job started after it.

SQLite: workers *and producer processes* are SIGKILLed every 0.2-0.7 s while they commit as
fast as they can; afterwards ``PRAGMA integrity_check`` must say ``ok`` and every job a
producer saw acknowledged must have completed.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import duly
from chaos import harness as h
from chaos.servers import PrivatePostgres, PrivateRedis

NAME = "3 backend restart"
NAME_SQLITE = "3 sqlite: kill mid-write"


def pending_reason(kind: str) -> str | None:
    if kind == "postgres":
        return PrivatePostgres.available()
    return None


def run(kind: str, workdir: Path, short: bool = False) -> h.Result:
    if kind == "sqlite":
        return _sqlite(workdir, short)
    return _restart(kind, workdir, short)


def _restart(kind: str, workdir: Path, short: bool) -> h.Result:
    result = h.Result(NAME, kind, ok=True)
    server: PrivateRedis | PrivatePostgres
    if kind == "redis":
        server = PrivateRedis(workdir / "s3-redis")
        server.start()
    else:
        server = PrivatePostgres(workdir / "s3-postgres")
        server.init()
        server.start()
    url = h.fresh_url(kind, workdir, base=server.url)
    lease, downtime = 10.0, 3.0
    load = 6.0 if short else 12.0
    acked: dict[str, str] = {}
    refused = 0
    stop = threading.Event()
    try:
        with (
            h.producer(url) as app,
            h.fleet(url, workdir / f"s3-{kind}", concurrency=8, lease=lease, grace=5) as fleet,
        ):
            app.ping()

            def produce() -> None:
                nonlocal refused
                task = app.tasks["chaos.awork"]
                while not stop.is_set():
                    toks = [h.token() for _ in range(10)]
                    try:
                        jobs = app.enqueue_many([task.s(t, random.randint(20, 200)) for t in toks])
                    except duly.BackendUnavailable:
                        refused += 1
                        time.sleep(0.1)
                        continue
                    acked.update({t: j.id for t, j in zip(toks, jobs, strict=True)})
                    time.sleep(0.05)

            thread = threading.Thread(target=produce, daemon=True)
            thread.start()
            workers = fleet.start(3)
            fleet.wait_registered(app)
            time.sleep(load / 2)
            h.say(f"{NAME}/{kind}: restarting the server ({len(acked)} acknowledged so far)")
            down_at = time.time()
            server.kill() if isinstance(server, PrivateRedis) else server.crash()
            time.sleep(downtime)
            server.start()
            up_at = time.time()
            h.say(f"{NAME}/{kind}: server back after {up_at - down_at:.1f}s")
            time.sleep(load / 2)
            stop.set()
            thread.join(30)
            took = h.wait_idle(app, timeout=90)
            result.check(took is not None, "jobs still pending 90 s after the restart")
            exited = [(pid, code) for pid, (code, _) in fleet.exits.items()]
            result.check(not exited, f"workers exited during the outage: {exited}")
            result.check(set(fleet.alive()) == set(workers), "a worker died")
            fleet.stop(app=app)
            jobs = h.all_jobs(app)
            unavailable = fleet.log_count("unavailable")
            tracebacks = fleet.log_count("Traceback")
        runs = h.read_runs(fleet.marks)
        tokens = list(acked)
        result.jobs = len(tokens)
        result.lost = sum(1 for t in tokens if h.completed(runs, t) == 0)
        result.duplicates = h.duplicates(runs, tokens)
        exposed: set[str] = set()
        for pid in workers:
            exposed |= h.in_flight(runs, pid, down_at)
        result.bound = len(exposed)
        after = [r.start for rs in runs.values() for r in rs if r.start > up_at]
        result.recovery = (min(after) - up_at) if after else None
        result.recovery_bound = 10.0  # the workers' reconnect backoff cap
        not_ok = [t for t in tokens if acked[t] not in jobs or jobs[acked[t]].status != "succeeded"]
        result.check(result.lost == 0, f"{result.lost} acknowledged jobs never completed")
        result.check(not not_ok, f"{len(not_ok)} acknowledged jobs not succeeded")
        result.check(
            result.duplicates <= result.bound,
            f"{result.duplicates} duplicate runs > {result.bound}",
        )
        result.check(
            result.recovery is not None and result.recovery <= result.recovery_bound,
            "no job ran after the restart in time",
        )
        result.notes.append(
            f"down {up_at - down_at:.1f}s; {refused} enqueues refused (BackendUnavailable); "
            f"{unavailable} 'unavailable' warnings, {tracebacks} tracebacks in worker logs"
        )
    finally:
        stop.set()
        h.drop(url)
        server.stop()
    return result


_PRODUCER = r"""
import os, sys, random, time, uuid
from chaos.tasks import make_app
app = make_app(os.environ["DULY_URL"])
task = app.tasks["chaos.work"]
acks = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
while True:
    toks = [uuid.uuid4().hex[:16] for _ in range(20)]
    app.enqueue_many([task.s(t, 0) for t in toks])
    os.write(acks, "".join(t + "\n" for t in toks).encode())  # only after enqueue returned
    time.sleep(0.1)
"""


def _sqlite(workdir: Path, short: bool) -> h.Result:
    result = h.Result(NAME_SQLITE, "sqlite", ok=True)
    url = h.fresh_url("sqlite", workdir)
    db_path = url[len("sqlite:///") :]
    rundir = workdir / "s3-sqlite"
    storm = 6.0 if short else 20.0
    ackfile = rundir / "acked.txt"
    env = dict(os.environ, DULY_URL=url, PYTHONPATH=str(h.ROOT))
    producers: list[subprocess.Popen[bytes]] = []
    kills = {"worker": 0, "producer": 0}
    caught: dict[int, set[str]] = {}
    with h.producer(url) as app, h.fleet(url, rundir, concurrency=16, lease=2.0, grace=5) as fleet:
        app.ping()  # creates the schema

        def new_producer() -> None:
            producers.append(
                subprocess.Popen(
                    [h.PYTHON, "-c", _PRODUCER, str(ackfile)],
                    cwd=h.ROOT,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )

        try:
            workers = fleet.start(4)
            new_producer()
            new_producer()
            fleet.wait_registered(app)
            end = time.monotonic() + storm
            while time.monotonic() < end:
                time.sleep(h.jitter(0.2, 0.7))
                fleet.reap()
                if random.random() < 0.7:
                    pid = random.choice(fleet.alive())
                    fleet.kill(pid)
                    caught[pid] = h.held_by(app, pid)
                    fleet.spawn()
                    kills["worker"] += 1
                else:
                    victim = producers.pop(random.randrange(len(producers)))
                    victim.send_signal(signal.SIGKILL)
                    victim.wait()
                    new_producer()
                    kills["producer"] += 1
        finally:
            for p in producers:
                p.send_signal(signal.SIGKILL)
                p.wait()
        h.say(f"{NAME_SQLITE}: {kills} SIGKILLs; draining")
        took = h.wait_idle(app, timeout=120)
        result.check(took is not None, "jobs still pending 120 s after the storm")
        crashed = [
            pid for pid, (code, _) in fleet.exits.items() if pid not in fleet.killed and code != 0
        ]
        result.check(not crashed, f"workers exited on their own: {crashed}")
        fleet.stop(app=app)
    del workers
    check = sqlite3.connect(db_path)
    integrity = check.execute("PRAGMA integrity_check").fetchall()
    statuses = dict(check.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall())
    check.close()
    result.check(integrity == [("ok",)], f"integrity_check: {integrity[:3]}")
    runs = h.read_runs(fleet.marks)
    tokens = ackfile.read_text().split() if ackfile.exists() else []
    result.jobs = len(tokens)
    result.lost = sum(1 for t in tokens if h.completed(runs, t) == 0)
    result.duplicates = h.duplicates(runs, tokens)
    result.bound = sum(
        len(caught.get(pid, set()) | h.in_flight(runs, pid, at)) for pid, at in fleet.killed.items()
    )
    bad = h.unexplained_reruns(runs, tokens, set(fleet.killed))
    result.check(result.lost == 0, f"{result.lost} acknowledged jobs never completed")
    result.check(
        result.duplicates <= result.bound, f"{result.duplicates} duplicate runs > {result.bound}"
    )
    result.check(bad == 0, f"{bad} re-runs after a run in a process that was NOT killed")
    result.check(set(statuses) <= {"succeeded"}, f"statuses {statuses}")
    result.notes.append(
        f"{kills['worker']} worker + {kills['producer']} producer SIGKILLs; integrity_check "
        f"{integrity[0][0]}; {sum(statuses.values())} jobs stored (incl. unacknowledged)"
    )
    return result
