"""JSON encoding of arguments, results and errors (msgspec: fast, and never pickle)."""

from __future__ import annotations

from typing import Any

import msgspec

from duly.errors import PayloadTooLarge, SerializationError

__all__ = ["decode", "decode_payload", "encode", "encode_payload", "encode_result"]

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


def encode(value: Any) -> bytes:
    """JSON bytes of ``value``; raises TypeError (from msgspec) if it cannot be encoded."""
    return _encoder.encode(value)


def decode(data: bytes | str) -> Any:
    """The value of JSON ``data``; raises msgspec.DecodeError on corrupt input."""
    return _decoder.decode(data)


def _bad_argument(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    for index, value in enumerate(args):
        try:
            _encoder.encode(value)
        except (TypeError, ValueError, OverflowError):
            return f"positional argument {index} ({type(value).__name__})"
    for name, value in kwargs.items():
        try:
            _encoder.encode(value)
        except (TypeError, ValueError, OverflowError):
            return f"argument {name!r} ({type(value).__name__})"
    return "an argument"


def encode_payload(
    task: str, args: tuple[Any, ...], kwargs: dict[str, Any], max_bytes: int
) -> bytes:
    """Encode a call's arguments; name the offending argument if one is not serializable."""
    try:
        payload = _encoder.encode({"args": args, "kwargs": kwargs})
    except (TypeError, ValueError, OverflowError) as exc:
        raise SerializationError(
            f"cannot enqueue {task}: {_bad_argument(args, kwargs)} is not JSON-serializable ({exc})"
        ) from exc
    if len(payload) > max_bytes:
        raise PayloadTooLarge(
            f"cannot enqueue {task}: arguments are {len(payload)} bytes encoded, over the "
            f"limit of {max_bytes} bytes (App(max_payload_bytes=...))"
        )
    return payload


def decode_payload(payload: bytes) -> tuple[list[Any], dict[str, Any]]:
    """The ``(args, kwargs)`` of a stored payload; raises ValueError if it is corrupt."""
    try:
        value = _decoder.decode(payload)
    except msgspec.DecodeError as exc:
        raise ValueError(f"corrupt job payload: {exc}") from exc
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("args"), list)
        or not isinstance(value.get("kwargs"), dict)
    ):
        raise ValueError('corrupt job payload: expected {"args": [...], "kwargs": {...}}')
    return value["args"], value["kwargs"]


def encode_result(task: str, value: Any) -> bytes:
    """Encode a task's return value; a clear TypeError if it is not serializable."""
    try:
        return _encoder.encode(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise SerializationError(
            f"the result of {task} ({type(value).__name__}) is not JSON-serializable: {exc}"
        ) from exc
