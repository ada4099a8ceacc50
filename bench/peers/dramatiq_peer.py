"""Dramatiq with its RedisBroker. Default worker: ``dramatiq module`` (processes = CPU count,
8 threads each); one process: ``--processes 1``. No bulk enqueue API."""

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from bench import harness
from bench.peers._base import BENCH_REDIS, RedisPeer, dist_version, incr, stamp

broker = RedisBroker(url=BENCH_REDIS)
dramatiq.set_broker(broker)


@dramatiq.actor
def noop() -> None:
    incr()


@dramatiq.actor
def stamp_actor() -> None:
    stamp()


class Peer(RedisPeer):
    name = "dramatiq"
    version = dist_version("dramatiq")
    drain_modes = ["default", "one"]

    def enqueue_one(self) -> None:
        noop.send()

    def enqueue_stamp(self) -> None:
        stamp_actor.send()

    def worker_cmd(self, mode: str) -> list[str]:
        argv = [harness.bin_of("dramatiq"), "bench.peers.dramatiq_peer"]
        return argv + (["--processes", "1"] if mode == "one" else [])
