"""Secret arguments of any JSON type, nested, in their common encodings, never leave the worker
(issue 28.3), and keys rendered from them are stored hashed (28.2). On every backend: what is
stored is read back raw (the SQLite file, the namespace's Redis keys, the schema's rows)."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, urlencode

import pytest
import sentry_sdk
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_app_sentry import Captured, sent_events

import duly
import duly.testing
from duly._secrets import redact_job
from duly.observability import OtelHook, SentryHook

PIN = 987654
RATE = 0.7315
PASSWORD = 'p@ss w/rd&x=1"é'
CREDS = {"user": "ann", "password": PASSWORD, "extra": [{"otp": 424242}]}


def stored_bytes(app: duly.App, url_and_namespace: tuple[str, str]) -> bytes:
    """Everything the backend stores for this test's namespace, raw."""
    url, namespace = url_and_namespace
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    if url.startswith("redis"):
        import redis

        client = redis.Redis.from_url(url)
        found = []
        for name in client.scan_iter(match=f"*{namespace}*", count=10_000):
            kind = client.type(name).decode()
            value: Any = {
                "string": client.get,
                "hash": client.hgetall,
                "list": lambda n: client.lrange(n, 0, -1),
                "set": client.smembers,
                "zset": lambda n: client.zrange(n, 0, -1),
                "stream": lambda n: client.xrange(n),
            }.get(kind, lambda n: b"")(name)
            found.append(repr((name, value)).encode())
        client.close()
        return b"\n".join(found)
    import psycopg

    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (namespace,),
        ).fetchall()
        rows = []
        for (table,) in tables:
            query = f'SELECT t::text FROM "{namespace}"."{table}" t'
            rows += [row[0] for row in conn.execute(query)]  # type: ignore[call-overload]
        return "\n".join(rows).encode()


def forms(value: Any) -> list[str]:
    """The texts a leak of ``value`` would show (each checked absent)."""
    if isinstance(value, dict):
        return [*forms(value["password"]), str(value["extra"][0]["otp"]), urlencode(value)]
    text = str(value)
    return [text, repr(text)[1:-1], json.dumps(text)[1:-1], quote(text, safe=""), quote_plus(text)]


LEAKS = [*forms(PIN), *forms(RATE), *forms(CREDS)]


def _leaky(app: duly.App) -> duly.Task[..., None]:
    @app.task(name="leaky", retries=0, secret=("pin", "rate", "creds"))
    def leaky(user: str, pin: int, rate: float, creds: dict[str, Any]) -> None:
        raise RuntimeError(
            f"bad pin {pin}, rate {rate!r} for {creds} ({json.dumps(creds)}) "
            f"[{urlencode(creds)}] {quote(creds['password'])} {quote_plus(creds['password'])}"
        )

    return leaky


def test_the_collector_covers_every_type_and_encoding() -> None:
    from duly._secrets import scrub, secret_texts

    texts = secret_texts([PIN, RATE, CREDS, [True, None, b"raw-bytes"]])
    for leak in [*LEAKS, "raw-bytes"]:
        clean = scrub(f"<{leak}>", texts)
        assert clean == "<***>" or leak == urlencode(CREDS), (leak, clean)
        assert not any(part in clean for part in ("424242", "p%40ss", "ann")), clean
    assert "True" not in texts and "None" not in texts and "user" not in texts
    # a short value is masked where it stands alone, not inside a longer number or word
    assert scrub("pin 42, line 420, x42", secret_texts([42])) == "pin ***, line 420, x42"


