"""Values that must arrive exactly as given, on every backend (issue 28): user dicts that look
like a sealed envelope, zone-aware datetimes; and task names that must be given."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import duly
import duly.testing
from duly._errors import ConfigurationError

ENVELOPES: list[Any] = [
    {"$sealed": "gAAAA-not-a-token"},
    {"$sealed": {"nested": [1, 2]}},
    {"$literal": {"$sealed": "x"}},
    {"$literal": 1},
    {"$sealed": "x", "other": 1},
]


@pytest.mark.parametrize("key", [None, "k1"])
def test_a_dict_that_looks_like_an_envelope_arrives_as_given(
    make_app: Callable[..., duly.App], key: str | None
) -> None:
    app = make_app(secret_key=key)

    @app.task(name="echo", retries=0, secret=("hidden",))
    def echo(value: dict[str, Any], hidden: dict[str, Any]) -> list[Any]:
        return [value, hidden]

    @app.task(name="typed", retries=0)  # a set: every argument decoded by its type
    def typed(value: dict[str, Any], ids: set[int]) -> list[Any]:
        return [value, value]

    jobs = [echo.enqueue(value, hidden=value) for value in ENVELOPES]
    jobs += [typed.enqueue(value, {1}) for value in ENVELOPES]
    duly.testing.run_jobs(app, jobs)
    for value, job in zip(ENVELOPES * 2, jobs, strict=True):
        info = app.get_job(job.id)
        assert info is not None and info.status == "succeeded", info and info.error
        assert info.result == [value, value]
        assert info.args[0] == value  # shown as given, not as stored


def test_an_empty_task_name_is_refused(app: duly.App) -> None:
    with pytest.raises(ConfigurationError, match="non-empty"):
        app.task(name="")(lambda: None)
    with pytest.raises((ConfigurationError, ValueError), match="non-empty"):
        app.task(name=" ")(lambda: None)
    assert not app.tasks
