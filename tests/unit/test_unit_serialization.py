"""Arguments and results as JSON: what round-trips, what is refused (and how the refusal reads),
without any backend: the refusals happen before anything is stored."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from duly import ArgumentsMismatch, PayloadTooLarge, SerializationError
from duly._payload import decode_payload
from duly._serialization import CallSpec, canonical, decode, encode

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON)
def test_plain_json_round_trips(value: Any) -> None:
    assert decode(encode(value)) == value


@given(st.dictionaries(st.text(), st.integers(), max_size=8))
def test_canonical_json_does_not_depend_on_insertion_order(value: dict[str, int]) -> None:
    backwards = dict(reversed(list(value.items())))
    assert canonical(value) == canonical(backwards)


def test_canonical_json_sorts_sets() -> None:
    assert canonical({"s": {"b", "a", "c"}}) == b'{"s":["a","b","c"]}'


def _spec(fn: Any) -> CallSpec:
    return CallSpec(fn, "t.fn")


def test_a_typed_call_round_trips_with_its_types() -> None:
    def fn(when: dt.datetime, amount: Decimal, tags: set[str], n: int = 1) -> None: ...

    when = dt.datetime(2024, 7, 1, 12, tzinfo=dt.UTC)
    payload = _spec(fn).encode_call((when, Decimal("1.10"), {"a"}), {"n": 3}, 1 << 20)
    args, kwargs = _spec(fn).decode_call(payload)
    assert args == [when, Decimal("1.10"), {"a"}] and kwargs == {"n": 3}
    assert isinstance(args[1], Decimal)


@pytest.mark.parametrize(
    "value",
    [object(), b"bytes", math.nan, {1: "int key"}, dt.datetime(2024, 1, 1)],
    ids=["object", "bytes", "nan", "int-key", "naive-datetime"],
)
def test_an_untyped_value_json_would_change_or_cannot_hold_is_refused(value: Any) -> None:
    def fn(x):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(SerializationError) as refused:
        _spec(fn).encode_call((value,), {}, 1 << 20)
    assert "x" in str(refused.value)  # names the argument


def test_a_value_that_would_arrive_as_another_type_is_refused() -> None:
    """A str given for a datetime would arrive as a datetime: not what the caller sent."""

    def fn(at: dt.datetime, pair: tuple[int, int] = (0, 0)) -> None: ...

    at = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    with pytest.raises(SerializationError, match=r"positional argument 0 \(at\) is a str"):
        _spec(fn).encode_call(("2030-01-01T00:00:00Z",), {}, 1 << 20)
    with pytest.raises(SerializationError, match=r"argument 'pair' is a list"):
        _spec(fn).encode_call((at,), {"pair": [1, 2]}, 1 << 20)


def test_a_call_that_does_not_fit_the_signature_is_refused() -> None:
    def fn(a: int, b: int) -> None: ...

    with pytest.raises(ArgumentsMismatch):
        _spec(fn).encode_call((1,), {}, 1 << 20)
    with pytest.raises(ArgumentsMismatch):
        _spec(fn).encode_call((1, 2), {"c": 3}, 1 << 20)


def test_a_payload_over_the_limit_is_refused_with_its_size() -> None:
    def fn(s: str) -> None: ...

    with pytest.raises(PayloadTooLarge, match="1000"):
        _spec(fn).encode_call(("x" * 2000,), {}, 1000)


def test_results_are_restored_by_the_return_annotation() -> None:
    def fn() -> dt.date: ...

    spec = _spec(fn)
    assert spec.decode_result(spec.encode_result(dt.date(2024, 2, 29))) == dt.date(2024, 2, 29)


@pytest.mark.parametrize(
    "payload", [b"not json", b"[]", b'{"args": {}, "kwargs": {}}', b'{"args": []}']
)
def test_a_corrupt_stored_payload_is_a_value_error(payload: bytes) -> None:
    with pytest.raises(ValueError, match="corrupt job payload"):
        decode_payload(payload)


def test_decode_refuses_corrupt_json() -> None:
    with pytest.raises(msgspec.DecodeError):
        decode(b"{")
