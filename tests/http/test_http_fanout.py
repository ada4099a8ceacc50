"""Issue 28 item 8b: every SSE stream of a served app shares one backend reader.

Before, each stream read (on Redis: a blocking ``XREAD`` on a pooled connection of its own), so
more idle streams than the pool holds starved the API. The checks are on correctness, never on
timings: how many backend waits run at once, whether the API answers at all, whether every
client gets every event once and in order."""

from __future__ import annotations

import asyncio
import http.client
import json
from typing import Any

import pytest
from http_harness import AS_READ, Hub, Served, Stream

import duly._http.fanout
from duly.backends.events import EVENTS

pytestmark = pytest.mark.timeout(120)

#: More streams than the Redis backend's pool holds (64).
IDLE_STREAMS = 70


@pytest.fixture
def waits(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the backend's ``EventStore.wait`` calls running at once (``now``, ``most``)."""

    async def backend() -> Any:
        store = EVENTS.of(await hub.app.backend())
        await hub.app.aclose()
        return type(store)

    store_type = asyncio.run(backend())
    original = store_type.wait
    seen = {"now": 0, "most": 0}

    async def wait(self: Any, after: str, key: str | None, timeout: float) -> None:
        seen["now"] += 1
        seen["most"] = max(seen["most"], seen["now"])
        try:
            await original(self, after, key, timeout)
        finally:
            seen["now"] -= 1

    monkeypatch.setattr(store_type, "wait", wait)
    return seen


def _get(port: int, path: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path, headers=AS_READ)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_idle_streams_share_one_reader_and_leave_the_api_free(
    hub: Hub, served: Served, waits: dict[str, int]
) -> None:
    streams = [Stream(served.port, "/api/v1/events", AS_READ, 60) for _ in range(IDLE_STREAMS)]
    try:
        for stream in streams:
            assert stream.message()["retry"] == "2000"
        fanout = hub.client.app.state.event_fanout
        assert len(fanout.subscribers) == IDLE_STREAMS
        hub.add.enqueue(1, 1)
        for stream in streams[:5]:
            assert stream.job_event()["status"] == "queued"
        for _ in range(20):
            status, body = _get(served.port, "/api/v1/queues")
            assert status == 200 and [q["name"] for q in body["queues"]] == ["default"]
        assert waits["most"] == 1  # one backend wait for every stream, not one each
    finally:
        for stream in streams:
            stream.close()


def _queued(stream: Stream, count: int) -> list[dict[str, Any]]:
    seen = [stream.job_event() for _ in range(count)]
    ids = [int(e["id"]) for e in seen]
    assert ids == sorted(set(ids)), "events out of order or twice"
    return seen


@pytest.mark.parametrize("buffer", [duly._http.fanout.BUFFER, 1], ids=["live", "behind"])
def test_every_client_gets_every_event_once_in_order(
    hub: Hub, served: Served, monkeypatch: pytest.MonkeyPatch, buffer: int
) -> None:
    # buffer=1: every batch overflows the clients' buffers; each reads what it missed itself.
    monkeypatch.setattr(duly._http.fanout, "BUFFER", buffer)
    first = Stream(served.port, "/api/v1/events", AS_READ)
    before = hub.add.enqueue(0, 0)
    start = first.job_event()["id"]
    streams = [Stream(served.port, "/api/v1/events", AS_READ) for _ in range(4)]
    keyed = Stream(served.port, "/api/v1/events?key=mine", AS_READ)
    resumed = Stream(served.port, f"/api/v1/events?since={int(start) - 1}", AS_READ)
    for stream in [*streams, keyed, resumed]:
        assert stream.message()["retry"] == "2000"
    jobs = hub.app.enqueue_many(
        [hub.add.options(key="mine" if i % 10 == 0 else None).s(i, i) for i in range(600)]
    )
    want = [j.id for j in jobs]
    for stream in [first, *streams]:
        assert [e["job_id"] for e in _queued(stream, 600)] == want
    assert [e["job_id"] for e in _queued(keyed, 60)] == want[::10]
    assert [e["job_id"] for e in _queued(resumed, 601)] == [before.id, *want]
    for stream in [first, *streams, keyed, resumed]:
        stream.close()
