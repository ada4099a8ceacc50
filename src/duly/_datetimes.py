"""Zone-aware datetimes across JSON: the zone's name travels with the time (RFC 9557).

JSON (and msgspec) writes an aware datetime as its UTC offset, so a ``ZoneInfo`` datetime
would reach the task as a fixed offset: equal, but one hour off after ``+ timedelta(days=120)``
across a DST change. duly stores such a value as ``2024-07-01T12:00:00+02:00[Europe/Berlin]``
and gives it back with ``ZoneInfo("Europe/Berlin")``; a fixed-offset datetime stays an offset.
Only parameters (and results) whose annotation holds a datetime take this path.

A duly without this module reads such a string as a datetime that does not parse: the job
fails with ``ArgumentsMismatch`` rather than running with a changed value (so upgrade the
workers before the producers).
"""

from __future__ import annotations

import dataclasses
import re
import typing
from datetime import datetime
from typing import Any, Final
from zoneinfo import ZoneInfo

import msgspec

__all__ = ["has_zones", "mentions_datetime", "same_zone", "strip_zones", "with_zones", "zoned"]

_TIME = r"\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:\d\d(?::\d\d(?:\.\d+)?)?)"
_ZONE = r"[A-Za-z0-9_+\-/]+"
_IN_JSON: Final = re.compile(rf'"({_TIME})\[({_ZONE})\]"'.encode())
_TEXT: Final = re.compile(rf"({_TIME})\[({_ZONE})\]")


def mentions_datetime(tp: Any, seen: set[int] | None = None) -> bool:
    """True if a value of type ``tp`` may hold a datetime (in a container, a dataclass, a
    Struct, a TypedDict...): its values then take the zone-keeping path."""
    seen = set() if seen is None else seen
    if id(tp) in seen:
        return False
    seen.add(id(tp))
    if isinstance(tp, type) and issubclass(tp, datetime):
        return True
    if any(mentions_datetime(arg, seen) for arg in typing.get_args(tp)):
        return True
    fields = isinstance(tp, type) and (
        dataclasses.is_dataclass(tp)
        or issubclass(tp, msgspec.Struct)
        or typing.is_typeddict(tp)
        or (issubclass(tp, tuple) and hasattr(tp, "_fields"))
    )
    if not fields:
        return False
    try:
        hints = typing.get_type_hints(tp)
    except Exception:  # an annotation that does not resolve: assume it may
        return True
    return any(mentions_datetime(hint, seen) for hint in hints.values())


def _zone(value: datetime) -> str | None:
    tz = value.tzinfo
    return tz.key if isinstance(tz, ZoneInfo) and tz.key else None


def _marked(value: datetime, zone: str) -> str:
    return f"{value.isoformat()}[{zone}]"


def zoned(value: Any) -> Any:
    """``value`` to encode: itself, or (if it holds a ZoneInfo datetime) its JSON builtins with
    each such datetime written RFC 9557 style."""
    if isinstance(value, datetime):
        zone = _zone(value)
        return value if zone is None else _marked(value, zone)
    try:
        builtins = msgspec.to_builtins(value, builtin_types=(datetime,))
    except (TypeError, ValueError):
        return value  # not encodable: the encoder says why
    found = False

    def walk(item: Any) -> Any:
        nonlocal found
        if isinstance(item, datetime):
            zone = _zone(item)
            if zone is None:
                return item
            found = True
            return _marked(item, zone)
        if isinstance(item, dict):
            return {key: walk(inner) for key, inner in item.items()}
        if isinstance(item, list):
            return [walk(inner) for inner in item]
        return item

    marked = walk(builtins)
    return marked if found else value


def has_zones(data: bytes | msgspec.Raw) -> bool:
    """True if stored JSON holds a datetime with its zone (so decoding takes the slow path)."""
    return _IN_JSON.search(memoryview(data)) is not None


def strip_zones(data: bytes | msgspec.Raw) -> bytes:
    """The JSON with each ``[Zone]`` suffix dropped (what a plain datetime decoder reads)."""
    return _IN_JSON.sub(rb'"\1"', bytes(data))


def with_zones(value: Any, checked: Any) -> Any:
    """Decoded JSON with each RFC 9557 string that stands where ``checked`` (the same JSON
    decoded to its type, zones stripped) holds a datetime made an aware datetime in its
    ZoneInfo; a str that only looks like one stays a str. The instant is kept: an offset the
    zone no longer has is read as the instant it named."""
    shape = msgspec.to_builtins(checked, builtin_types=(datetime,), str_keys=True)
    return _zones_at(value, shape)


def _zones_at(value: Any, shape: Any) -> Any:
    if isinstance(value, str):
        match = _TEXT.fullmatch(value) if isinstance(shape, datetime) else None
        if match is None:
            return value
        return datetime.fromisoformat(match[1]).astimezone(ZoneInfo(match[2]))
    if isinstance(value, dict) and isinstance(shape, dict):
        return {key: _zones_at(inner, shape.get(key)) for key, inner in value.items()}
    if isinstance(value, list) and isinstance(shape, list) and len(value) == len(shape):
        # A set's items may come in another order: only whether each is a datetime counts.
        return [_zones_at(inner, like) for inner, like in zip(value, shape, strict=True)]
    return value


def same_zone(given: datetime, back: datetime) -> bool:
    """True if ``back`` keeps ``given``'s time zone: the same ZoneInfo, or the same offset
    (another kind of tzinfo, e.g. pytz, comes back as an offset: not the same)."""
    if given.tzinfo is None or back.tzinfo is None:
        return given.tzinfo is back.tzinfo
    zone = _zone(given)
    if zone is not None or _zone(back) is not None:
        return zone == _zone(back)
    return type(given.tzinfo) is type(back.tzinfo) and given.utcoffset() == back.utcoffset()