@pytest.mark.parametrize("key", [None, "k1"])
def test_non_string_secrets_are_scrubbed_everywhere(
    make_app: Callable[..., duly.App],
    url_and_namespace: tuple[str, str],
    caplog: pytest.LogCaptureFixture,
    key: str | None,
) -> None:
    app = make_app(secret_key=key)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app.add_hook(OtelHook(provider))
    app.add_hook(SentryHook(app))
    Captured.envelopes = []
    sentry_sdk.init(
        dsn="http://public@127.0.0.1:9/1", transport=Captured, default_integrations=False
    )
    try:
        job = _leaky(app).enqueue("ann", PIN, RATE, creds=CREDS)
        with caplog.at_level(logging.DEBUG):
            duly.testing.run_jobs(app, [job])
        events = sent_events()
    finally:
        sentry_sdk.flush()
        sentry_sdk.init()
    info = app.get_job(job.id)
    assert info is not None and info.status == "failed"
    shown = redact_job(app, info)
    assert shown.error is not None and shown.error["message"].startswith("bad pin ***, rate ***")
    outputs = {
        "stored errors": json.dumps(info.errors),
        "shown": repr(shown),
        "log": caplog.text,
        "otel": repr(
            [(e.name, e.attributes) for s in exporter.get_finished_spans() for e in s.events]
        ),
        "sentry": json.dumps(events),
    }
    assert len(events) == 1 and "bad pin ***" in outputs["sentry"]
    assert "bad pin ***" in outputs["otel"] and "bad pin ***" in outputs["log"]
    if key is not None:  # without one, the arguments themselves are stored as given
        outputs["stored"] = stored_bytes(app, url_and_namespace).decode("utf-8", "replace")
    for where, text in outputs.items():
        for leak in LEAKS:
            assert leak not in text, (where, leak)


def test_keys_from_secret_arguments_are_stored_hashed(
    make_app: Callable[..., duly.App], url_and_namespace: tuple[str, str]
) -> None:
    app = make_app(secret_key="key-one")
    token = "SUPERSECRET-123B"

    @app.task(name="uniq", unique=True, secret=("token",))
    def uniq(team: int, token: str) -> None: ...

    @app.task(name="mtx", mutex="m:{token}", secret=("token",))
    def mtx(token: str) -> None: ...

    @app.task(name="ckey", concurrency=2, concurrency_key="{token}", rate_limit="5/s",
              rate_key="{token}", unique="{token}", secret=("token",))  # fmt: skip
    def ckey(token: str) -> None: ...

    first = uniq.enqueue(1, token)
    again = uniq.enqueue(1, token)
    other = uniq.enqueue(2, token)
    assert again.deduplicated and again.id == first.id and not other.deduplicated
    mtx.enqueue(token)
    ckey.enqueue(token)
    assert ckey.enqueue(token).deduplicated
    duly.testing.run_jobs(app)
    raw = stored_bytes(app, url_and_namespace)
    assert token.encode() not in raw
    assert b"mutex:#" in raw and b"uniq:#" in raw
    # the same key hashes the same; another key differently; no key: SHA-256
    new = uniq.s(1, token).build(0.0).unique_key
    assert new == uniq.s(1, token).build(0.0).unique_key
    assert new is not None and new.startswith("uniq:#") and token not in new
    plain = make_app()

    @plain.task(name="uniq", unique=True, secret=("token",))
    def uniq2(team: int, token: str) -> None: ...

    hashed = uniq2.s(1, token).build(0.0).unique_key
    assert hashed is not None and hashed.startswith("uniq:#") and hashed != new
    assert plain.tasks["uniq"].s(1, "x").build(0.0).unique_key != hashed


def test_enqueue_errors_never_quote_a_secret(app: duly.App) -> None:
    @app.task(name="long", unique=True, secret=("creds",))
    def long(note: str, creds: dict[str, Any]) -> None: ...

    @app.task(name="render", mutex="{creds[nope]}", secret=("creds",))
    def render(creds: dict[str, Any]) -> None: ...

    @app.task(name="typed", secret=("pin",))
    def typed(pin: set[int]) -> None: ...

    @app.task(name="plainlong", unique=True)
    def plainlong(note: str) -> None: ...

    long.enqueue("x" * 600, CREDS)  # hashed: no length limit on a digest
    with pytest.raises(ValueError) as rendered:
        render.enqueue(CREDS)
    with pytest.raises(TypeError) as typed_error:
        typed.enqueue({PIN, "SUPERSECRET"})  # type: ignore[arg-type]
    with pytest.raises(ValueError) as too_long:
        plainlong.enqueue("SUPERSECRET-" * 60)
    for error in (rendered, typed_error, too_long):
        text = str(error.value)
        assert "SUPERSECRET" not in text and PASSWORD not in text and str(PIN) not in text, text
    assert "over the limit of 512" in str(too_long.value)
