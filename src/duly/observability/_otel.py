"""OpenTelemetry tracing of jobs (``pip install 'duly[otel]'``): ``app.add_hook(OtelHook())``.

- **Enqueue**: a PRODUCER span ``create <queue>`` per job, a child of the enqueuing code's
  current span, and its W3C trace context carried in the job's headers (see below).
- **Each run**: a CONSUMER span ``process <queue>``, the root of a trace of its own, *linked* to
  the job's producer span (OpenTelemetry's messaging semantic conventions: a job may run several
  times, long after its enqueue, so its runs are not children of the enqueuing request). Its
  attributes say the task, the attempt and the worker; a retry, a release, a lost worker are
  events; a failure sets the span's status to ERROR with the exception. It is the current span
  while the task runs, so spans the task opens are its children.
- **Nothing about arguments** is recorded: no argument, payload or result ever reaches a span
  (so arguments named in ``secret=`` never do either). An exception is recorded as the task
  raised it, but with a secret argument's value scrubbed out of its text (as it is stored).

The trace context rides in the job's headers (``NewJob.headers``, stored with the job by the
payload codec, never an argument): ``{"traceparent": "00-<trace id>-<span id>-<flags>"}``. A job
enqueued without a recording span (no SDK configured, or no hook) carries nothing. A job
enqueued by duly 0.x, whose hook spliced the key into the payload itself, reads the same.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from duly._errors import ConfigurationError
from duly._hooks import Hook

if TYPE_CHECKING:
    from duly._records import JobRecord, NewJob, Outcome

__all__ = ["HEADER", "OtelHook", "parse_traceparent", "require_otel"]

#: The header that carries the trace context (W3C ``traceparent``).
HEADER = "traceparent"
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


def require_otel() -> Any:
    """The ``opentelemetry.trace`` module; ``ConfigurationError`` naming the extra if missing."""
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ConfigurationError(
            "OpenTelemetry tracing needs opentelemetry-api: pip install 'duly[otel]'"
        ) from exc
    return trace


def parse_traceparent(value: str | None) -> tuple[int, int, int] | None:
    """The (trace id, span id, flags) of a W3C ``traceparent`` value, or None if it is not one
    (or names the invalid all-zero trace or span)."""
    match = _TRACEPARENT.fullmatch(value) if value else None
    if match is None:
        return None
    trace_id, span_id, flags = (int(part, 16) for part in match.groups())
    return (trace_id, span_id, flags) if trace_id and span_id else None


class OtelHook(Hook):
    """Producer spans on enqueue and consumer spans per run, linked (see the module doc).

    ``tracer_provider``: where spans go (the global one when None, as set by the SDK or
    ``opentelemetry-instrument``).
    """

    def __init__(self, tracer_provider: Any = None) -> None:
        trace = require_otel()
        from opentelemetry import context
        from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

        self._root = context.Context()  # a run's span starts a trace of its own
        self._attach, self._in_context = context.attach, trace.set_span_in_context
        self._Link, self._SpanContext, self._TraceFlags = Link, SpanContext, TraceFlags
        self._Status, self._StatusCode, self._SpanKind = Status, StatusCode, SpanKind
        self.tracer = trace.get_tracer("duly", tracer_provider=tracer_provider)
        # The span of each run this process started and has not ended, by job id.
        self._runs: dict[str, Any] = {}

    def enqueuing(self, jobs: Sequence[NewJob]) -> None:
        """Open and close a PRODUCER span per job; carry its context in the job's headers."""
        for job in jobs:
            span = self.tracer.start_span(
                f"create {job.queue}",
                kind=self._SpanKind.PRODUCER,
                attributes={
                    "messaging.system": "duly",
                    "messaging.operation.type": "create",
                    "messaging.operation.name": "create",
                    "messaging.destination.name": job.queue,
                    "messaging.message.id": job.id,
                    "duly.task": job.task,
                },
            )
            ctx = span.get_span_context()
            if span.is_recording() and ctx.is_valid:
                job.headers[HEADER] = (
                    f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"
                )
            span.end()

    def started(self, record: JobRecord) -> None:
        """Open the run's CONSUMER span, linked to its job's producer span."""
        links = []
        carried = parse_traceparent(record.headers.get(HEADER))
        if carried is not None:
            trace_id, span_id, flags = carried
            producer = self._SpanContext(
                trace_id, span_id, is_remote=True, trace_flags=self._TraceFlags(flags)
            )
            links.append(self._Link(producer))
        span = self.tracer.start_span(
            f"process {record.queue}",
            context=self._root,
            kind=self._SpanKind.CONSUMER,
            links=links,
            attributes={
                "messaging.system": "duly",
                "messaging.operation.type": "process",
                "messaging.operation.name": "process",
                "messaging.destination.name": record.queue,
                "messaging.message.id": record.id,
                "duly.task": record.task,
                "duly.attempt": record.attempts,
                "duly.max_attempts": record.max_attempts,
                "duly.worker": record.worker or "",
            },
        )
        previous = self._runs.pop(record.id, None)
        if previous is not None:  # its end was never told here: close it, not leak it
            previous.end()
        self._runs[record.id] = span
        # The worker calls this in the run's own context (its asyncio task, copied to the
        # thread of a sync task), which ends with the run: the task's own spans nest in this
        # one, and nothing needs detaching.
        self._attach(self._in_context(span))

    def finished(self, record: JobRecord, outcome: Outcome, error: BaseException | None) -> None:
        """End the run's span with its outcome (a failure: status ERROR and the exception)."""
        span = self._runs.pop(record.id, None)
        if span is None:
            return
        span.set_attribute("duly.outcome", outcome.kind)
        if outcome.kind == "retry":
            span.add_event(
                "retry", {"duly.attempt": record.attempts, "duly.retry_at": outcome.run_at or 0.0}
            )
        elif outcome.kind == "release":
            span.add_event("release", {"duly.run_at": outcome.run_at or 0.0})
        elif outcome.kind == "failed":
            span.add_event("failed", {"duly.attempt": record.attempts})
        if error is not None and outcome.kind in ("retry", "failed"):
            stored = _last_entry(outcome.errors)
            if stored is not None and stored.get("message") != str(error):
                # The worker scrubbed a secret argument's value out of it: record that text.
                span.add_event(
                    "exception",
                    {
                        "exception.type": str(stored.get("type", type(error).__name__)),
                        "exception.message": str(stored.get("message", "")),
                        "exception.stacktrace": str(stored.get("traceback", "")),
                    },
                )
            else:
                span.record_exception(error)
            span.set_status(self._Status(self._StatusCode.ERROR, type(error).__name__))
        span.end()

    def abandoned(self, record: JobRecord, outcome: Outcome) -> None:
        """End the span of a run whose outcome the backend did not keep (cancelled, or lost)."""
        self._end_lost(record.id, "abandoned")

    def recovered(self, job_id: str, requeued: bool) -> None:
        """End the span of a run here whose lease lapsed (the job was taken back)."""
        self._end_lost(job_id, "recovered" if requeued else "quarantined")

    def _end_lost(self, job_id: str, event: str) -> None:
        span = self._runs.pop(job_id, None)
        if span is not None:
            span.add_event(event)
            span.set_attribute("duly.outcome", event)
            span.end()


def _last_entry(errors: bytes | None) -> dict[str, Any] | None:
    """The newest entry of a stored error history (what the worker kept of the failure)."""
    from duly._serialization import decode

    try:
        entries = decode(errors) if errors else None
    except ValueError:
        return None
    if isinstance(entries, list) and entries and isinstance(entries[-1], dict):
        return entries[-1]
    return None
