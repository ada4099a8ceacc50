"""Values that must arrive exactly as given, on every backend (issue 28): user dicts that look
like a sealed envelope, zone-aware datetimes; and task names that must be given."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

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


BERLIN = ZoneInfo("Europe/Berlin")
AT = datetime(2024, 7, 1, 12, tzinfo=BERLIN)


@dataclass
class Meeting:
    at: datetime
    others: list[datetime]
    note: str = ""


def test_zone_aware_datetimes_keep_their_zone(app: duly.App) -> None:
    fixed = datetime(2024, 7, 1, 12, tzinfo=timezone(timedelta(hours=2)))

    @app.task(name="later", retries=0)
    def later(at: datetime, meeting: Meeting, each: dict[int, datetime]) -> datetime:
        assert at.tzinfo is BERLIN and meeting.at.tzinfo is BERLIN, (at, meeting)
        assert meeting.others[1].tzinfo == timezone(timedelta(hours=2)), meeting
        assert each[1].tzinfo is BERLIN and each[2].tzinfo == UTC, each
        return at + timedelta(days=120)  # across the change to winter time

    meeting = Meeting(AT, [AT, fixed], note="2024-07-01T12:00:00+02:00[Europe/Berlin]")
    job = later.enqueue(AT, meeting, {1: AT, 2: AT.astimezone(UTC)})
    duly.testing.run_jobs(app, [job])
    info = app.get_job(job.id)
    assert info is not None and info.status == "succeeded", info and info.error
    result = info.result
    assert result == datetime(2024, 10, 29, 12, tzinfo=BERLIN) and result.tzinfo is BERLIN
    assert result.utcoffset() == timedelta(hours=1)
    assert info.args[0] == "2024-07-01T12:00:00+02:00[Europe/Berlin]"  # RFC 9557, as stored


def test_a_fixed_offset_stays_an_offset_and_a_foreign_zone_is_refused(app: duly.App) -> None:
    @app.task(name="offset", retries=0)
    def offset(at: datetime) -> datetime:
        return at

    fixed = datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=-5)))
    job = offset.enqueue(fixed)
    duly.testing.run_jobs(app, [job])
    back = app.get_job(job.id).result  # type: ignore[union-attr]
    assert back == fixed and back.tzinfo == fixed.tzinfo

    class Foreign(tzinfo):  # e.g. pytz: JSON cannot name it
        def utcoffset(self, dt: datetime | None) -> timedelta:
            return timedelta(hours=3)

        def dst(self, dt: datetime | None) -> timedelta:
            return timedelta(0)

    with pytest.raises(duly.SerializationError, match="'at'"):
        offset.enqueue(at=datetime(2024, 1, 1, tzinfo=Foreign()))
