"""Storage under sustained load: does retention keep the store near rate x retention?

    .venv/bin/python bench/retention.py                       # 300 jobs/s, 5 min, retention 60 s
    .venv/bin/python bench/retention.py --backends sqlite --rate 200 --duration 240
    .venv/bin/python bench/retention.py --backends redis --rate 1000 --duration 600  # issue 32.6

For each backend, in a namespace of its own removed at the end (SQLite: a temp file; Redis:
``bench_ret_<hex>`` on 127.0.0.1:6379 db 0; PostgreSQL: schema ``bench_ret_<hex>``), an App
with ``retention=--retention`` seconds and ``duly worker`` as shipped (one process per core)
run a no-op task while this process enqueues ``--rate`` jobs a second (batches every 0.1 s)
for ``--duration`` seconds. Every ``--every`` seconds it records the jobs stored (every
status), the jobs waiting (queued or running: the worker keeps up when this stays small), the
enqueue → start wait (p50 / p99 ms) of the latest 1,000 jobs that succeeded (the store's own
timestamps; the enqueues come in batches every 0.1 s), and the bytes the store holds:

- SQLite: the database file + its WAL (so pages a purge frees but the file keeps show);
- PostgreSQL: ``pg_total_relation_size`` of every table of the schema (heap, TOAST, indexes);
- Redis: ``MEMORY USAGE`` of every key of the namespace.

With purging that keeps pace, stored jobs plateau near ``rate x retention`` (plus what is
queued); without it they grow with time (issue 28.1). Prints a table and writes
``bench/results/retention.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REDIS_URL = "redis://127.0.0.1:6379/0"
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"

APP_MODULE = """
import os
import duly

app = duly.App(
    os.environ["RET_URL"],
    namespace=os.environ["RET_NS"],
    retention=float(os.environ["RET_RETENTION"]),
)


@app.task(name="ret.noop")
def noop(n: int) -> None:
    pass
