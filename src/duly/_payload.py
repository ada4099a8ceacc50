"""The stored payload's envelope: a job's arguments with the headers and links duly adds.

A stored payload is one JSON object: ``{"args": [...], "kwargs": {...}}``, then
``"headers": {"name": "value", ...}`` when a hook set some (``NewJob.headers``: trace context
and the like; absent when there are none, so such a payload is not a byte longer) and the links
of a job that waits for others (``with_links``). Headers are written by ``with_headers`` and
read by ``payload_headers``, nowhere else; readers of the arguments (``decode_payload``,
``duly._serialization.CallSpec.decode_call``) skip them, as duly 0.x skips the key it does not
know. 0.x's ``OtelHook`` spliced its trace context in as a last key of its own,
``"traceparent": "00-..."``: ``payload_headers`` reads it as the ``traceparent`` header, so a
job enqueued by 0.x still links its runs to its enqueue.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from duly._sealing import LITERAL, unescape_argument

__all__ = [
    "ESCAPED",
    "Links",
    "decode_payload",
    "payload_headers",
    "payload_links",
    "with_first_argument",
    "with_headers",
    "with_links",
]

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


class _Headed(msgspec.Struct, omit_defaults=True):
    """A payload's envelope, its arguments left as they are (copied, not decoded)."""

    args: msgspec.Raw
    kwargs: msgspec.Raw
    headers: dict[str, str] = {}
    # Links (``with_links``): absent on a job that waits for nothing.
    after: list[str] = []
    pipe: bool = False
    workflow: list[str] = []


class Links(msgspec.Struct, frozen=True):
    """What a payload says of the jobs it waits for (PRODUCT §16): ``after`` their ids,
    ``pipe`` whether its first argument is the result of ``after[0]`` (a chain step), and
    ``workflow`` the step ids of the chain it ends (only on a chain's last step)."""

    after: list[str] = []
    pipe: bool = False
    workflow: list[str] = []


class _Headers(msgspec.Struct):
    """Only the headers of a payload (msgspec skips the arguments without building them)."""

    headers: dict[str, str] = {}
    traceparent: str | None = None  # 0.x's spliced trace context


_headed = msgspec.json.Decoder(_Headed)
_headers = msgspec.json.Decoder(_Headers)
_links = msgspec.json.Decoder(Links)
_NO_LINKS: Final = Links()


def with_links(payload: bytes, links: Links) -> bytes:
    """``payload`` carrying ``links`` (over any it carried)."""
    envelope = _headed.decode(payload)
    envelope.after, envelope.pipe, envelope.workflow = links.after, links.pipe, links.workflow
    return _encoder.encode(envelope)


def payload_links(payload: bytes) -> Links:
    """The links a stored payload carries (none if it is corrupt: its run reports that)."""
    if b'"after"' not in payload:  # the common case, without decoding anything
        return _NO_LINKS
    try:
        return _links.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return _NO_LINKS


def with_first_argument(payload: bytes, value: bytes) -> bytes:
    """``payload`` with the JSON ``value`` inserted before its positional arguments (a chain
    step's input); ValueError if it is corrupt."""
    try:
        envelope = _headed.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ValueError(f"corrupt job payload: {exc}") from exc
    args = bytes(envelope.args).strip()
    rest = args[1:].lstrip()
    joined = b"[" + value + (b"]" if rest.startswith(b"]") else b"," + rest)
    envelope.args = msgspec.Raw(joined)
    return _encoder.encode(envelope)


def with_headers(payload: bytes, headers: dict[str, str]) -> bytes:
    """``payload`` (built by ``CallSpec.encode_call``) carrying ``headers`` too, over any it
    carried; ``payload`` itself when ``headers`` is empty. TypeError if a name or value is
    not a str (a header is text: trace context, a tenant, a request id)."""
    if not headers:
        return payload
    for name, value in headers.items():
        if type(name) is not str or type(value) is not str:
            raise TypeError(f"a job header is str: str, got {name!r}: {value!r}")
    envelope = _headed.decode(payload)
    envelope.headers = {**envelope.headers, **headers}
    return _encoder.encode(envelope)


def payload_headers(payload: bytes) -> dict[str, str]:
    """The headers a stored payload carries (a new dict; empty if none, or if the payload is
    corrupt: its run reports that, not its headers)."""
    try:
        found = _headers.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return {}
    if found.traceparent is not None and "traceparent" not in found.headers:
        found.headers["traceparent"] = found.traceparent
    return found.headers


def decode_payload(payload: bytes) -> tuple[list[Any], dict[str, Any]]:
    """The ``(args, kwargs)`` of a stored payload as plain JSON (its headers left out: see
    ``payload_headers``); ValueError if it is corrupt."""
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
    args, kwargs = value["args"], value["kwargs"]
    if ESCAPED in payload:  # an argument that looked like an envelope (duly._sealing)
        args = [unescape_argument(v) for v in args]
        kwargs = {k: unescape_argument(v) for k, v in kwargs.items()}
    return args, kwargs


#: How a stored argument escaped by ``duly._sealing.escape_argument`` starts.
ESCAPED: Final = f'{{"{LITERAL}":'.encode()
