"""Huey with ``RedisHuey`` (blocking dequeue). Consumer: ``huey_consumer module.huey`` (one
process, 1 worker thread by default). No bulk enqueue API."""

from huey import RedisHuey

from bench import harness
from bench.peers._base import BENCH_REDIS, RedisPeer, dist_version, incr, stamp

huey = RedisHuey("bench", url=BENCH_REDIS)


@huey.task()
def noop() -> None:
    incr()


@huey.task()
def stamp_task() -> None:
    stamp()


class Peer(RedisPeer):
    name = "huey"
    version = dist_version("huey")

    def enqueue_one(self) -> None:
        noop()

    def enqueue_stamp(self) -> None:
        stamp_task()

    def worker_cmd(self, mode: str) -> list[str]:
        return [harness.bin_of("huey_consumer"), "bench.peers.huey_peer.huey"]
