"""Arguments and results round-trip exactly, or the call fails at enqueue (PRODUCT §12).

A value JSON cannot carry as it is must be restorable from the annotation; a call that does not
fit the signature is refused at enqueue; a stored job that no longer fits its task (a deploy
changed it) fails at once, without retries.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import itertools
import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgspec
import pytest

import duly
from duly._serialization import CallSpec
from duly.testing import run_jobs

pytestmark = pytest.mark.timeout(90)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Size(enum.IntEnum):
    SMALL = 1
    LARGE = 2


@dataclass
class Reading:
    at: datetime
    values: tuple[float, ...]


class Point(msgspec.Struct):
    x: int
    tags: frozenset[str]


class Thing:
    """Not JSON."""


AT = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)

#: Values plain JSON would change (or cannot carry), and what the message must say of them.
REFUSED: list[tuple[Any, str]] = [
    ({1, 2}, "is a set"),
    (frozenset({1}), "is a frozenset"),
    ((1, 2), "is a tuple"),
    (b"abc", "is bytes"),
    (bytearray(b"abc"), "is bytearray"),
    (Decimal("1.5"), "is a Decimal"),
    (AT, "is a datetime"),
    (date(2030, 1, 2), "is a date"),
    (time(12, 30), "is a time"),
    (timedelta(seconds=5), "is a timedelta"),
    (UUID(int=7), "is a UUID"),
    (Color.RED, "is a Color"),
    (Size.LARGE, "is a Size"),
    (math.nan, "nan"),
    (math.inf, "inf"),
    (-math.inf, "-inf"),
    ({1: "a"}, "int key"),
    (Thing(), "is a Thing"),
    (object(), "is an object"),
    ([1, {"a": {1}}], r"holds a set at [1]['a']"),
    ({"k": (1,)}, r"holds a tuple at ['k']"),
    ([[math.nan]], "holds nan"),
]


@pytest.fixture
def plain(app: duly.App) -> duly.Task[Any, Any]:
    @app.task(name="t.plain")
    def plain(a: Any, b: Any = None, *rest: Any, **named: Any) -> None:
        return None

    return plain


def test_a_value_json_would_change_is_refused_naming_the_argument(
    app: duly.App, plain: duly.Task[Any, Any]
) -> None:
    for value, said in REFUSED:
        with pytest.raises(TypeError) as raised:
            plain.enqueue(value)
        message = str(raised.value)
        assert isinstance(raised.value, duly.SerializationError)
        assert "t.plain" in message
        assert "positional argument 0 (a)" in message and said in message, message
        assert "annotate" in message or "pass" in message or "convert" in message, message
        with pytest.raises(TypeError, match=r"argument 'b' ") as raised:
            plain.enqueue(1, b=value)
        assert said in str(raised.value)
        with pytest.raises(TypeError, match=r"positional argument 3 \(\*rest\)"):
            plain.enqueue(1, 2, 3, value)
        with pytest.raises(TypeError, match=r"argument 'extra' "):
            plain.enqueue(1, extra=value)
    assert app.jobs() == []


def test_the_refusal_says_how_to_fix_it(app: duly.App, plain: duly.Task[Any, Any]) -> None:
    with pytest.raises(TypeError, match=r"`b: set\[\.\.\.\]`"):
        plain.enqueue(1, b={1})
    with pytest.raises(TypeError, match=r"`a: datetime`"):
        plain.enqueue(AT)
    with pytest.raises(TypeError, match=r"\.value"):
        plain.enqueue(Color.RED)
    with pytest.raises(TypeError, match="str keys"):
        plain.enqueue({1: 2})
    with pytest.raises(TypeError, match="NaN or Infinity"):
        plain.enqueue(math.nan)
    assert app.jobs() == []


def test_plain_json_is_accepted_and_arrives_as_it_is(app: duly.App) -> None:
    seen: list[Any] = []

    @app.task(name="t.echo")
    def echo(value: Any, count: int = 0) -> Any:
        seen.append(value)
        return value

    value = {"s": "x", "i": 2**70, "f": 1.5, "b": True, "n": None, "l": [1, [2.0, {"k": []}]]}
    job = echo.enqueue(value, count=3)
    run_jobs(app, [job])
    assert seen == [value]
    assert repr(seen[0]) == repr(value)  # the same types all the way down (2.0 stays a float)
    assert app.get_job(job.id).result == value  # type: ignore[union-attr]


def test_an_annotation_that_does_not_resolve_is_treated_as_untyped(app: duly.App) -> None:
    @app.task(name="t.unresolved")
    def unresolved(x: NoSuchType) -> None:  # type: ignore[name-defined]  # noqa: F821
        return None

    unresolved.enqueue(1)
    with pytest.raises(TypeError, match=r"positional argument 0 \(x\) is a set") as raised:
        unresolved.enqueue({1})
    assert "'NoSuchType' does not resolve" in str(raised.value)
    assert len(app.jobs()) == 1


# -- restored by the annotation ---------------------------------------------------------------
def test_annotated_arguments_arrive_with_their_types(app: duly.App) -> None:
    seen: dict[str, Any] = {}

    @app.task(name="t.typed")
    def typed(
        at: datetime,
        ids: set[int],
        amount: Decimal,
        raw: bytes,
        pair: tuple[int, int],
        *days: date,
        when: time | None = None,
        wait: timedelta = timedelta(0),
        ref: UUID | None = None,
        color: Color = Color.BLUE,
        size: Size = Size.SMALL,
        names: frozenset[str] = frozenset(),
        by_id: dict[int, str] | None = None,
        reading: Reading | None = None,
        point: Point | None = None,
        stamps: list[datetime] | None = None,
        **prices: Decimal,
    ) -> None:
        seen.update(locals())

    given: dict[str, Any] = {
        "at": AT,
        "ids": {3, 1, 2},
        "amount": Decimal("1.50"),
        "raw": b"\x00\xffabc",
        "pair": (1, 2),
        "days": (date(2030, 1, 1), date(2030, 1, 2)),
        "when": time(12, 30, 1),
        "wait": timedelta(days=1, microseconds=5),
        "ref": UUID(int=42),
        "color": Color.RED,
        "size": Size.LARGE,
        "names": frozenset({"a", "b"}),
        "by_id": {1: "one", 2: "two"},
        "reading": Reading(AT, (1.0, 2.5)),
        "point": Point(7, frozenset({"x"})),
        "stamps": [AT, AT.astimezone(timezone(timedelta(hours=2)))],
        "prices": {"eur": Decimal("9.99"), "usd": Decimal("10")},
    }
    call = {k: v for k, v in given.items() if k not in ("at", "ids", "amount", "raw", "pair")}
    call.pop("days")
    call.update(call.pop("prices"))
    job = typed.enqueue(
        AT, {3, 1, 2}, Decimal("1.50"), b"\x00\xffabc", (1, 2), *given["days"], **call
    )
    run_jobs(app, [job])
    info = app.get_job(job.id)
    assert info is not None and info.status == "succeeded", info and info.error
    for name, value in given.items():
        assert seen[name] == value, name
        assert type(seen[name]) is type(value), name
    assert type(seen["reading"].values) is tuple
    assert all(type(d) is date for d in seen["days"])
    assert seen["stamps"][1].utcoffset() == timedelta(hours=2)
    assert info.args[0] == "2030-01-02T03:04:05.678901Z"  # JobInfo shows the stored JSON


def test_a_value_that_does_not_fit_its_annotation_is_refused(app: duly.App) -> None:
    @app.task(name="t.dated")
    def dated(at: datetime, ids: set[int] | None = None, pair: tuple[int, int] = (0, 0)) -> None:
        return None

    with pytest.raises(TypeError, match=r"positional argument 0 \(at\) is a str.*datetime"):
        dated.enqueue("2030-01-01T00:00:00Z")  # type: ignore[arg-type]  # would arrive changed
    with pytest.raises(TypeError, match=r"argument 'ids' is a list .*set\[int\]"):
        dated.enqueue(AT, ids=[1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"argument 'ids' is a set, which does not fit"):
        dated.enqueue(AT, ids={"x"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"argument 'pair' is a tuple, which does not fit"):
        dated.enqueue(AT, pair=(1, 2, 3))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"argument 'pair' is a list"):
        dated.enqueue(AT, pair=[1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"positional argument 0 \(at\) is a Thing"):
        dated.enqueue(Thing())  # type: ignore[arg-type]
    assert app.jobs() == []


# -- results ------------------------------------------------------------------------------------
def test_results_are_restored_by_the_return_annotation(app: duly.App) -> None:
    @app.task(name="t.when")
    def when() -> datetime:
        return AT

    @app.task(name="t.ids")
    async def ids() -> set[int]:
        return {1, 2}

    @app.task(name="t.reading")
    def reading() -> Reading:
        return Reading(AT, (1.0,))

    @app.task(name="t.maybe")
    def maybe() -> Decimal | None:
        return None

    jobs = [when.enqueue(), ids.enqueue(), reading.enqueue(), maybe.enqueue()]
    run_jobs(app, jobs)
    results = [app.get_job(j.id).result for j in jobs]  # type: ignore[union-attr]
    assert results == [AT, {1, 2}, Reading(AT, (1.0,)), None]
    assert type(results[2].values) is tuple
    listed = {info.task: info.result for info in app.jobs(status="succeeded")}
    assert listed["t.when"] == AT
    info = app.get_job(jobs[0].id)
    assert info is not None and info.to_dict()["result"] == "2030-01-02T03:04:05.678901Z"


def test_without_the_task_a_result_reads_as_plain_json(make_app) -> None:
    app = make_app()

    @app.task(name="t.when")
    def when() -> datetime:
        return AT

    job = when.enqueue()
    run_jobs(app, [job])
    other = make_app()  # does not know t.when
    assert other.get_job(job.id).result == "2030-01-02T03:04:05.678901Z"


def test_a_result_json_would_change_fails_the_job_at_once(app: duly.App) -> None:
    @app.task(name="t.pair", retries=3)
    def pair() -> Any:
        return (1, 2)

    @app.task(name="t.stamp", retries=3)
    def stamp() -> set[int]:
        return {"not an int"}  # type: ignore[arg-type]

    jobs = [pair.enqueue(), stamp.enqueue()]
    run_jobs(app, jobs)
    first, second = (app.get_job(j.id) for j in jobs)
    assert first is not None and second is not None
    assert (first.status, first.attempts) == ("failed", 1)
    assert first.error is not None and first.error["type"] == "SerializationError"
    assert "result of t.pair is a tuple" in first.error["message"]
    assert "`-> tuple[...]`" in first.error["message"]
    assert (second.status, second.attempts) == ("failed", 1)
    assert second.error is not None and "set[int]" in second.error["message"]


# -- the signature ------------------------------------------------------------------------------
def test_a_call_that_does_not_fit_the_signature_is_refused(app: duly.App) -> None:
    @app.task(name="test.add")
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(name="test.kw")
    def kw(a: int, /, *, b: int = 0) -> None:
        return None

    bad = [
        (lambda: add.enqueue(1), "missing a required argument: 'b'"),  # type: ignore[call-arg]
        (lambda: add.enqueue(1, 2, 3), "too many positional arguments"),  # type: ignore[call-arg]
        (lambda: add.enqueue(1, 2, c=3), "unexpected keyword argument 'c'"),  # type: ignore[call-arg]
        (lambda: add.enqueue(1, a=2), "multiple values for argument 'a'"),  # type: ignore[call-arg, misc]
        (lambda: add.options(delay=5).enqueue(), "missing a required argument: 'a'"),  # type: ignore[call-arg]
        (lambda: kw.enqueue(a=1), "positional only"),  # type: ignore[call-arg]
        (lambda: kw.enqueue(1, 2), "too many positional arguments"),  # type: ignore[call-arg]
        (lambda: app.enqueue_many([add.s(1, 2), add.s(1)]), "'b'"),  # type: ignore[call-arg]
    ]
    for call, said in bad:
        with pytest.raises(TypeError, match="test\\.") as raised:
            call()
        assert isinstance(raised.value, duly.ArgumentsMismatch)
        assert said in str(raised.value)
    with pytest.raises(TypeError, match=r"cannot enqueue test\.add\(a, b\)"):
        add.enqueue(1)  # type: ignore[call-arg]

    async def go() -> None:
        try:
            with pytest.raises(duly.ArgumentsMismatch, match="'b'"):
                await add.enqueue_async(1)  # type: ignore[call-arg]
            with pytest.raises(duly.ArgumentsMismatch, match="'b'"):
                await app.enqueue_many_async([add.s(1)])  # type: ignore[call-arg]
        finally:
            await app.aclose()

    asyncio.run(go())
    assert app.jobs() == []
    add.enqueue(1, b=2)
    kw.enqueue(1, b=2)
    assert len(app.jobs()) == 2


def test_a_job_that_no_longer_fits_its_task_fails_at_once(make_app) -> None:
    before = make_app()

    @before.task(name="test.add", retries=5)
    def add_v1(a: int) -> int:
        return a

    @before.task(name="test.when", retries=5)
    def when_v1(at: str) -> None:
        return None

    jobs = [add_v1.enqueue(1), when_v1.enqueue("next tuesday")]
    after = make_app()  # the next deploy: same task names, new signatures
    ran: list[Any] = []

    @after.task(name="test.add", retries=5)
    def add_v2(a: int, b: int) -> int:
        ran.append((a, b))
        return a + b

    @after.task(name="test.when", retries=5)
    def when_v2(at: datetime) -> None:
        ran.append(at)

    stats = run_jobs(after, jobs)
    assert ran == []
    add_info, when_info = (after.get_job(j.id) for j in jobs)
    assert add_info is not None and when_info is not None
    assert (add_info.status, add_info.attempts) == ("failed", 1)
    assert add_info.error is not None and add_info.error["type"] == "ArgumentsMismatch"
    assert add_info.error["message"] == (
        "arguments do not match test.add(a, b): missing a required argument: 'b'"
    )
    assert (when_info.status, when_info.attempts) == ("failed", 1)
    assert when_info.error is not None and when_info.error["type"] == "ArgumentsMismatch"
    assert "test.when(at)" in when_info.error["message"]
    assert "datetime" in when_info.error["message"]
    assert stats.failed == 2


def test_the_signature_check_agrees_with_python() -> None:
    """duly checks common signatures without ``inspect.Signature.bind`` (it costs µs per call);
    every call shape must be judged as Python judges it."""

    def f0() -> None: ...
    def f1(a: int) -> None: ...
    def f2(a: int, b: int) -> None: ...
    def f3(a: int, b: int = 1) -> None: ...
    def f4(a: int, b: int, c: int = 1, d: int = 2) -> None: ...
    def f5(a: int = 1, b: int = 2) -> None: ...

    names = ["a", "b", "c", "d", "x"]
    for fn in (f0, f1, f2, f3, f4, f5):
        spec = CallSpec(fn, "t.f")
        for given in range(5):
            for count in range(4):
                for keywords in itertools.combinations(names, count):
                    args, kwargs = tuple(range(given)), dict.fromkeys(keywords, 0)
                    try:
                        inspect.signature(fn).bind(*args, **kwargs)
                        fits = True
                    except TypeError:
                        fits = False
                    try:
                        spec.encode_call(args, kwargs, 1000)
                        accepted = True
                    except duly.ArgumentsMismatch:
                        accepted = False
                    assert accepted == fits, (fn.__name__, args, kwargs)
