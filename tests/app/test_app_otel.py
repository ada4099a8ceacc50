"""``duly.observability.OtelHook`` on every backend: producer spans on enqueue, a consumer span
per run LINKED to its producer, read from the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider, SpanKind, StatusCode

import duly
import duly.testing
from duly._ids import new_id
from duly._records import NewJob
from duly.observability import OtelHook
from duly.observability._otel import parse_traceparent

SECRET = "s3cr3t-token-value"


def tracing() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def recorded_text(span: ReadableSpan) -> str:
    """Every attribute and event of ``span``, as text (to look for arguments)."""
    parts: list[Any] = [span.name, dict(span.attributes or {})]
    parts += [(event.name, dict(event.attributes or {})) for event in span.events]
    return repr(parts)


def test_runs_are_linked_to_the_enqueuing_span(app: duly.App) -> None:
    provider, exporter = tracing()
    app.add_hook(OtelHook(provider))
    fast = duly.Backoff(base=0.01, cap=0.02)

    @app.task(name="o.ok")
    def ok(n: int, token: str) -> int:
        with provider.get_tracer("task").start_as_current_span("inside the task"):
            return n

    @app.task(name="o.flaky", retries=2, backoff=fast)
    def flaky() -> None:
        if duly.current_job().attempt == 1:
            raise RuntimeError("first attempt fails")

    @app.task(name="o.boom", retries=0, queue="risky")
    def boom() -> None:
        raise ValueError("boom")

    with provider.get_tracer("test").start_as_current_span("request") as request:
        jobs = [ok.enqueue(1, token=SECRET), flaky.enqueue(), boom.enqueue()]
    duly.testing.run_jobs(app, jobs, queues=["default", "risky"])

    spans = exporter.get_finished_spans()
    producers = {
        s.attributes["messaging.message.id"]: s for s in spans if s.kind == SpanKind.PRODUCER
    }
    runs: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        if span.kind == SpanKind.CONSUMER:
            runs.setdefault(span.attributes["messaging.message.id"], []).append(span)
    assert set(producers) == set(runs) == {job.id for job in jobs}
    for job in jobs:
        producer = producers[job.id]
        assert producer.parent is not None
        assert producer.parent.span_id == request.get_span_context().span_id
        assert producer.attributes["messaging.system"] == "duly"
        for run in runs[job.id]:
            assert run.parent is None  # a trace of its own ...
            (link,) = run.links  # ... linked to the enqueue
            assert link.context.trace_id == producer.context.trace_id
            assert link.context.span_id == producer.context.span_id
            assert run.context.trace_id != producer.context.trace_id
            assert run.attributes["messaging.destination.name"] == app.get_job(job.id).queue
            assert run.attributes["messaging.operation.type"] == "process"

    (ok_run,) = runs[jobs[0].id]
    assert ok_run.attributes["duly.outcome"] == "succeeded"
    (inside,) = [s for s in spans if s.name == "inside the task"]
    assert inside.parent is not None and inside.parent.span_id == ok_run.context.span_id
    assert ok_run.status.status_code != StatusCode.ERROR
    first, second = sorted(runs[jobs[1].id], key=lambda s: s.attributes["duly.attempt"])
    assert (first.attributes["duly.attempt"], second.attributes["duly.attempt"]) == (1, 2)
    assert first.status.status_code == StatusCode.ERROR
    assert [e.name for e in first.events] == ["retry", "exception"]
    assert second.attributes["duly.outcome"] == "succeeded"
    (boom_run,) = runs[jobs[2].id]
    assert boom_run.status.status_code == StatusCode.ERROR
    assert [e.name for e in boom_run.events] == ["failed", "exception"]
    assert boom_run.attributes["duly.max_attempts"] == 1
    # no argument ever reaches a span
    assert not [s.name for s in spans if SECRET in recorded_text(s)]
    # the trace context travels in the job; the arguments read back unchanged
    assert app.get_job(jobs[0].id).kwargs == {"token": SECRET}


def test_no_context_carried_without_a_recording_tracer(app: duly.App, stored: Any) -> None:
    app.add_hook(OtelHook(NoOpTracerProvider()))

    @app.task(name="o.plain")
    def plain(n: int) -> None: ...

    job = plain.enqueue(1)
    assert stored(app, job.id)[0].payload == b'{"args":[1],"kwargs":{}}'


def test_the_trace_context_is_a_header_not_an_argument(app: duly.App, stored: Any) -> None:
    provider, exporter = tracing()
    app.add_hook(OtelHook(provider))

    @app.task(name="o.plain")
    def plain(n: int) -> int:
        return n

    job = plain.enqueue(1)
    (producer,) = exporter.get_finished_spans()
    ctx = producer.get_span_context()
    assert ctx is not None
    traceparent = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"
    assert stored(app, job.id)[0].payload == (
        b'{"args":[1],"kwargs":{},"headers":{"traceparent":"%s"}}' % traceparent.encode()
    )
    info = app.get_job(job.id)
    assert info is not None and (info.args, info.kwargs) == ([1], {})


def test_a_job_enqueued_by_0x_still_links_its_run(app: duly.App) -> None:
    """Rolling upgrade: duly 0.x's OtelHook spliced its trace context into the payload as a
    last key; a worker of this version reads it as the job's ``traceparent`` header."""
    provider, exporter = tracing()
    app.add_hook(OtelHook(provider))
    ran: list[tuple[int, str]] = []

    @app.task(name="o.old")
    def old(n: int, label: str) -> None:
        ran.append((n, label))

    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    payload = b'{"args":[5],"kwargs":{"label":"x"},"traceparent":"%s"}' % traceparent.encode()
    job_id = asyncio.run(_store_as_0x(app, "o.old", payload))
    duly.testing.run_jobs(app, [job_id])
    assert ran == [(5, "x")]
    (run,) = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CONSUMER]
    (link,) = run.links
    assert (link.context.trace_id, link.context.span_id) == (
        0x0AF7651916CD43DD8448EB211C80319C,
        0xB7AD6B7169203331,
    )
    info = app.get_job(job_id)
    assert info is not None and (info.args, info.kwargs) == ([5], {"label": "x"})


