"""Enqueue-time options (PRODUCT §15): backoff strategies, own ids, expiry, debounce; on
every backend."""

from __future__ import annotations

from datetime import timedelta

import pytest

import duly

pytestmark = pytest.mark.timeout(60)


def info_of(app: duly.App, job_id: str) -> duly.JobInfo:
    info = app.get_job(job_id)
    assert info is not None, f"job {job_id} vanished"
    return info


@pytest.mark.parametrize(
    ("backoff", "first", "second"),
    [
        (lambda attempt, error: timedelta(seconds=100 * attempt + len(str(error))), 102, 202),
        (lambda attempt, error: 300.0, 300, 300),
        (duly.Backoff.constant(700), 700, 700),
        (duly.Backoff.linear(400, cap=500), 400, 500),
    ],
    ids=["callable-timedelta", "callable-seconds", "constant", "linear"],
)
def test_a_backoff_strategy_sets_each_retry_time(
    make_app, worker_thread, wait, backoff, first: float, second: float
) -> None:
    clock = duly.ManualClock()
    app = make_app(clock=clock)

    @app.task(name="t.doomed", retries=2, backoff=backoff)
    def doomed() -> None:
        raise ValueError("no")

    job = doomed.enqueue()
    with worker_thread(app):
        start = clock.now()
        retrying = wait(lambda: (i := info_of(app, job.id)).status == "retrying" and i)
        assert retrying.scheduled_for is not None
        assert retrying.scheduled_for.timestamp() == pytest.approx(start + first)
        clock.advance(first + 1)
        wait(lambda: (i := info_of(app, job.id)).status == "retrying" and i.attempts == 2)
        again = info_of(app, job.id)
        assert again.scheduled_for is not None
        assert again.scheduled_for.timestamp() == pytest.approx(clock.now() + second)


def test_a_backoff_that_fails_falls_back_to_the_default(
    make_app, worker_thread, wait, caplog
) -> None:
    clock = duly.ManualClock()
    app = make_app(clock=clock)

    @app.task(name="t.doomed", retries=1, backoff=lambda attempt, error: -5)
    def doomed() -> None:
        raise ValueError("no")

    job = doomed.enqueue()
    with caplog.at_level("ERROR", logger="duly.worker"), worker_thread(app):
        retrying = wait(lambda: (i := info_of(app, job.id)).status == "retrying" and i)
    assert retrying.scheduled_for is not None
    assert clock.now() <= retrying.scheduled_for.timestamp() <= clock.now() + 1  # Backoff()
    assert "its backoff failed" in caplog.text
