"""A resumable export: a long job that writes every order to a CSV file, resumes where it
stopped after a crash or a deploy, and shows a progress bar (PRODUCT §16).

- ``export_orders`` reads the orders in batches by primary key (``id > after``), appends them
  to the file, and after each batch calls ``job.checkpoint({"after": last_id, "bytes": size})``
  and ``job.set_progress(done / total, "1200 of 5000 orders")``: both cost no I/O, the worker
  stores the latest with its heartbeat (at most once a second) and before the run ends;
- a run that resumes (``job.cursor`` is set: the last worker was SIGKILLed, or handed the job
  back) first cuts the file back to the checkpoint's size, so the rows written after the last
  stored checkpoint are written once, not twice, and carries on after its last id;
- on a deploy (SIGTERM), ``job.stopping`` turns True: the export checkpoints the batch it just
  wrote and raises ``duly.Interrupted()``: handed back, no attempt charged, resumed by the next
  worker;
- ``duly status <id>`` and the dashboard show the progress; ``app.events(progress=True)``
  streams it.

Orders live in a small SQLite file the example owns (``ORDERS_DB``); ``EXPORT_PAUSE`` (seconds
per batch, default 0) slows the export down to watch it: ``EXPORT_PAUSE=0.2 python -m
examples.resumable_export.app`` (add DULY_URL for Redis/PostgreSQL).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import duly
import duly.testing

app = duly.App(os.environ.get("DULY_URL", "sqlite:///resumable_export.db"))
ORDERS = os.environ.get("ORDERS_DB", "orders.db")
PAUSE = float(os.environ.get("EXPORT_PAUSE", "0"))
HEADER = "id,customer,total_cents\n"


def seed_orders(count: int) -> None:
    """``count`` orders to export (the application's own table)."""
    with sqlite3.connect(ORDERS) as db:
        db.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, customer, total)")
        db.executemany(
            "INSERT INTO orders (customer, total) VALUES (?, ?)",
            ((f"customer-{n % 97}", 100 + n * 7 % 9000) for n in range(count)),
        )


@app.task(retries=3)
def export_orders(path: str, batch: int = 500) -> int:
    """Write every order to the CSV file at ``path``; the number of orders written."""
    job = duly.current_job()
    cursor = job.cursor or {"after": 0, "bytes": 0, "done": 0}
    out = Path(path)
    with sqlite3.connect(ORDERS) as db, out.open("a+b") as file:
        # Drop what a lost run wrote after its last stored checkpoint: written once, not twice.
        file.truncate(cursor["bytes"])
        if cursor["bytes"] == 0:
            file.write(HEADER.encode())
        total = db.execute("SELECT count(*) FROM orders").fetchone()[0]
        after, done = cursor["after"], cursor["done"]
        while True:
            if job.stopping:  # a deploy: hand the job back, resumed from the checkpoint
                raise duly.Interrupted()
            rows = db.execute(
                "SELECT id, customer, total FROM orders WHERE id > ? ORDER BY id LIMIT ?",
                (after, batch),
            ).fetchall()
            if not rows:
                return done
            file.write("".join(f"{i},{c},{t}\n" for i, c, t in rows).encode())
            file.flush()
            os.fsync(file.fileno())  # on disk before the checkpoint says so
            after, done = rows[-1][0], done + len(rows)
            job.checkpoint({"after": after, "bytes": file.tell(), "done": done})
            job.set_progress(done / total, f"{done} of {total} orders")
            time.sleep(PAUSE)


if __name__ == "__main__":
    seed_orders(5000)
    job = export_orders.enqueue("orders.csv", batch=250)
    duly.testing.run_jobs(app, [job])
    info = app.get_job(job.id)
    assert info is not None and info.progress is not None
    print(info.status, info.result, f"{info.progress.fraction:.0%}", info.progress.message)
