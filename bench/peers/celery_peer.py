"""Celery with the Redis broker (no result backend: Celery's default). Default worker: prefork,
concurrency = CPU count; one process: ``--pool solo``."""

from celery import Celery

from bench import harness
from bench.peers._base import BENCH_REDIS, RedisPeer, dist_version, incr, stamp

app = Celery("bench_celery", broker=BENCH_REDIS)
app.conf.broker_connection_retry_on_startup = True  # silences a deprecation warning only


@app.task(name="noop")
def noop() -> None:
    incr()


@app.task(name="stamp")
def stamp_task() -> None:
    stamp()


class Peer(RedisPeer):
    name = "celery"
    version = dist_version("celery")
    drain_modes = ["default", "one"]

    def enqueue_one(self) -> None:
        noop.delay()

    def enqueue_stamp(self) -> None:
        stamp_task.delay()

    def worker_cmd(self, mode: str) -> list[str]:
        argv = [harness.bin_of("celery"), "-A", "bench.peers.celery_peer", "worker"]
        return argv + (["--pool", "solo"] if mode == "one" else [])
