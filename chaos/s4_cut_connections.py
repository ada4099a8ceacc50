"""4. Cut connections: every 0.2-0.6 s, every client connection to the server is killed.

Redis: ``CLIENT KILL TYPE normal`` and ``TYPE pubsub`` on a private server. PostgreSQL:
``pg_terminate_backend`` of every other client backend of a private cluster. Jobs run 50-500 ms,
so most cuts land mid-job, mid-claim or mid-finish. Every job must reach exactly one outcome:
it completes (marks), ends ``succeeded``, the per-minute ``succeeded`` counter equals the
number of jobs (one outcome each), and no job is run twice (a cut is instantaneous, far
shorter than the lease, so no running job should be recovered). No worker may exit.

A claim whose reply is lost to a cut (redis-py re-sends the script; a PostgreSQL commit whose
acknowledgement never arrives) leaves its jobs held by a live worker that never saw them. They
are recovered after the lease with ``lost + 1`` and ``attempts + 1`` and then run once. That is
still exactly one run and one outcome, so it does not fail the row. It is reported in the notes
(``ACCEPTED: ...``). Any other ``attempts != 1`` fails the row.
SQLite has no connection to cut: not applicable.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

from chaos import harness as h
from chaos.servers import PrivatePostgres, PrivateRedis

NAME = "4 cut connections"


def pending_reason(kind: str) -> str | None:
    if kind == "sqlite":
        return "n/a: an embedded file has no connection to cut"
    if kind == "postgres":
        return PrivatePostgres.available()
    return None


def _cutter(
    kind: str, server: PrivateRedis | PrivatePostgres, stop: threading.Event, counts: list[int]
) -> None:
    if kind == "redis":
        import redis

        client = redis.Redis(port=server.port, socket_timeout=5)
        while not stop.wait(h.jitter(0.2, 0.6)):
            try:
                n = client.client_kill_filter(_type="normal", skipme=True)
                n += client.client_kill_filter(_type="pubsub", skipme=True)
                counts[0] += 1
                counts[1] += int(n)
            except redis.RedisError:
                client = redis.Redis(port=server.port, socket_timeout=5)
        client.close()
    else:
        import psycopg

        conn = psycopg.connect(server.url, autocommit=True)
        while not stop.wait(h.jitter(0.2, 0.6)):
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
            ).fetchall()
            counts[0] += 1
            counts[1] += len(rows)
        conn.close()


def run(kind: str, workdir: Path, short: bool = False) -> h.Result:
    result = h.Result(NAME, kind, ok=True, bound=0)
    server: PrivateRedis | PrivatePostgres
    if kind == "redis":
        server = PrivateRedis(workdir / "s4-redis")
        server.start()
    else:
        server = PrivatePostgres(workdir / "s4-postgres")
        server.init()
        server.start()
    url = h.fresh_url(kind, workdir, base=server.url)
    n = 300 if short else 1_000
    stop = threading.Event()
    counts = [0, 0]
    try:
        with (
            h.producer(url) as app,
            h.fleet(url, workdir / f"s4-{kind}", concurrency=8, lease=5.0, grace=5) as fleet,
        ):
            tokens = [h.token() for _ in range(n)]

            def per_job() -> tuple[int]:
                return (random.randint(50, 500),)

            ids = h.enqueue_tokens(app, "chaos.work", tokens[: n // 2], per_job=per_job)
            ids |= h.enqueue_tokens(app, "chaos.awork", tokens[n // 2 :], per_job=per_job)
            workers = fleet.start(3)
            fleet.wait_registered(app)
            cutter = threading.Thread(
                target=_cutter, args=(kind, server, stop, counts), daemon=True
            )
            cutter.start()
            took = h.wait_idle(app, timeout=150)
            stop.set()
            cutter.join(10)
            result.check(took is not None, "jobs still pending after 150 s of cuts")
            exited = [(pid, code) for pid, (code, _) in fleet.exits.items()]
            result.check(
                not exited and set(fleet.alive()) == set(workers), f"workers exited: {exited}"
            )
            fleet.stop(app=app)
            jobs = h.all_jobs(app)
            stats = app.stats(10)
            tracebacks = fleet.log_count("Traceback")
        runs = h.read_runs(fleet.marks)
        result.jobs = n
        result.lost = sum(1 for t in tokens if h.completed(runs, t) == 0)
        result.duplicates = h.duplicates(runs, tokens)
        not_ok = [t for t in tokens if ids[t] not in jobs or jobs[ids[t]].status != "succeeded"]
        succeeded = sum(row.succeeded for row in stats)
        failed = sum(row.failed for row in stats)
        # A claim whose reply a cut swallowed leaves its jobs held by a live worker that never
        # heard of them: they are recovered after the lease with lost + 1 and attempts + 1,
        # then run once. One run and one outcome: what issue 3 asks. Reported, not failed.
        # (Jobs that did not succeed already fail the row above.)
        charged = [
            jobs[ids[t]]
            for t in tokens
            if t not in not_ok and ids[t] in jobs and jobs[ids[t]].attempts != 1
        ]
        phantom = [i for i in charged if i.lost >= 1 and i.attempts == 1 + i.lost]
        odd = [(i.status, i.attempts, i.lost) for i in charged if i not in phantom]
        result.check(result.lost == 0, f"{result.lost} jobs never completed")
        statuses = sorted({jobs[ids[t]].status for t in not_ok if ids[t] in jobs})
        result.check(not not_ok, f"{len(not_ok)} jobs not succeeded: {statuses}")
        result.check(
            succeeded == n and failed == 0,
            f"outcome counters: {succeeded} succeeded, {failed} failed for {n} jobs",
        )
        result.check(result.duplicates == 0, f"{result.duplicates} duplicate runs")
        result.check(not odd, f"{len(odd)} jobs with attempts != 1 + lost: {odd[:4]}")
        if phantom:
            result.notes.append(
                f"ACCEPTED: {len(phantom)} jobs charged a claim lost to a cut "
                f"(attempts {sorted({i.attempts for i in phantom})}, lost "
                f"{sorted({i.lost for i in phantom})}, one run and one outcome each; "
                "recovered after the lease)"
            )
        result.notes.append(
            f"{counts[0]} cuts, {counts[1]} connections killed; "
            f"{tracebacks} tracebacks in worker logs"
        )
    finally:
        stop.set()
        h.drop(url)
        server.stop()
    return result
