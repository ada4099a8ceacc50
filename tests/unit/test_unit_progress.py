"""``duly._progress``: what a run reports is kept in memory and taken once per write."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import duly
from duly._progress import CLEARED, RunProgress, decode_progress


def test_only_the_latest_values_are_taken_once() -> None:
    run = RunProgress()
    assert not run.pending and run.take("j") is None
    for i in range(1000):
        run.set_progress(i / 1000, f"item {i}", 100.0 + i)
        run.checkpoint({"after": i})
    assert run.pending and run.cursor == {"after": 999}
    report = run.take("j")
    assert report is not None and report.job_id == "j"
    progress = decode_progress(report.progress)
    assert progress == duly.Progress(0.999, "item 999", datetime.fromtimestamp(1099.0, UTC))
    assert report.cursor == b'{"after":999}'
    assert not run.pending and run.take("j") is None  # nothing new: nothing to write


def test_a_failed_write_is_given_back_unless_newer_values_came() -> None:
    run = RunProgress()
    run.set_progress(0.1, None, 1.0)
    run.checkpoint(1)
    report = run.take("j")
    assert report is not None
    run.checkpoint(2)
    run.give_back(report)
    again = run.take("j")
    assert again is not None
    assert again.progress == report.progress and again.cursor == b"2"


def test_starting_over_clears_a_stored_checkpoint_only() -> None:
    assert RunProgress().take("j", clear_cursor=True) is None  # nothing stored: no write
    resumed = RunProgress(b"41")
    assert resumed.cursor == 41
    report = resumed.take("j", clear_cursor=True)
    assert report is not None and report.cursor == CLEARED
    assert resumed.cursor is None


@pytest.mark.parametrize("raw", [None, b"", b"[]", b'{"fraction": 1}', b'{"x": 1, "at": 0}'])
def test_an_unreadable_progress_shows_as_none(raw: bytes | None) -> None:
    assert decode_progress(raw) is None


@pytest.mark.parametrize(
    ("fraction", "message", "error"),
    [
        (1.01, None, ValueError),
        (float("nan"), None, ValueError),
        ("1", None, TypeError),
        (False, None, TypeError),
        (0.5, b"x", TypeError),
        (0.5, "x" * 1001, ValueError),
    ],
)
def test_bad_progress_is_refused(fraction: object, message: object, error: type) -> None:
    with pytest.raises(error):
        RunProgress().set_progress(fraction, message, 0.0)  # type: ignore[arg-type]
