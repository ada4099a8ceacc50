"""Enqueue-time options (PRODUCT §15): backoff strategies, own ids, expiry, debounce; on
every backend."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

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


# -- options(id=) ------------------------------------------------------------------------------


def test_an_own_id_comes_back_while_its_job_is_retained(app: duly.App, run_burst) -> None:
    @app.task(name="t.invoice")
    def invoice(n: int) -> int:
        return n * 2

    job = invoice.options(id="invoice-42").enqueue(21)
    assert (job.id, job.deduplicated) == ("invoice-42", False)
    again = invoice.options(id="invoice-42").enqueue(99)
    assert (again.id, again.deduplicated) == ("invoice-42", True)
    many = app.enqueue_many(
        [invoice.options(id="invoice-42").s(1), invoice.options(id="invoice-43").s(2)]
    )
    assert [(j.id, j.deduplicated) for j in many] == [("invoice-42", True), ("invoice-43", False)]
    run_burst(app)
    assert info_of(app, "invoice-42").result == 42  # the first enqueue's arguments
    done = invoice.options(id="invoice-42").enqueue(7)  # finished but retained: still that job
    assert done.deduplicated and info_of(app, "invoice-42").status == "succeeded"
    assert {i.id for i in app.jobs(task=invoice.name)} == {"invoice-42", "invoice-43"}


def test_many_threads_enqueueing_one_own_id_store_one_job(app: duly.App) -> None:
    @app.task(name="t.invoice")
    def invoice(n: int) -> None:
        pass

    start = threading.Barrier(10)
    jobs: list[duly.Job] = []
    lock = threading.Lock()

    def burst() -> None:
        start.wait(10)
        for n in range(10):
            job = invoice.options(id="invoice-7").enqueue(n)
            with lock:
                jobs.append(job)

    threads = [threading.Thread(target=burst) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(jobs) == 100 and {j.id for j in jobs} == {"invoice-7"}
    assert sum(not j.deduplicated for j in jobs) == 1
    assert len(app.jobs(task=invoice.name, limit=1000)) == 1


@pytest.mark.parametrize("bad", ["", "a b", "ab\n", "x" * 129, "-leading", "a/b", "naïve"])
def test_an_invalid_own_id_is_refused_before_anything_is_stored(app: duly.App, bad: str) -> None:
    @app.task(name="t.invoice")
    def invoice() -> None:
        pass

    with pytest.raises(duly.ConfigurationError):
        invoice.options(id=bad).enqueue()
    assert app.jobs(task=invoice.name) == []


# -- expires= ----------------------------------------------------------------------------------


def test_a_job_not_started_by_its_expiry_never_runs(make_app, run_burst, caplog) -> None:
    from prometheus_client import CollectorRegistry

    from duly.observability import PrometheusHook

    clock = duly.ManualClock()
    app = make_app(clock=clock)
    registry = CollectorRegistry()
    app.add_hook(PrometheusHook(registry, clock=app.clock))
    told: list[str] = []

    class Told(duly.Hook):
        def expired(self, record) -> None:
            told.append(record.id)

    app.add_hook(Told())
    ran: list[str] = []

    @app.task(name="t.otp")
    def send_otp(to: str) -> None:
        ran.append(to)

    stale = send_otp.options(expires=timedelta(minutes=5)).enqueue("late@x")
    at = datetime.fromtimestamp(clock.now(), UTC) + timedelta(hours=1)
    fresh = send_otp.options(expires=at).enqueue("fine@x")
    assert info_of(app, stale.id).expires_at == datetime.fromtimestamp(clock.now() + 300, UTC)
    assert info_of(app, fresh.id).expires_at == at
    clock.advance(600)
    with caplog.at_level("WARNING", logger="duly.worker"):
        run_burst(app)
    assert ran == ["fine@x"]
    info = info_of(app, stale.id)
    assert info.status == "cancelled" and info.started_at is None and info.attempts == 0
    assert info.error is not None and info.error["type"] == "JobExpired"
    assert info_of(app, fresh.id).status == "succeeded"
    assert told == [stale.id]
    assert f"job {stale.id}" in caplog.text and "expired before it started" in caplog.text
    labels = {"task": "t.otp", "queue": "default"}
    assert registry.get_sample_value("duly_jobs_expired_total", labels) == 1.0
    with pytest.raises(duly.JobFailed):
        stale.result(timeout=1)


def test_a_task_setting_gives_every_job_an_expiry(make_app, run_burst) -> None:
    clock = duly.ManualClock()
    app = make_app(clock=clock)

    @app.task(name="t.ping", expires=60)
    def ping() -> str:
        return "pong"

    job = ping.enqueue()
    longer = ping.options(expires=timedelta(hours=1)).enqueue()  # the option wins
    assert info_of(app, job.id).expires_at == datetime.fromtimestamp(clock.now() + 60, UTC)
    clock.advance(61)
    run_burst(app)
    assert info_of(app, job.id).status == "cancelled"
    assert info_of(app, longer.id).status == "succeeded"


@pytest.mark.parametrize(
    "bad", [0, -1, "soon", datetime(2030, 1, 1), timedelta(seconds=-5)], ids=repr
)
def test_an_invalid_expiry_is_refused_before_anything_is_stored(app: duly.App, bad) -> None:
    @app.task(name="t.x")
    def x() -> None:
        pass

    with pytest.raises(duly.ConfigurationError):
        x.options(expires=bad).enqueue()
    assert app.jobs(task=x.name) == []


# -- debounce= ---------------------------------------------------------------------------------


def test_debounce_runs_once_with_the_last_arguments_after_the_calls_stop(
    make_app, run_burst
) -> None:
    clock = duly.ManualClock()
    app = make_app(clock=clock)
    ran: list[tuple[int, str]] = []

    @app.task(name="t.reindex", unique="{doc_id}", debounce=timedelta(seconds=10))
    def reindex(doc_id: int, text: str) -> None:
        ran.append((doc_id, text))

    first = reindex.enqueue(7, "a")
    assert info_of(app, first.id).scheduled_for == datetime.fromtimestamp(clock.now() + 10, UTC)
    clock.advance(5)
    again = reindex.enqueue(7, "b")
    assert (again.id, again.deduplicated) == (first.id, True)
    info = info_of(app, first.id)
    assert info.args == [7, "b"] and info.status == "scheduled"
    assert info.scheduled_for == datetime.fromtimestamp(clock.now() + 10, UTC)  # pushed back
    other = reindex.enqueue(8, "x")  # another key: a job of its own
    assert not other.deduplicated
    clock.advance(6)
    run_burst(app)
    assert ran == []  # 11 s after the first call, 6 s after the last: still waiting
    clock.advance(5)
    run_burst(app)
    assert sorted(ran) == [(7, "b"), (8, "x")]
    assert info_of(app, first.id).status == "succeeded"


@pytest.mark.parametrize(
    "settings",
    [
        {"debounce": 10},
        {"debounce": 10, "unique": True, "unique_until": "finish"},
        {"debounce": 0, "unique": True},
        {"debounce": "soon", "unique": True},
    ],
    ids=["no-unique", "until-finish", "zero", "text"],
)
def test_an_invalid_debounce_is_a_configuration_error(tmp_path, settings) -> None:
    app = duly.App(f"sqlite:///{tmp_path / 'never.db'}")
    with pytest.raises(duly.ConfigurationError):
        app.task(name="t.x", **settings)(lambda doc_id: None)
    assert not (tmp_path / "never.db").exists()
