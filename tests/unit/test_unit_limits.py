"""Key templates, rate strings and the GCRA maths, written once for every backend."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duly import ConfigurationError
from duly._limits import MAX_KEY_LENGTH, KeyTemplate, RateLimit, gcra_slots, parse_rate
from duly._records import RateRequest


def sync_team(team_id: str, full: bool = False) -> None: ...


def test_a_template_renders_from_arguments_with_defaults() -> None:
    key = KeyTemplate("team:{team_id}:{full}", sync_team, "key")
    assert key.render(("acme",), {}) == "team:acme:False"
    assert key.render((), {"team_id": "x", "full": True}) == "team:x:True"


def test_true_keys_every_argument_canonically() -> None:
    key = KeyTemplate(True, sync_team, "unique")
    by_position = key.render(("acme",), {"full": True})
    assert by_position == key.render((), {"full": True, "team_id": "acme"})


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("", "non-empty"),
        ("{}", "name the parameters"),
        ("{0}", "name the parameters"),
        ("{nope}", "not a parameter"),
        ("{team_id", "not a valid template"),
    ],
)
def test_a_bad_template_is_refused_at_registration(template: Any, why: str) -> None:
    with pytest.raises(ConfigurationError, match=why):
        KeyTemplate(template, sync_team, "mutex")


def test_a_rendered_key_over_the_limit_is_refused() -> None:
    key = KeyTemplate("{team_id}", sync_team, "key")
    with pytest.raises(ValueError, match=str(MAX_KEY_LENGTH)):
        key.render(("x" * (MAX_KEY_LENGTH + 1),), {})


@pytest.mark.parametrize(
    ("text", "count", "period"),
    [("10/s", 10, 1.0), ("100/m", 100, 60.0), ("5/h", 5, 3600.0), ("3/10s", 3, 10.0)],
)
def test_rates(text: str, count: int, period: float) -> None:
    assert parse_rate(text) == RateLimit(count, period)


@pytest.mark.parametrize("text", ["", "10", "10/x", "0/s", "-1/s", "ten/s", "10/0s"])
def test_bad_rates_are_configuration_errors(text: str) -> None:
    with pytest.raises(ConfigurationError, match="rate_limit"):
        parse_rate(text)


@given(
    burst=st.integers(1, 20),
    interval=st.floats(0.01, 10),
    arrivals=st.lists(st.floats(0, 100), min_size=1, max_size=60),
)
def test_gcra_never_starts_more_than_burst_plus_elapsed_over_interval(
    burst: int, interval: float, arrivals: list[float]
) -> None:
    """Over any window from the first start, starts <= burst + window / interval."""
    state: dict[str, tuple[float, float]] = {}
    starts = []
    for now in sorted(arrivals):
        [start] = gcra_slots([RateRequest("k", interval, burst, 0.0)], now, state)
        assert start >= now  # a slot never starts in the past
        starts.append(start)
    first = min(starts)
    for i, start in enumerate(sorted(starts)):
        assert i + 1 <= burst + (start - first) / interval + 1e-6
