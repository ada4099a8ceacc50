"""``duly.observability.BackendCollector`` / ``metrics_text`` on every backend: the gauges of
what the whole backend holds, read through a real scrape (prometheus_client's own parser)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import duly
from duly._clock import ManualClock
from duly.observability import (
    BACKEND_METRICS,
    BackendCollector,
    PrometheusHook,
    metrics_text,
    metrics_text_async,
)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: bytes) -> Samples:
    """Every sample of a scrape; each label is ``queue`` (bounded), never an id or key."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            assert set(sample.labels) <= {"queue"}, sample
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def gauge(samples: Samples, name: str, queue: str | None = None) -> float:
    labels = frozenset({("queue", queue)} if queue else ())
    return samples[(name, labels)]


def test_queue_gauges_and_live_workers(make_app: Callable[..., duly.App]) -> None:
    clock = ManualClock(1_700_000_000.0)
    app = make_app(clock=clock)

    @app.task(name="g.plain")
    def plain() -> None: ...

    @app.task(name="g.one", mutex="one", queue="serial")
    def one() -> None: ...

    plain.enqueue()
    clock.advance(5)
    plain.enqueue()
    plain.options(delay=600).enqueue()
    serial = [one.enqueue() for _ in range(3)]

    async def hold_the_mutex() -> None:
        backend = await app.backend()
        now = clock.now()
        taken = await backend.claim("w-live", ["serial"], 3, now, now + 30)
        taken += await backend.claim("w-live", ["serial"], 3, now, now + 30)
        assert [job.id for job in taken] == [serial[0].id]
        await backend.register_worker("w-live", now, {"lease": 30.0})
        await backend.register_worker("w-dead", now - 120, {"lease": 30.0})
        await app.aclose()

    asyncio.run(hold_the_mutex())
    clock.advance(20)

    samples = parse(metrics_text(app))
    assert gauge(samples, "duly_backend_up") == 1
    assert gauge(samples, "duly_queue_depth", "default") == 2
    assert gauge(samples, "duly_queue_scheduled", "default") == 1
    assert gauge(samples, "duly_queue_running", "default") == 0
    assert gauge(samples, "duly_queue_parked", "default") == 0
    # the first job waited since it was enqueued: 5 s before the second, then 20 s
    assert gauge(samples, "duly_queue_oldest_age_seconds", "default") == pytest.approx(25, abs=1e-3)
    assert gauge(samples, "duly_queue_depth", "serial") == 2
    assert gauge(samples, "duly_queue_parked", "serial") == 2
    assert gauge(samples, "duly_queue_running", "serial") == 1
    assert gauge(samples, "duly_queue_oldest_age_seconds", "serial") == 0  # parked: not claimable
    assert gauge(samples, "duly_workers_alive") == 1
    assert gauge(samples, "duly_workers_registered") == 2
    assert {name for name, _ in samples} == set(BACKEND_METRICS)

    clock.advance(31)  # w-live missed its lease too
    assert gauge(parse(metrics_text(app)), "duly_workers_alive") == 0


def test_the_collector_in_a_user_registry_with_a_hook(make_app: Callable[..., duly.App]) -> None:
    app = make_app()

    @app.task(name="g.job", queue="q1")
    def job() -> None: ...

    registry = CollectorRegistry()
    registry.register(BackendCollector(app))  # describes itself: reads nothing yet
    PrometheusHook(registry)
    job.enqueue()
    text = generate_latest(registry).decode()
    families = {family.name for family in text_string_to_metric_families(text)}
    assert {"duly_queue_depth", "duly_jobs_enqueued"} <= families
    assert 'duly_queue_depth{queue="q1"} 1.0' in text
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(BackendCollector(app))  # one collector per registry, as any metric


def test_metrics_text_async_appends_a_registry(make_app: Callable[..., duly.App]) -> None:
    app = make_app()

    @app.task(name="g.job")
    def job() -> None: ...

    registry = CollectorRegistry()
    app.add_hook(PrometheusHook(registry))

    async def scrape() -> bytes:
        await job.enqueue_async()
        try:
            return await metrics_text_async(app, registry)
        finally:
            await app.aclose()

    text = asyncio.run(scrape()).decode()
    assert 'duly_queue_depth{queue="default"} 1.0' in text
    assert 'duly_jobs_enqueued_total{queue="default",task="g.job"} 1.0' in text


def test_a_backend_that_does_not_answer_reports_down() -> None:
    app = duly.App("redis://127.0.0.1:1/0")  # loopback, nothing listens on port 1
    try:
        samples = parse(metrics_text(app))
    finally:
        app.close()
    assert samples == {("duly_backend_up", frozenset()): 0.0}


def test_no_series_without_queues(make_app: Callable[..., duly.App]) -> None:
    samples: Any = parse(metrics_text(make_app()))
    assert gauge(samples, "duly_backend_up") == 1
    assert gauge(samples, "duly_workers_alive") == 0
    assert not [name for name, labels in samples if labels]
