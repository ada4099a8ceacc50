"""Celery with the Redis broker (no result backend: Celery's default). Default worker: prefork,
concurrency = CPU count; one process: ``--pool solo``. I/O-bound jobs: ``sleep_incr`` /
``pg_incr`` (sync) on the default worker (CPU count prefork processes of one job each: CPU
count slots) and tuned with ``--pool threads --concurrency 100`` (one process, 100 threads)."""

import os

from celery import Celery

from bench import harness
from bench.peers._base import (
    BENCH_REDIS,
    RedisPeer,
    dist_version,
    incr,
    pg_incr,
    sleep_incr,
    stamp,
)

app = Celery("bench_celery", broker=BENCH_REDIS)
app.conf.broker_connection_retry_on_startup = True  # silences a deprecation warning only


@app.task(name="noop")
def noop() -> None:
    incr()


@app.task(name="sleep_incr")
def sleep_task() -> None:
    sleep_incr()


@app.task(name="pg_incr")
def pg_task() -> None:
    pg_incr()


@app.task(name="stamp")
def stamp_task() -> None:
    stamp()


class Peer(RedisPeer):
    name = "celery"
    version = dist_version("celery")
    drain_modes = ["default", "one"]
    # Celery's docs send I/O-bound work to a green-thread pool (``-P eventlet -c 1000``), which
    # needs eventlet/gevent (not installed); the thread pool is the built-in pool for it.
    io_tuning = "--pool threads --concurrency 100"

    def enqueue_one(self) -> None:
        noop.delay()

    def enqueue_stamp(self) -> None:
        stamp_task.delay()

    def worker_cmd(self, mode: str) -> list[str]:
        argv = [harness.bin_of("celery"), "-A", "bench.peers.celery_peer", "worker"]
        return argv + (["--pool", "solo"] if mode == "one" else [])

    def enqueue_io(self, kind: str, n: int) -> None:
        task = {"sleep": sleep_task, "pg": pg_task}[kind]
        for _ in range(n):
            task.delay()

    def io_slots(self, mode: str) -> int:
        if mode == "tuned":
            return 100  # the thread pool: --concurrency threads in one process
        # prefork: worker_concurrency unset -> billiard.cpu_count() (= os.cpu_count()) child
        # processes, one job each (celery/worker/worker.py setup_instance)
        return os.cpu_count() or 2
