"""Concurrency control through the public surface (PRODUCT §4), on every backend: unique jobs,
mutexes, concurrency limits, rate limits, ``Throttled``, weighted queues, and bad settings."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import duly
from duly._worker.settings import parse_queues
from duly.testing import run_jobs

pytestmark = pytest.mark.timeout(60)


def test_unique_enqueue_from_many_threads_stores_one_job(app: duly.App) -> None:
    @app.task(unique="{team_id}:{scope}")
    def sync(team_id: int, scope: str) -> None:
        pass

    start = threading.Barrier(10)
    jobs: list[duly.Job] = []
    lock = threading.Lock()

    def burst() -> None:
        start.wait(10)
        for _ in range(10):
            job = sync.enqueue(7, scope="repos")
            with lock:
                jobs.append(job)

    threads = [threading.Thread(target=burst) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(jobs) == 100
    assert len({j.id for j in jobs}) == 1
    assert sum(not j.deduplicated for j in jobs) == 1
    assert len(app.jobs(task=sync.name, limit=1000)) == 1
    # Other arguments are another job; the template decides what "the same" means.
    other = sync.enqueue(8, "repos")
    assert not other.deduplicated
    assert sync.enqueue(team_id=7, scope="repos").id == jobs[0].id


def test_unique_is_released_when_the_job_finishes(
    app: duly.App, run_burst: Callable[..., Any]
) -> None:
    @app.task(unique=True)
    def refresh(link: int) -> int:
        return link

    first = refresh.enqueue(1)
    assert refresh.enqueue(1).deduplicated
    run_burst(app)
    assert app.get_job(first.id).status == "succeeded"  # type: ignore[union-attr]
    again = refresh.enqueue(1)
    assert not again.deduplicated and again.id != first.id


_UNIQUE_KEY_OF_A_SET = """
import duly
app = duly.App("sqlite:///unused.db")

@app.task(name="t.sync", unique=True)
def sync(tags: set[str], meta: dict[str, int]) -> None: ...