"""


def _url_and_namespace(backend: str, workdir: Path) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:10]
    if backend == "sqlite":
        return f"sqlite:///{workdir / 'duly.db'}", "duly"
    if backend == "redis":
        return REDIS_URL, f"bench_ret_{tag}"
    return POSTGRES_URL, f"bench_ret_{tag}"


def _stored(backend: str, url: str, namespace: str) -> tuple[int, int]:
    """(jobs stored, bytes stored) of the namespace."""
    if backend == "sqlite":
        path = url.split("sqlite:///", 1)[1]
        with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
            jobs = db.execute("SELECT count(*) FROM jobs").fetchone()[0]
            free = db.execute("PRAGMA freelist_count").fetchone()[0]
        sizes = [os.path.getsize(path + s) if os.path.exists(path + s) else 0 for s in ("", "-wal")]
        print(f"  sqlite file {sizes[0]:,} B, WAL {sizes[1]:,} B, {free:,} free pages", flush=True)
        return int(jobs), sum(sizes)
    if backend == "postgres":
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            jobs = conn.execute(f'SELECT count(*) FROM "{namespace}".jobs').fetchone()
            size = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relkind = 'r'",
                (namespace,),
            ).fetchone()
        return int(jobs[0] if jobs else 0), int(size[0] if size else 0)
    import redis

    r = redis.Redis.from_url(url)
    jobs = total = 0
    batch: list[bytes] = []

    def flush() -> int:
        pipe = r.pipeline(transaction=False)
        for key in batch:
            pipe.memory_usage(key, samples=0)
        found = sum(v or 0 for v in pipe.execute())
        batch.clear()
        return found

    for key in r.scan_iter(match=f"{{{namespace}}}:*", count=2000):
        if key.startswith(f"{{{namespace}}}:j:".encode()):
            jobs += 1
        batch.append(key)
        if len(batch) >= 2000:
            total += flush()
    total += flush()
    return jobs, total


def _pace(app: Any) -> dict[str, Any]:
    """Whether the worker keeps up: jobs waiting now, and the enqueue → start wait (ms, p50 and
    p99, from the store's own timestamps) of the latest 1,000 jobs that succeeded."""
    waiting = sum(q.queued + q.running for q in app.queues())
    infos = app.jobs(status="succeeded", limit=1000)
    waits = sorted(
        (i.started_at.timestamp() - i.enqueued_at.timestamp()) * 1000
        for i in infos
        if i.started_at is not None
    )
    if not waits:
        return {"waiting": waiting}
    return {
        "waiting": waiting,
        "wait_p50_ms": round(waits[len(waits) // 2], 2),
        "wait_p99_ms": round(waits[min(len(waits) - 1, int(len(waits) * 0.99))], 2),
    }


def _say_autovacuum(url: str) -> None:
    """Deleted rows become space to reuse only once (auto)vacuumed: without autovacuum the
    tables grow however well the purge keeps pace."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SHOW autovacuum").fetchone()
    if row and row[0] != "on":
        print("  postgres: autovacuum is OFF on this server: bytes will grow", flush=True)


def _drop(backend: str, url: str, namespace: str) -> None:
    if backend == "redis":
        import redis

        r = redis.Redis.from_url(url)
        keys = list(r.scan_iter(match=f"{{{namespace}}}:*", count=2000))
        for i in range(0, len(keys), 2000):
            r.delete(*keys[i : i + 2000])
    elif backend == "postgres":
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{namespace}" CASCADE')


def run(backend: str, rate: int, duration: float, every: float, retention: float) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="duly-retention-"))
    (workdir / "retention_app.py").write_text(APP_MODULE)
    url, namespace = _url_and_namespace(backend, workdir)
    env = {
        **os.environ,
        "RET_URL": url,
        "RET_NS": namespace,
        "RET_RETENTION": str(retention),
        "PYTHONPATH": os.pathsep.join([str(workdir), os.environ.get("PYTHONPATH", "")]),
    }
    os.environ.update({k: env[k] for k in ("RET_URL", "RET_NS", "RET_RETENTION")})
    sys.path.insert(0, str(workdir))
    import retention_app

    app = retention_app.app
    app.ping()  # creates / migrates the store before the worker starts
    if backend == "postgres":
        _say_autovacuum(url)
    duly_bin = str(Path(sys.executable).with_name("duly"))
    log = open(workdir / "worker.log", "wb")  # noqa: SIM115 - closed in finally
    worker = subprocess.Popen(
        [duly_bin, "worker", "retention_app:app", "--log-level", "WARNING"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    samples: list[dict[str, Any]] = []
    enqueued = 0
    try:
        started = time.monotonic()
        next_sample = started + every
        per_tick = max(1, round(rate / 10))
        while (now := time.monotonic()) - started < duration:
            app.enqueue_many([retention_app.noop.s(i) for i in range(per_tick)])
            enqueued += per_tick
            if now >= next_sample:
                jobs, size = _stored(backend, url, namespace)
                pace = _pace(app)
                samples.append({"t": round(now - started), "jobs": jobs, "bytes": size, **pace})
                elapsed = now - started
                print(
                    f"{backend}: t={elapsed:5.0f}s jobs={jobs:,} bytes={size:,} "
                    + " ".join(f"{k}={v}" for k, v in pace.items()),
                    flush=True,
                )
                next_sample += every
            if worker.poll() is not None:
                raise RuntimeError(f"worker exited: {(workdir / 'worker.log').read_text()[-2000:]}")
            late = started + enqueued / rate - time.monotonic()
            if late > 0:
                time.sleep(late)
        jobs, size = _stored(backend, url, namespace)
        end = {"t": round(time.monotonic() - started), "jobs": jobs, "bytes": size}
        samples.append({**end, **_pace(app)})
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.wait(30)
        log.close()
        app.close()
        sys.path.remove(str(workdir))
        sys.modules.pop("retention_app", None)
        _drop(backend, url, namespace)
    return {
        "backend": backend,
        "rate": rate,
        "retention": retention,
        "enqueued": enqueued,
        "expected_plateau": int(rate * retention),
        "samples": samples,
    }


def _cell(sample: dict[str, Any]) -> str:
    text = f"{sample['jobs']:,} jobs / {sample['bytes'] / 1e6:.1f} MB"
    if "wait_p99_ms" in sample:
        text += (
            f"; {sample['waiting']:,} waiting, wait p50 {sample['wait_p50_ms']:.0f} ms"
            f" p99 {sample['wait_p99_ms']:.0f} ms"
        )
    return text


def table(results: list[dict[str, Any]]) -> str:
    times = sorted({s["t"] for r in results for s in r["samples"]})
    head = "| backend | " + " | ".join(f"{t} s" for t in times) + " |"
    lines = [head, "|" + "---|" * (len(times) + 1)]
    for r in results:
        at = {s["t"]: s for s in r["samples"]}
        cells = [_cell(at[t]) if t in at else "" for t in times]
        lines.append(f"| {r['backend']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,redis,postgres")
    parser.add_argument("--rate", type=int, default=300, help="jobs enqueued per second")
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of load")
    parser.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--retention", type=float, default=60.0, help="the App's retention")
    args = parser.parse_args(argv)
    results = [
        run(b.strip(), args.rate, args.duration, args.every, args.retention)
        for b in args.backends.split(",")
        if b.strip()
    ]
    print(table(results))
    out = ROOT / "bench" / "results" / "retention.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
