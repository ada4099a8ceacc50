"""The sync tasks' thread pool: threads start when a call needs one, up to its size; a call
stuck past its timeout gives its slot back at once."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from duly._errors import JobTimeout
from duly._worker.threads import ThreadRunner


def _run(runner: ThreadRunner, call, timeout: float | None = None):  # type: ignore[no-untyped-def]
    return runner.run(call, contextvars.copy_context(), timeout)


def test_no_thread_starts_before_a_call_needs_one() -> None:
    before = threading.active_count()
    runner = ThreadRunner(8)
    try:
        assert runner.started == 0
        assert threading.active_count() == before
    finally:
        runner.shutdown()


def test_calls_in_turn_reuse_one_thread_and_concurrent_ones_start_at_most_size() -> None:
    runner = ThreadRunner(3)

    async def main() -> list[int]:
        for _ in range(5):  # one after the other: the idle thread takes each
            assert await _run(runner, lambda: 1) == 1
        assert runner.started == 1
        gate = threading.Event()

        def blocked() -> int:
            gate.wait(5)
            return threading.get_ident()

        calls = [asyncio.ensure_future(_run(runner, blocked)) for _ in range(3)]
        await asyncio.sleep(0.05)
        gate.set()
        return list(await asyncio.gather(*calls))

    idents = asyncio.run(main())
    try:
        assert len(set(idents)) == 3  # three at once ran on three threads
        assert runner.started == 3  # the first thread was reused, two more started, no more
    finally:
        runner.shutdown()


def test_a_stuck_call_gives_its_slot_back_and_the_next_call_gets_a_fresh_thread() -> None:
    runner = ThreadRunner(1)
    release = threading.Event()

    def stuck() -> None:
        while not release.is_set():  # pure Python: the JobTimeout raised in it ends it
            time.sleep(0.001)

    async def main() -> int:
        with pytest.raises(JobTimeout):
            await _run(runner, stuck, timeout=0.05)
        return int(await _run(runner, lambda: 7, timeout=2))

    try:
        assert asyncio.run(main()) == 7  # not queued behind the stuck call: a new thread ran it
        assert runner.started == 2
    finally:
        release.set()
        runner.shutdown()
