"""``duly.observability.PrometheusHook`` on every backend: a worker runs succeeding, failing
and retried jobs, and a real scrape (prometheus_client's own parser) counts them by task,
queue and outcome, with no job id anywhere in it."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import duly
from duly.observability import PrometheusHook

LABELS = {"task", "queue", "outcome", "le"}


def scrape(registry: CollectorRegistry) -> tuple[str, dict[tuple[str, frozenset[Any]], float]]:
    """The exposition text and its samples as ``{(name, labels): value}``."""
    text = generate_latest(registry).decode()
    samples: dict[tuple[str, frozenset[Any]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            assert set(sample.labels) <= LABELS, sample
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return text, samples


def value(samples: dict[tuple[str, frozenset[Any]], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_a_worker_s_jobs_counted_by_task_queue_and_outcome(
    app: duly.App, worker_thread: Callable[..., Any], wait: Callable[..., Any]
) -> None:
    registry = CollectorRegistry()
    app.add_hook(PrometheusHook(registry, clock=app.clock))
    fast = duly.Backoff(base=0.05, cap=0.1)

    @app.task(name="m.ok")
    def ok(n: int) -> int:
        return n

    @app.task(name="m.boom", retries=0, queue="risky")
    def boom() -> None:
        raise ValueError("boom")

    @app.task(name="m.flaky", retries=2, backoff=fast)
    def flaky() -> str:
        if duly.current_job().attempt == 1:
            raise RuntimeError("first attempt fails")
        return "ok"

    @app.task(name="m.once", unique="{n}")
    def once(n: int) -> None: ...

    jobs = [ok.enqueue(n) for n in range(3)]
    jobs += [boom.enqueue(), flaky.enqueue(), once.enqueue(1)]
    assert once.enqueue(1).deduplicated

    with worker_thread(app, queues=["default", "risky"]) as worker:
        wait(lambda: all(info.finished for j in jobs if (info := app.get_job(j.id))))
        wait(lambda: worker.stats.succeeded == 5)  # counted once hooks were told
    assert (worker.stats.succeeded, worker.stats.failed, worker.stats.retried) == (5, 1, 1)

    text, samples = scrape(registry)
    d, risky = {"queue": "default"}, {"queue": "risky"}
    assert value(samples, "duly_jobs_total", task="m.ok", outcome="succeeded", **d) == 3
    assert value(samples, "duly_jobs_total", task="m.boom", outcome="failed", **risky) == 1
    assert value(samples, "duly_jobs_total", task="m.flaky", outcome="retried", **d) == 1
    assert value(samples, "duly_jobs_total", task="m.flaky", outcome="succeeded", **d) == 1
    assert value(samples, "duly_jobs_total", task="m.once", outcome="succeeded", **d) == 1
    assert sum(v for (name, _), v in samples.items() if name == "duly_jobs_total") == 7
    # one duration per stored outcome, one queue wait per start, nothing left in flight
    assert value(samples, "duly_job_duration_seconds_count", task="m.flaky", **d) == 2
    assert value(samples, "duly_job_queue_wait_seconds_count", task="m.flaky", **d) == 2
    assert value(samples, "duly_job_queue_wait_seconds_count", task="m.ok", **d) == 3
    assert value(samples, "duly_job_duration_seconds_count", task="m.boom", **risky) == 1
    assert value(samples, "duly_job_duration_seconds_sum", task="m.ok", **d) >= 0
    assert value(samples, "duly_jobs_in_flight", task="m.ok", **d) == 0
    assert value(samples, "duly_jobs_in_flight", task="m.flaky", **d) == 0
    assert value(samples, "duly_jobs_enqueued_total", task="m.ok", **d) == 3
    assert value(samples, "duly_jobs_enqueued_total", task="m.once", **d) == 1
    assert value(samples, "duly_jobs_deduplicated_total", task="m.once", **d) == 1
    assert value(samples, "duly_jobs_recovered_total") == 0
    for job in jobs:  # low cardinality: no id (nor key) is ever a label value
        assert job.id not in text


@pytest.mark.parametrize("cancelled", [False, True], ids=["finished", "cancelled"])
def test_in_flight_counts_a_running_job(
    app: duly.App, worker_thread: Callable[..., Any], wait: Callable[..., Any], cancelled: bool
) -> None:
    """Back to 0 when the run ends, also when its outcome is not kept (cancelled mid-run); the
    run's queue wait is counted from its start on."""
    registry = CollectorRegistry()
    hook = app.add_hook(PrometheusHook(registry, clock=app.clock))
    assert isinstance(hook, PrometheusHook)
    release = threading.Event()

    @app.task(name="m.block")
    def block() -> None:
        release.wait(10)

    def in_flight() -> float:
        return value(scrape(registry)[1], "duly_jobs_in_flight", task="m.block", queue="default")

    job = block.enqueue()
    with worker_thread(app):
        wait(lambda: in_flight() == 1)
        # Its queue wait shows while it runs (observed by the scrape, not at its end).
        samples = scrape(registry)[1]
        count = "duly_job_queue_wait_seconds_count"
        assert value(samples, count, task="m.block", queue="default") == 1
        if cancelled:
            assert app.cancel(job.id)
        release.set()
        wait(lambda: in_flight() == 0)
    info = app.get_job(job.id)
    assert info is not None and info.status == ("cancelled" if cancelled else "succeeded")


