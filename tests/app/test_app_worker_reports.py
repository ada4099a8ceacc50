"""What a run leaves behind for people (PRODUCT §3, §10): stored tracebacks that start at the
task's code, ``duly.testing.run_jobs`` refusing jobs it cannot find, and the worker's log."""

from __future__ import annotations

import logging
import time

import pytest
from services import claim_as

import duly
import duly.testing

pytestmark = pytest.mark.timeout(60)


def _first_frame(traceback_text: str) -> str:
    """The first ``File ...`` line of the last exception of a formatted traceback (the one
    raised; chained causes come first)."""
    last = traceback_text.split("Traceback (most recent call last):")[-1]
    return next(line for line in last.splitlines() if line.lstrip().startswith("File"))


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_stored_traceback_starts_at_the_task(app: duly.App, run_burst, is_async: bool) -> None:
    def inner() -> None:
        try:
            raise KeyError("cause")
        except KeyError as exc:
            raise ValueError("broken") from exc

    if is_async:

        @app.task(name="t.broken", retries=0)
        async def broken() -> None:
            inner()

    else:

        @app.task(name="t.broken", retries=0)
        def broken() -> None:
            inner()

    job = broken.enqueue()
    run_burst(app)
    info = app.get_job(job.id)
    assert info is not None and info.error is not None
    text = info.error["traceback"]
    first = _first_frame(text)
    assert __file__ in first and "in broken" in first, text
    assert "duly/worker" not in text.split("The above exception")[-1], text
    # The chained exception is kept whole.
    assert "KeyError: 'cause'" in text and "ValueError: broken" in text


def test_traceback_of_a_worker_error_is_kept(app: duly.App, run_burst) -> None:
    """An error the worker itself raised (a sync job's timeout) keeps the worker's frames:
    there is no task frame to start at."""

    @app.task(name="t.stuck", retries=0, timeout=0.2)
    def stuck() -> None:
        time.sleep(2)

    job = stuck.enqueue()
    run_burst(app)
    info = app.get_job(job.id)
    assert info is not None and info.error is not None
    assert info.error["type"] == "JobTimeout"
    assert "threads.py" in info.error["traceback"]


def test_run_jobs_refuses_a_job_it_cannot_find(app: duly.App, make_app, tmp_path) -> None:
    @app.task(name="t.ok")
    def ok() -> int:
        return 1

    job = ok.enqueue()
    elsewhere = duly.App(f"sqlite:///{tmp_path / 'other.db'}")
    with pytest.raises(duly.JobNotFound) as caught:
        duly.testing.run_jobs(elsewhere, [job], timeout=10)
    assert isinstance(caught.value, duly.DulyError) and job.id in str(caught.value)
    assert f"sqlite:///{tmp_path / 'other.db'} (namespace" in str(caught.value)
    with pytest.raises(duly.JobNotFound, match="01NOTAJOB"):
        duly.testing.run_jobs(app, [job, "01NOTAJOB"], timeout=10)
    assert app.get_job(job.id).status == "queued", "nothing ran before the check"
    duly.testing.run_jobs(app, [job], timeout=20)
    assert app.get_job(job.id).status == "succeeded"


# -- the worker's log (PRODUCT §10: every retry, failure, recovery and quarantine at WARNING+) --


def _lines(caplog: pytest.LogCaptureFixture, job_id: str) -> list[logging.LogRecord]:
    """The duly.worker records of one job at WARNING or above."""
    return [
        r
        for r in caplog.records
        if r.name == "duly.worker" and r.levelno >= logging.WARNING and job_id in r.getMessage()
    ]


def _check_fields(record: logging.LogRecord, job: duly.Job, task: str, attempt: int) -> None:
    fields = record.__dict__
    assert fields["job_id"] == job.id and fields["task"] == task
    assert fields["attempt"] == attempt and isinstance(fields["worker"], str)


def test_retries_and_failures_are_logged(app: duly.App, caplog: pytest.LogCaptureFixture) -> None:
    @app.task(name="t.flaky", retries=1, backoff=duly.Backoff(base=0.01, cap=0.01))
    def flaky() -> None:
        raise ConnectionError(f"upstream down {duly.current_job().attempt}")

    @app.task(name="t.ok")
    def ok() -> int:
        return 1

    caplog.set_level(logging.DEBUG, logger="duly.worker")
    job, fine = flaky.enqueue(), ok.enqueue()
    duly.testing.run_jobs(app, [job, fine], install_signal_handlers=False)
    retry, failure = _lines(caplog, job.id)
    assert retry.levelno == logging.WARNING
    text = retry.getMessage()
    assert "t.flaky" in text and "attempt 1/2" in text and "retrying in" in text
    assert "ConnectionError: upstream down 1" in text
    _check_fields(retry, job, "t.flaky", 1)
    assert failure.levelno == logging.ERROR
    text = failure.getMessage()
    assert "failed for good" in text and "attempt 2/2" in text
    assert "ConnectionError: upstream down 2" in text
    _check_fields(failure, job, "t.flaky", 2)
    assert _lines(caplog, fine.id) == [], "a success is no warning"
    [success] = [r for r in caplog.records if fine.id in r.getMessage()]
    assert success.levelno == logging.DEBUG


def test_an_unknown_task_is_logged(
    app: duly.App, run_burst, caplog: pytest.LogCaptureFixture
) -> None:
    other = duly.App(app.url, namespace=app.namespace)

    @other.task(name="t.elsewhere")
    def elsewhere() -> None: ...

    job = elsewhere.enqueue()
    other.close()
    caplog.set_level(logging.INFO, logger="duly.worker")
    run_burst(app)
    [line] = _lines(caplog, job.id)
    assert line.levelno == logging.ERROR
    text = line.getMessage()
    assert "t.elsewhere" in text and "attempt 1/" in text
    assert "TaskNotFound: unknown task 't.elsewhere'" in text
    _check_fields(line, job, "t.elsewhere", 1)


@pytest.mark.parametrize(
    ("max_lost", "retries", "ends", "level", "words"),
    [
        (3, 2, "succeeded", logging.WARNING, ["recovered", "attempt 1/3", "LostWorker"]),
        (1, 0, "failed", logging.ERROR, ["quarantined", "attempt 1/1", "LostWorker: lost its"]),
    ],
    ids=["recovered", "quarantined"],
)
def test_a_job_recovered_from_a_dead_worker_is_logged(
    make_app,
    worker_thread,
    wait,
    caplog: pytest.LogCaptureFixture,
    max_lost: int,
    retries: int,
    ends: str,
    level: int,
    words: list[str],
) -> None:
    app = make_app(max_lost=max_lost)

    @app.task(name="t.orphan", retries=retries)
    def orphan() -> str:
        return "ok"

    job = orphan.enqueue()
    claim_as(app, job.id, "dead-worker", lease=-1)
    caplog.set_level(logging.INFO, logger="duly.worker")
    with worker_thread(app):
        wait(lambda: app.get_job(job.id).status == ends)
        wait(lambda: _lines(caplog, job.id))  # logged once the job is read back
    [line] = _lines(caplog, job.id)
    assert line.levelno == level
    text = line.getMessage()
    assert "t.orphan" in text and all(word in text for word in words), text
    _check_fields(line, job, "t.orphan", 1)
