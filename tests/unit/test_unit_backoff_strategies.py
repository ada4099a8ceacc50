"""Backoff strategies (PRODUCT §15): constant, linear, exponential and a custom callable."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

import duly
from duly import Backoff, ConfigurationError
from duly._retry import check_backoff, retry_delay


@given(attempt=st.integers(1, 500))
def test_constant_waits_the_same_every_time(attempt: int) -> None:
    assert Backoff.constant(7).delay(attempt) == 7.0


@given(attempt=st.integers(1, 500))
def test_linear_grows_by_its_step_up_to_the_cap(attempt: int) -> None:
    backoff = Backoff.linear(2.5, cap=60)
    assert backoff.delay(attempt) == min(60.0, 2.5 * attempt)


def test_the_default_is_still_exponential_with_jitter() -> None:
    backoff = Backoff(base=0.5, cap=60)
    assert backoff.kind == "exponential"
    assert [backoff.ceiling(n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert 0 <= backoff.delay(3) <= 2.0


def test_a_callable_gets_the_attempt_and_the_error() -> None:
    seen = []

    def backoff(attempt: int, error: BaseException) -> timedelta:
        seen.append((attempt, str(error)))
        return timedelta(minutes=attempt)

    assert retry_delay(check_backoff(backoff), 3, ValueError("boom")) == 180.0
    assert seen == [(3, "boom")]
    assert retry_delay(lambda a, e: 4, 1, ValueError()) == 4.0


@pytest.mark.parametrize("answer", [-1, float("nan"), float("inf"), "5", None, True])
def test_a_callable_answering_nonsense_is_a_configuration_error(answer: object) -> None:
    with pytest.raises(ConfigurationError):
        retry_delay(lambda a, e: answer, 1, ValueError())  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize(
    "make",
    [
        lambda: Backoff.constant(0),
        lambda: Backoff.constant(-1),
        lambda: Backoff.constant("1"),
        lambda: Backoff.linear(0),
        lambda: Backoff.linear(10, cap=5),
        lambda: Backoff.linear(float("inf")),
        lambda: Backoff(base=1, cap=5, kind="cubic"),
        lambda: check_backoff(5),
        lambda: check_backoff(lambda: 1),
        lambda: check_backoff(lambda a, b, c: 1),
        lambda: check_backoff(Backoff),
    ],
    ids=[
        "constant(0)",
        "constant(-1)",
        "constant('1')",
        "linear(0)",
        "linear(cap<step)",
        "linear(inf)",
        "kind=cubic",
        "int",
        "no-arguments",
        "three-arguments",
        "the-class",
    ],
)
def test_invalid_backoffs_are_configuration_errors(make) -> None:
    with pytest.raises(ConfigurationError):
        make()


def test_a_task_refuses_a_callable_of_the_wrong_shape(tmp_path) -> None:
    app = duly.App(f"sqlite:///{tmp_path / 'never.db'}")
    with pytest.raises(ConfigurationError):
        app.task(backoff=lambda attempt: 1)(lambda: None)  # type: ignore[arg-type]
    assert not (tmp_path / "never.db").exists()
