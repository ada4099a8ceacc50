"""6. Poison input: corrupt payloads written straight into storage, unknown task names,
oversized and unserializable arguments.

Jobs are enqueued before any worker starts; then the payloads of some are overwritten in the
storage itself (SQL ``UPDATE``, Redis ``HSET``), bypassing duly. A producer with a task the
workers do not know enqueues a few more. Each poison job must end ``failed`` after one attempt
with a clear reason ("corrupt job payload", "unknown task"); every other job ``succeeded``
with ``attempts == 1``; no worker exits. Oversized / unserializable arguments must be refused at
enqueue with a clear error and store nothing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from chaos import harness as h

NAME = "6 poison input"

CORRUPT = [
    b"\x00\xff\xfe garbage",
    b"{not json",
    b"[1, 2, 3]",
    b'{"args": 5, "kwargs": {}}',
    b"",
    b'{"args": [], "kwargs": []}',
]


def _overwrite(url: str, job_id: str, payload: bytes) -> None:
    """Write a payload into the storage without going through duly."""
    base, _, query = url.partition("?")
    ns = query.partition("namespace=")[2].split("&")[0]
    if url.startswith("sqlite"):
        db = sqlite3.connect(base[len("sqlite:///") :])
        db.execute("UPDATE jobs SET payload = ? WHERE id = ?", (payload, job_id))
        db.commit()
        db.close()
    elif url.startswith("redis"):
        import redis

        client = redis.Redis.from_url(base)
        assert client.hset(f"{{{ns}}}:j:{job_id}", "p", payload) == 0
        client.close()
    else:
        import psycopg

        with psycopg.connect(base, autocommit=True) as conn:
            cur = conn.execute(
                f'UPDATE "{ns}".jobs SET payload = %s WHERE id = %s', (payload, job_id)
            )
            assert cur.rowcount == 1


def run(kind: str, workdir: Path, short: bool = False) -> h.Result:
    result = h.Result(NAME, kind, ok=True, bound=0)
    url = h.fresh_url(kind, workdir)
    try:
        with (
            h.producer(url, max_payload_bytes=64 * 1024) as app,
            h.fleet(url, workdir / f"s6-{kind}", concurrency=8, lease=2.0, grace=2) as fleet,
        ):
            normal = [h.token() for _ in range(200 if short else 600)]
            ids = h.enqueue_tokens(app, "chaos.work", normal[::2], 5)
            ids |= h.enqueue_tokens(app, "chaos.awork", normal[1::2], 5)
            corrupt_toks = [h.token() for _ in CORRUPT]
            corrupt_ids = h.enqueue_tokens(app, "chaos.work", corrupt_toks, 5)
            for tok, payload in zip(corrupt_toks, CORRUPT, strict=True):
                _overwrite(url, corrupt_ids[tok], payload)
            unknown_toks = [h.token() for _ in range(3)]
            unknown_ids = h.enqueue_tokens(app, "chaos.unknown_to_workers", unknown_toks)
            refused = {}
            for label, arg in (("oversized", "x" * (100 * 1024)), ("unserializable", object())):
                try:
                    app.tasks["chaos.work"].enqueue(h.token(), 0, arg)
                    refused[label] = "ACCEPTED"
                except Exception as exc:
                    refused[label] = f"{type(exc).__name__}: {str(exc)[:80]}"
            stored_before = sum(sum(x) for x in [h.queue_totals(app)])
            workers = fleet.start(2)
            took = h.wait_idle(app, timeout=60)
            result.check(took is not None, "jobs still pending after 60 s")
            result.check(set(fleet.alive()) == set(workers), f"workers exited: {fleet.exits}")
            fleet.stop(app=app)
            jobs = h.all_jobs(app)
        result.jobs = len(normal) + len(corrupt_toks) + len(unknown_toks)
        runs = h.read_runs(fleet.marks)
        result.lost = sum(1 for t in normal if h.completed(runs, t) == 0)
        result.duplicates = h.duplicates(runs, normal)
        result.check(
            len(jobs) == result.jobs and stored_before == result.jobs,
            f"{len(jobs)} jobs stored, expected {result.jobs}",
        )
        bad = [
            t
            for t in normal
            if jobs.get(ids[t]) is None
            or jobs[ids[t]].status != "succeeded"
            or jobs[ids[t]].attempts != 1
        ]
        result.check(not bad, f"{len(bad)} normal jobs touched")
        reasons = []
        for job_id, needle in [(corrupt_ids[t], "corrupt job payload") for t in corrupt_toks] + [
            (unknown_ids[t], "unknown task") for t in unknown_toks
        ]:
            info = jobs.get(job_id)
            message = (info.error or {}).get("message", "") if info else ""
            reasons.append(message[:60])
            result.check(
                info is not None
                and info.status == "failed"
                and info.attempts == 1
                and needle in message,
                f"poison job {job_id}: {info.status if info else 'missing'} "
                f"a{info.attempts if info else '-'} {message[:80]!r}",
            )
        for label, outcome in refused.items():
            result.check(outcome != "ACCEPTED", f"{label} arguments were accepted at enqueue")
        result.result_refused = refused  # type: ignore[attr-defined]
        result.check(not any(runs.get(t) for t in corrupt_toks), "a corrupt job's body ran")
        result.notes.append(
            f"{len(CORRUPT)} corrupt payloads + {len(unknown_toks)} unknown-task jobs failed with "
            f"a reason; refused at enqueue: "
            + "; ".join(f"{k} -> {v.split(':')[0]}" for k, v in refused.items())
        )
    finally:
        h.drop(url)
    return result