assert sync.config.limits is not None
call = {"tags": {"a", "b", "c", "d", "e"}, "meta": {"z": 1, "y": 2}}
print(sync.config.limits.unique_key((), call))
"""


def test_unique_true_keys_agree_across_processes_for_sets_and_dicts(tmp_path: Path) -> None:
    """A set iterates in an order that changes with the hash seed: two processes enqueueing
    the same call must still render one unique key, or the duplicate is stored."""
    keys = set()
    for seed in ("1", "2", "3", "4"):
        done = subprocess.run(
            [sys.executable, "-c", _UNIQUE_KEY_OF_A_SET],
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        keys.add(done.stdout.strip())
    assert keys == {'t.sync:{"meta":{"y":2,"z":1},"tags":["a","b","c","d","e"]}'}


def test_unique_until_start_allows_one_queued_behind_a_running_one(
    app: duly.App, worker_thread: Callable[..., Any], wait: Callable[..., Any]
) -> None:
    gate = threading.Event()

    @app.task(unique="{n}", unique_until="start")
    def slow(n: int) -> None:
        gate.wait(10)

    running = slow.enqueue(1)
    with worker_thread(app, concurrency=1):  # the second job stays queued while one runs
        wait(lambda: app.get_job(running.id).status == "running")  # type: ignore[union-attr]
        queued = slow.enqueue(1)
        assert not queued.deduplicated
        assert slow.enqueue(1).id == queued.id  # held again while queued
        gate.set()
        wait(lambda: app.get_job(queued.id).status == "succeeded")  # type: ignore[union-attr]


def test_mutex_jobs_never_overlap_in_one_worker(
    app: duly.App, run_burst: Callable[..., Any]
) -> None:
    active: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    lock = threading.Lock()

    @app.task(mutex="team:{team_id}")
    async def sync(team_id: int, n: int) -> None:
        import asyncio

        with lock:
            active[str(team_id)] += 1
            peak[str(team_id)] = max(peak[str(team_id)], active[str(team_id)])
        await asyncio.sleep(0.01)
        with lock:
            active[str(team_id)] -= 1

    jobs = app.enqueue_many([sync.s(team, n) for n in range(10) for team in (1, 2, 3)])
    worker = run_burst(app, concurrency=16)
    assert worker.stats.succeeded == 30
    assert peak == Counter({"1": 1, "2": 1, "3": 1})
    assert {app.get_job(j.id).attempts for j in jobs} == {1}  # type: ignore[union-attr]


def test_concurrency_limit_per_key(app: duly.App, run_burst: Callable[..., Any]) -> None:
    active: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    lock = threading.Lock()

    @app.task(concurrency=2, concurrency_key="{host}")
    def fetch(host: str, n: int) -> None:
        with lock:
            active[host] += 1
            peak[host] = max(peak[host], active[host])
        time.sleep(0.02)
        with lock:
            active[host] -= 1

    app.enqueue_many([fetch.s(host, n) for n in range(8) for host in ("a", "b")])
    run_burst(app, concurrency=16)
    assert peak == Counter({"a": 2, "b": 2})


def test_rate_limit_defers_without_failing(app: duly.App) -> None:
    starts: list[float] = []

    @app.task(rate_limit="5/s")
    def call(n: int) -> None:
        starts.append(time.time())

    jobs = app.enqueue_many([call.s(n) for n in range(12)])
    origin = time.time()  # no slot of the schedule starts before the worker asks for one
    stats = run_jobs(app, jobs, concurrency=16, poll=0.1)
    infos = [app.get_job(j.id) for j in jobs]
    assert {(i.status, i.attempts) for i in infos if i} == {("succeeded", 1)}
    assert stats.deferred >= 7
    starts.sort()
    # A burst of 5, then one slot every 0.2 s: the k-th start (k >= 5) is no earlier than its
    # slot. A loaded machine can only start a job late, never early, so this bound is exact
    # where a spacing between two observed starts is not (a late first start shrinks it).
    for k, start in enumerate(starts):
        assert start >= origin + max(0, k - 4) * 0.2 - 0.03


def test_rate_key_separates_limits(app: duly.App) -> None:
    starts: dict[str, list[float]] = {"a": [], "b": []}

    @app.task(rate_limit="2/s", rate_key="{tenant}")
    def call(tenant: str, n: int) -> None:
        starts[tenant].append(time.time())

    jobs = app.enqueue_many([call.s(t, n) for n in range(4) for t in ("a", "b")])
    origin = time.time()
    run_jobs(app, jobs)
    for tenant in ("a", "b"):
        times = sorted(starts[tenant])
        assert len(times) == 4
        # a burst of 2 per key, then one slot every 0.5 s (a start is never early, may be late)
        assert times[2] >= origin + 0.5 - 0.03
        assert times[3] >= origin + 1.0 - 0.03


def test_throttled_defers_without_an_attempt_and_pauses_the_key(app: duly.App) -> None:
    calls: list[tuple[int, float]] = []

    @app.task(rate_limit="100/s", retries=0)
    def call(n: int) -> None:
        calls.append((n, time.time()))
        if n == 0 and len(calls) == 1:
            raise duly.Throttled(retry_after=0.5)

    throttled = call.enqueue(0)
    enqueued: list[duly.Job] = []

    class EnqueueDuringThePause(duly.Hook):
        def finished(self, record: Any, outcome: Any, error: Any) -> None:
            # The throttled run's release is stored, so its pause is too: a job enqueued now
            # is due during the pause, however late a loaded machine got here.
            if record.id == throttled.id and outcome.kind == "release" and not enqueued:
                enqueued.append(call.enqueue(1))

    app.add_hook(EnqueueDuringThePause())
    stats = run_jobs(app, [throttled], poll=0.1)
    [later] = enqueued
    stats2 = run_jobs(app, [later], poll=0.1)
    info = app.get_job(throttled.id)
    assert info is not None and (info.status, info.attempts) == ("succeeded", 1)
    assert stats.deferred + stats2.deferred >= 2
    first_run, second_run = [t for n, t in calls if n == 0]
    [other] = [t for n, t in calls if n == 1]
    assert second_run - first_run >= 0.5 - 0.03
    assert other - first_run >= 0.5 - 0.03  # the whole key waited, not only the throttled job


def test_throttled_without_a_rate_limit_just_defers(app: duly.App) -> None:
    calls: list[float] = []

    @app.task(retries=0)
    def call() -> None:
        calls.append(time.time())
        if len(calls) == 1:
            raise duly.Throttled(retry_after=0.3)

    job = call.enqueue()
    run_jobs(app, [job], poll=0.1)
    info = app.get_job(job.id)
    assert info is not None and (info.status, info.attempts) == ("succeeded", 1)
    assert calls[1] - calls[0] >= 0.3 - 0.03
    with pytest.raises(ValueError):
        duly.Throttled(retry_after=-1)


def test_bad_settings_are_clear_errors(app: duly.App) -> None:
    def fn(team_id: int) -> None:
        pass

    cases: list[dict[str, Any]] = [
        {"unique": "{team}"},
        {"unique": ""},
        {"unique": "{0}"},
        {"unique": "{team_id"},
        {"mutex": "a", "concurrency": 2},
        {"concurrency": 0},
        {"concurrency_key": "{team_id}"},
        {"rate_limit": "ten per second"},
        {"rate_limit": "0/s"},
        {"rate_key": "{team_id}"},
        {"rate_limit": "1/s", "rate_key": "{nope}"},
        {"unique": True, "unique_until": "never"},
        {"unique": True, "unique_ttl": 0},
    ]
    for settings in cases:
        with pytest.raises(duly.ConfigurationError):
            app.task(name=f"t{len(str(settings))}", **settings)(fn)


def test_a_key_the_arguments_cannot_fill_fails_at_enqueue(app: duly.App) -> None:
    @app.task(mutex="{user.id}")
    def work(user: dict[str, int]) -> None:
        pass

    with pytest.raises(ValueError, match="cannot render"):
        work.enqueue({"id": 1})
    with pytest.raises(TypeError):
        work.enqueue()  # type: ignore[call-arg]
    assert app.jobs(limit=10) == []


def test_weighted_queues_give_every_queue_its_share() -> None:
    names, weights = parse_queues(["high:3", "low:1"])
    assert (names, weights) == (["high", "low"], [3.0, 1.0])
    assert parse_queues(["a", "b"]) == (["a", "b"], None)
    with pytest.raises(duly.ConfigurationError):
        parse_queues(["a:0"])
    with pytest.raises(duly.ConfigurationError):
        parse_queues(["a:x"])
    with pytest.raises(duly.ConfigurationError):
        parse_queues(["a", "a:2"])
    app = duly.App("sqlite:///:memory:")
    worker = app.worker(queues=["high:3", "low:1"])
    firsts = Counter(worker._claim_order()[0] for _ in range(4000))
    assert 0.70 < firsts["high"] / 4000 < 0.80  # 3/4, within ~8 standard deviations
