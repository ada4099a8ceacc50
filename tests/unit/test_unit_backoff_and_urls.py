"""Retry backoff and backend URLs: checked up front, shown without secrets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import duly
from duly import Backoff, ConfigurationError
from duly.backends import backend_from_url, redact_url, split_url


@given(attempt=st.integers(1, 200))
def test_backoff_stays_under_its_ceiling_which_doubles_to_the_cap(attempt: int) -> None:
    backoff = Backoff(base=0.5, cap=60)
    assert 0 <= backoff.delay(attempt) <= backoff.ceiling(attempt) <= 60
    assert backoff.ceiling(1) == 0.5 and backoff.ceiling(2) == 1.0 and backoff.ceiling(50) == 60


@pytest.mark.parametrize(("base", "cap"), [(0, 10), (-1, 10), (10, 1)])
def test_bad_backoff(base: float, cap: float) -> None:
    with pytest.raises(ValueError):
        Backoff(base=base, cap=cap)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:hunter2@h:6379/0", "redis://:***@h:6379/0"),
        ("postgresql://u:hunter2@h/db", "postgresql://u:***@h/db"),
        (
            "postgresql:///db?password=hunter2&sslmode=off",
            "postgresql:///db?password=***&sslmode=off",
        ),
        ("sqlite:///duly.db", "sqlite:///duly.db"),
    ],
)
def test_urls_are_shown_without_their_secrets(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_duly_s_own_query_parameters_are_split_off() -> None:
    assert split_url("redis://h/0?namespace=a&x=1") == ("redis://h/0?x=1", {"namespace": "a"})
    assert split_url("sqlite:///d.db") == ("sqlite:///d.db", {})


@pytest.mark.parametrize(
    "url",
    [
        "mysql://localhost/db",
        "localhost:6379",
        "redis://127.0.0.1:notaport/0",
        "redis://127.0.0.1:6379/abc",
        "postgresql://h:99999/db",
    ],
)
def test_bad_urls_are_configuration_errors_before_any_connection(url: str) -> None:
    with pytest.raises(ConfigurationError):
        backend_from_url(url)


def test_a_url_names_the_backend_without_opening_it(tmp_path: object) -> None:
    backend = backend_from_url(f"sqlite:///{tmp_path}/never-opened.db")
    assert isinstance(backend, duly.Backend)
    assert not (tmp_path / "never-opened.db").exists()  # type: ignore[operator]
