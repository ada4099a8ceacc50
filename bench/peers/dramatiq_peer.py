"""Dramatiq with its RedisBroker. Default worker: ``dramatiq module`` (processes = CPU count,
8 threads each); one process: ``--processes 1``. No bulk enqueue API. I/O-bound jobs:
``sleep_incr`` / ``pg_incr`` (sync actors) on the default worker (CPU count processes of 8
threads: 8 slots per CPU) and tuned with ``--threads 100`` (100 slots per CPU)."""

import multiprocessing

import dramatiq
from dramatiq.brokers.redis import RedisBroker

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

broker = RedisBroker(url=BENCH_REDIS)
dramatiq.set_broker(broker)


@dramatiq.actor
def noop() -> None:
    incr()


@dramatiq.actor
def sleep_actor() -> None:
    sleep_incr()


@dramatiq.actor
def pg_actor() -> None:
    pg_incr()


@dramatiq.actor
def stamp_actor() -> None:
    stamp()


class Peer(RedisPeer):
    name = "dramatiq"
    version = dist_version("dramatiq")
    drain_modes = ["default", "one"]
    # Dramatiq's docs send network-I/O-bound work to greenlets (``dramatiq-gevent -p 8 -t 250``),
    # which needs gevent (not installed); more worker threads per process is the same knob
    # without it. The docs give no thread count for this, hence a round 100.
    io_tuning = "--threads 100"

    def enqueue_one(self) -> None:
        noop.send()

    def enqueue_stamp(self) -> None:
        stamp_actor.send()

    def worker_cmd(self, mode: str) -> list[str]:
        argv = [harness.bin_of("dramatiq"), "bench.peers.dramatiq_peer"]
        return argv + (["--processes", "1"] if mode == "one" else [])

    def enqueue_io(self, kind: str, n: int) -> None:
        actor = {"sleep": sleep_actor, "pg": pg_actor}[kind]
        for _ in range(n):
            actor.send()

    def io_slots(self, mode: str) -> int:
        # dramatiq/cli.py: --processes defaults to multiprocessing.cpu_count(), --threads to 8
        threads = int(self.io_tuning.split()[1]) if mode == "tuned" else 8
        return multiprocessing.cpu_count() * threads