def test_the_hook_without_prometheus_client_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed
    with pytest.raises(duly.ConfigurationError, match=r"duly\[metrics\]"):
        PrometheusHook(CollectorRegistry())


def test_one_process_exposes_what_prometheus_client_s_own_types_would() -> None:
    """In one process the per-run metrics are plain numbers behind a collector (they cost a
    third, see ``PrometheusHook.__init__``); multiprocess mode uses prometheus_client's own
    Counter / Histogram / Gauge. Fed the same runs, both expose the same families, labels and
    values (``_created`` timestamps aside)."""
    import prometheus_client

    from duly._clock import ManualClock
    from duly._records import JobRecord, Outcome
    from duly.observability._prometheus import RunCollector, _ClientRuns, _PlainRuns

    clock = ManualClock(start=1_000.0)
    plain_registry, client_registry = CollectorRegistry(), CollectorRegistry()
    plain = _PlainRuns(clock)
    plain_registry.register(RunCollector(plain))
    client = _ClientRuns(prometheus_client, client_registry, clock)
    kinds = ["succeeded", "retry", "failed", "release", "again"]
    records = []
    for i in range(40):
        record = JobRecord(
            f"j{i}", f"t{i % 3}", ("default", "risky")[i % 2], b"{}", "running", 1, 4, None, 0,
            enqueued_at=990.0 + i * 0.1, scheduled_for=995.0 if i % 4 == 0 else None,
            started_at=1_000.0 - i * 0.37,
        )  # fmt: skip
        records.append(record)
    for runs in (plain, client):  # as claims start them: a batch of runs at a time
        runs.started(records[:7])
        runs.started(records[7:8])
        runs.started(records[8:])
    ended = [(r, Outcome(r.id, kinds[i % len(kinds)]), None) for i, r in enumerate(records[:30])]
    for runs in (plain, client):
        runs.finished(ended[:10], 1_000.5)
        runs.finished(ended[10:], 1_030.0)
        runs.end(records[30].id)  # abandoned: in flight no more, no outcome

    def samples(registry: CollectorRegistry) -> dict[tuple[str, frozenset[Any]], float]:
        found = scrape(registry)[1]
        return {key: v for key, v in found.items() if not key[0].endswith("_created")}

    exposed = samples(plain_registry)
    assert exposed == samples(client_registry)
    assert value(exposed, "duly_jobs_in_flight", task="t1", queue="risky") == 2  # j31, j37
    assert sum(v for (name, _), v in exposed.items() if name == "duly_jobs_in_flight") == 9
    assert (
        value(exposed, "duly_job_duration_seconds_bucket", task="t0", queue="default", le="+Inf")
        == 5
    )