def test_parse_traceparent() -> None:
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert parse_traceparent(traceparent) == (
        0x0AF7651916CD43DD8448EB211C80319C,
        0xB7AD6B7169203331,
        1,
    )
    assert parse_traceparent(None) is None
    assert parse_traceparent("00-zz") is None
    assert parse_traceparent(traceparent + "-extra") is None
    assert parse_traceparent("00-" + "0" * 32 + "-b7ad6b7169203331-01") is None


async def _store_as_0x(app: duly.App, task: str, payload: bytes) -> str:
    """Store a job with ``payload`` as it stands, as an older duly would have."""
    try:
        now = app.clock.now()
        job = NewJob(new_id(), task, "default", payload, 1, None, 0, now, now)
        (result,) = await (await app.backend()).enqueue([job])
        return result.id
    finally:
        await app.aclose()


def test_a_secret_value_quoted_by_an_exception_stays_out_of_spans(app: duly.App) -> None:
    provider, exporter = tracing()
    app.add_hook(OtelHook(provider))

    @app.task(name="o.leaky", retries=0, secret=("token",))
    def leaky(token: str) -> None:
        raise PermissionError(f"upstream refused {token}")

    job = leaky.enqueue(SECRET)
    duly.testing.run_jobs(app, [job])
    (run,) = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CONSUMER]
    assert run.status.status_code == StatusCode.ERROR
    (exception,) = [e for e in run.events if e.name == "exception"]
    assert exception.attributes["exception.type"] == "PermissionError"
    assert exception.attributes["exception.message"] == "upstream refused ***"
    assert SECRET not in recorded_text(run)
