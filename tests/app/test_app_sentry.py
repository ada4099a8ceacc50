"""``duly.observability.SentryHook``: failed jobs reach Sentry with their context and secret
arguments redacted, read from envelopes a local transport captured (no network)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import sentry_sdk
from sentry_sdk.envelope import Envelope
from sentry_sdk.transport import Transport

import duly
import duly.testing
from duly.observability import SentryHook

TOKEN = "tok-9f8e7d6c5b4a"


class Captured(Transport):
    """Keeps every envelope the SDK would send."""

    envelopes: list[Envelope] = []

    def capture_envelope(self, envelope: Envelope) -> None:
        Captured.envelopes.append(envelope)


@pytest.fixture
def sentry() -> Iterator[None]:
    """Sentry on, sending to ``Captured`` (no network) for the test, then off again."""
    Captured.envelopes = []
    dsn = "http://public@127.0.0.1:9/1"  # never reached: the transport keeps the envelopes
    sentry_sdk.init(dsn=dsn, transport=Captured, default_integrations=False)
    yield
    sentry_sdk.flush()
    sentry_sdk.init()  # no DSN: reporting off for the next tests


def sent_events() -> list[dict[str, Any]]:
    """The error events Sentry sent during the test (as their JSON)."""
    sentry_sdk.flush()
    found = []
    for envelope in Captured.envelopes:
        for item in envelope.items:
            if item.type == "event":
                found.append(json.loads(item.payload.get_bytes()))
    return found


@pytest.mark.usefixtures("sentry")
def test_a_failed_job_is_reported_with_its_context_and_no_secret(app: duly.App) -> None:
    app.add_hook(SentryHook(app, secret=("mfa_code",)))

    @app.task(name="s.login", retries=1, backoff=duly.Backoff(base=0.01, cap=0.02), queue="auth")
    def login(user: str, token: str, mfa_code: str = "") -> None:
        raise PermissionError(f"upstream refused token {token} for {user}")

    job = login.options(key="user:7").enqueue("ada", TOKEN, mfa_code="hunter2-pass")
    duly.testing.run_jobs(app, [job], queues=["auth"])

    (event,) = sent_events()  # the last attempt only: retries are not reported by default
    assert event["level"] == "error"
    assert event["tags"]["duly.task"] == "s.login"
    assert event["tags"]["duly.queue"] == "auth"
    context = event["contexts"]["duly"]
    assert context["job_id"] == job.id
    assert (context["task"], context["queue"], context["key"]) == ("s.login", "auth", "user:7")
    assert (context["attempt"], context["max_attempts"]) == (2, 2)
    assert context["args"][0] == "ada"
    assert context["kwargs"] == {"mfa_code": "***"}
    (exception,) = event["exception"]["values"]
    assert exception["type"] == "PermissionError"
    text = json.dumps(event)
    assert "hunter2-pass" not in text
    frames = exception["stacktrace"]["frames"]
    assert frames[-1]["function"] == "login"
    assert frames[-1]["vars"]["mfa_code"] == "***"
    assert frames[-1]["vars"]["user"] == "'ada'"  # the rest as Sentry shows it


@pytest.mark.usefixtures("sentry")
def test_secret_values_are_redacted_everywhere_and_retries(app: duly.App) -> None:
    app.add_hook(SentryHook(app, secret=("token",), retries=True))

    @app.task(name="s.sync", retries=1, backoff=duly.Backoff(base=0.01, cap=0.02))
    def sync(team: int, token: str) -> None:
        raise RuntimeError(f"bad token {token}")

    job = sync.enqueue(7, TOKEN)
    duly.testing.run_jobs(app, [job])
    retry, final = sent_events()
    assert (retry["level"], final["level"]) == ("warning", "error")
    assert [e["contexts"]["duly"]["attempt"] for e in (retry, final)] == [1, 2]
    for event in (retry, final):
        assert event["contexts"]["duly"]["args"] == [7, "***"]
        assert TOKEN not in json.dumps(event)  # nor in the message that quoted it
        assert "bad token ***" in json.dumps(event)


@pytest.mark.usefixtures("sentry")
def test_a_sealed_secret_is_scrubbed_from_the_report(make_app: Any) -> None:
    app = make_app(secret_key="sentry-test-key")
    app.add_hook(SentryHook(app))

    @app.task(name="s.sealed", retries=0, secret=("token",))
    def sealed(team: int, token: str) -> None:
        raise RuntimeError(f"bad token {token}")

    job = sealed.enqueue(7, TOKEN)
    duly.testing.run_jobs(app, [job])
    (event,) = sent_events()
    assert event["contexts"]["duly"]["args"] == [7, "***"]
    assert TOKEN not in json.dumps(event) and "bad token ***" in json.dumps(event)
