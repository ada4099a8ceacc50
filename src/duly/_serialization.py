"""JSON encoding of arguments, results and errors (msgspec: fast, and never pickle).

A task gets back exactly what it was given, or the call fails at enqueue. JSON carries str, int,
finite float, bool, None, list and dict with str keys as they are; any other value (a set, a
tuple, bytes, a Decimal, a datetime, an Enum, NaN, a dict with int keys, an object) reaches the
worker only if the parameter's annotation lets msgspec restore it (``at: datetime``,
``ids: set[int]``, ``pair: tuple[int, int]``, a dataclass or ``msgspec.Struct``): duly encodes
it, decodes it with that type and checks that the two are equal. Results follow the same rule
with the return annotation. ``CallSpec`` holds what a task's signature decides, computed once.
"""

from __future__ import annotations

import datetime as dt
import enum
import inspect
import math
import types
import typing
from collections.abc import Callable
from typing import Any, Final

import msgspec

from duly._datetimes import has_zones, mentions_datetime, same_zone, strip_zones, with_zones, zoned
from duly._errors import ArgumentsMismatch, PayloadTooLarge, SerializationError
from duly._payload import ESCAPED, decode_payload
from duly._sealing import escape_argument, unescape_argument

__all__ = ["CallSpec", "canonical", "decode", "encode", "to_builtins"]

_encoder = msgspec.json.Encoder()
_canonical_encoder = msgspec.json.Encoder(order="deterministic")
_decoder = msgspec.json.Decoder()
_ENCODE_ERRORS = (TypeError, ValueError, OverflowError)
_JSON_VALUES = "str, int, float, bool, None, list, or dict with str keys"


def encode(value: Any) -> bytes:
    """JSON bytes of ``value``; raises TypeError (from msgspec) if it cannot be encoded."""
    return _encoder.encode(value)


def canonical(value: Any) -> bytes:
    """JSON bytes of ``value`` that equal values share in every process: dict keys and sets
    sorted (a set's iteration order changes with the hash seed), so keys derived from it agree."""
    return _canonical_encoder.encode(value)


def decode(data: bytes | str) -> Any:
    """The value of JSON ``data``; raises msgspec.DecodeError on corrupt input."""
    return _decoder.decode(data)


def to_builtins(value: Any) -> Any:
    """``value`` as JSON would read it back (a datetime as its ISO string, a set as a list)."""
    return msgspec.to_builtins(value)


def _unescaped_raw(raw: msgspec.Raw) -> msgspec.Raw:
    """A stored argument's JSON with the ``$literal`` wrapper of ``escape_argument`` removed."""
    if memoryview(raw)[: len(ESCAPED)] != ESCAPED:
        return raw
    return msgspec.Raw(_encoder.encode(unescape_argument(_decoder.decode(raw))))


def _escaped(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """The call's arguments as stored: user dicts that read as envelopes wrapped."""
    if not any(type(v) is dict for v in (*args, *kwargs.values())):
        return args, kwargs
    return [escape_argument(v) for v in args], {k: escape_argument(v) for k, v in kwargs.items()}


class _RawCall(msgspec.Struct):
    """A stored payload with each argument left as JSON, to decode with its parameter's type."""

    args: list[msgspec.Raw]
    kwargs: dict[str, msgspec.Raw]


_raw_call = msgspec.json.Decoder(_RawCall)

#: Stands for a chain step's first argument when its call is checked at enqueue.
_PIPED: Final = object()


# -- what JSON carries as it is ------------------------------------------------------------
def _plain_problem(value: Any) -> str | None:
    """None if plain JSON gives ``value`` back exactly, else what is in the way (and where)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return None
    if kind is float and math.isfinite(value):
        return None
    try:
        found = _deep_problem(value)
    except RecursionError:
        return "is nested too deeply"
    return None if found is None else _at(*found)


def _deep_problem(value: Any) -> tuple[str, str] | None:
    """(what, where) of the first value inside ``value`` that plain JSON would change; the
    path is only built for it, on the way back up."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return None
    if kind is float:
        return None if math.isfinite(value) else (f"{value!r} (JSON has no NaN or Infinity)", "")
    if kind is list:
        for index, item in enumerate(value):
            found = _deep_problem(item)
            if found is not None:
                return found[0], f"[{index}]{found[1]}"
        return None
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return f"a dict with {_article(type(key).__name__)} key {key!r}", ""
            found = _deep_problem(item)
            if found is not None:
                return found[0], f"[{key!r}]{found[1]}"
        return None
    return _describe(value), ""


def _at(what: str, path: str) -> str:
    return f"holds {what} at {path}" if path else f"is {what}"


def _describe(value: Any) -> str:
    kind = type(value)
    name = kind.__qualname__
    if isinstance(value, str | int | float) and kind not in (str, int, float, bool):
        base = next(t for t in (int, float, str) if isinstance(value, t)).__name__
        return f"a {name} (a {base} subclass: JSON turns it into a plain {base})"
    if kind is bytes or kind is bytearray:
        return name
    return _article(name)


def _article(name: str) -> str:
    return f"{'an' if name[:1] in 'aeiouAEIO' else 'a'} {name}"  # a UUID, an int


def _fix(value: Any, param: str, nested: bool) -> str:
    """How to pass ``value`` (not plain JSON) so that it arrives as it is."""
    where = "the return type" if param == "return" else "the parameter"

    def ann(tp: str) -> str:
        return f"`-> {tp}`" if param == "return" else f"`{param}: {tp}`"

    kind = type(value)
    if nested:
        return (
            f"annotate {where} with the full type so duly restores it (e.g. "
            f"{ann('list[datetime]')}, {ann('dict[str, set[int]]')}, a dataclass), or "
            f"convert it to {_JSON_VALUES}"
        )
    if isinstance(value, enum.Enum):
        return f"annotate {where} ({ann(kind.__qualname__)}) or pass its .value"
    if kind is float:
        return "pass None or a str instead"
    if kind is dict:
        return f"annotate {where} ({ann('dict[int, ...]')}) or use str keys"
    if kind in (set, frozenset, tuple):
        verb = "return" if param == "return" else "pass"
        return f"annotate {where} ({ann(kind.__name__ + '[...]')}) or {verb} a list"
    if kind is bytes or kind is bytearray or kind.__module__ in ("datetime", "decimal", "uuid"):
        return (
            f"annotate {where} ({ann(kind.__qualname__)}) so duly restores it, or convert it "
            f"to {_JSON_VALUES}"
        )
    return (
        f"convert it to {_JSON_VALUES}, or annotate {where} with a type msgspec can restore "
        "(a dataclass, msgspec.Struct, TypedDict...)"
    )


# -- what an annotation restores -----------------------------------------------------------
_PLAIN_TYPES: frozenset[Any] = frozenset(
    {str, int, float, bool, type(None), None, Any, object, list, dict}
)


def _is_plain(tp: Any) -> bool:
    """True if plain JSON decoding already gives what ``tp`` asks for (no typed decode needed)."""
    try:
        if tp in _PLAIN_TYPES:
            return True
    except TypeError:  # an unhashable annotation
        return False
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list:
        return all(_is_plain(a) for a in args)
    if origin is dict:
        return len(args) == 2 and args[0] is str and _is_plain(args[1])
    if origin is typing.Union or origin is types.UnionType:
        return all(_is_plain(a) for a in args)
    return False


def _type_name(tp: Any) -> str:
    return tp.__qualname__ if isinstance(tp, type) else repr(tp).replace("typing.", "")


def _same(given: Any, back: Any) -> bool:
    """True if ``back`` (decoded) is ``given``: equal, and of the same types all the way down
    (an int may come back as a float where the annotation asks for one)."""
    kind = type(given)
    if kind is not type(back):
        return kind is int and type(back) is float and given == back
    if kind is list or kind is tuple:
        return len(given) == len(back) and all(map(_same, given, back))
    if kind is dict:
        return len(given) == len(back) and all(
            key in back and _same(item, back[key]) for key, item in given.items()
        )
    if kind is dt.datetime and not same_zone(given, back):
        return False  # equal instants, but the zone changed (issue 28.4)
    try:
        return bool(given == back) or (given != given and back != back)  # Decimal("NaN")
    except Exception:
        return False


class _Slot:
    """One parameter (or each element of ``*args`` / ``**kwargs``): how its values cross JSON."""

    __slots__ = ("decoder", "name", "type", "unresolved", "zoned")

    def __init__(self, name: str, tp: Any = Any, unresolved: Any = None) -> None:
        self.name = name
        self.type = tp
        #: The annotation, when it could not be evaluated (so the values are plain JSON).
        self.unresolved = unresolved
        self.decoder: msgspec.json.Decoder[Any] | None = None
        if not _is_plain(tp):
            try:
                self.decoder = msgspec.json.Decoder(tp)
            except (TypeError, ValueError):  # a type msgspec does not know: plain JSON
                self.type = Any
        #: Its values may hold datetimes, whose zones are kept (``duly._datetimes``).
        self.zoned = self.decoder is not None and mentions_datetime(self.type)

    def stored(self, value: Any) -> Any:
        """``value`` as it is encoded (a ZoneInfo datetime written with its zone)."""
        return zoned(value) if self.zoned else value

    def problem(self, value: Any) -> str | None:
        """None if the worker gets ``value`` back exactly, else why not and what to do."""
        if self.decoder is None:
            found = _plain_problem(value)
            if found is None:
                return None
            fix = _fix(value, self.name.lstrip("*"), nested=found.startswith("holds"))
            if self.unresolved is not None:
                fix += (
                    f" (its annotation {self.unresolved!r} does not resolve at run time: import "
                    "what it names at module level, not under `if TYPE_CHECKING:`)"
                )
            return f"{found}, which JSON cannot carry as it is: {fix}"
        expected = _type_name(self.type)
        try:
            data = _encoder.encode(self.stored(value))
        except _ENCODE_ERRORS:
            if isinstance(self.type, type) and isinstance(value, self.type):
                return (
                    f"is {_describe(value)}, which JSON cannot carry: make {expected} a "
                    "dataclass or msgspec.Struct so duly can restore it, or pass JSON values"
                )
            return f"is {_describe(value)}, which JSON cannot carry: pass a {expected}"
        try:
            back = self.decode(data)
        except msgspec.ValidationError as exc:
            return (
                f"is {_describe(value)}, which does not fit its annotation {expected} ({exc}): "
                f"pass a {expected}"
            )
        if _same(value, back):
            return None
        return (
            f"is {_describe(value)} {value!r}, but would reach the task as {back!r}: pass "
            f"a {expected}, as annotated"
        )

    def decode(self, raw: msgspec.Raw | bytes) -> Any:
        """One stored argument, restored to this parameter's type."""
        if self.decoder is None:
            return _decoder.decode(raw)
        if not (self.zoned and has_zones(raw)):
            return self.decoder.decode(raw)
        try:  # the types checked as JSON decoding checks them, the zones left out
            checked = self.decoder.decode(strip_zones(raw))
        except msgspec.ValidationError:
            return self.decoder.decode(raw)  # a str that only looks like a zoned datetime
        # The same values, each zoned datetime in its ZoneInfo (a mismatch is left to the
        # enqueue-time check, which refuses a value that would not come back as given).
        zones = with_zones(_decoder.decode(raw), checked)
        try:
            return msgspec.convert(zones, self.type, strict=False)
        except msgspec.ValidationError:
            return checked


def _hints(fn: Callable[..., Any], signature: inspect.Signature) -> dict[str, Any]:
    """The annotations of ``fn``, evaluated; one that does not resolve is left out (treated as
    untyped: its values must be plain JSON)."""
    try:
        return typing.get_type_hints(fn)
    except Exception:  # a forward reference not defined (yet), or not a plain function
        pass
    scope = getattr(inspect.unwrap(fn), "__globals__", {})
    annotated = {p.name: p.annotation for p in signature.parameters.values()}
    annotated["return"] = signature.return_annotation
    hints: dict[str, Any] = {}
    for name, annotation in annotated.items():
        if annotation is inspect.Parameter.empty:
            continue

        def probe() -> None: ...

        probe.__annotations__ = {name: annotation}
        try:
            hints.update(typing.get_type_hints(probe, globalns=scope))
        except Exception:
            continue
    return hints


class CallSpec:
    """What a task's signature decides: which calls bind, and how each value crosses JSON.

    The annotations are resolved on first use (a forward reference may be defined after the
    decorator ran), once per task. Parameters annotated with plain JSON types (or not at all)
    cost one type check per value; only annotations that restore something decode typed.
    """

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.name = name
        self._fn = fn
        try:
            self.signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):  # no signature to check against (some builtins)
            self.signature = None
        self._resolved = False
        self._resolve(final=False)

    def _resolve(self, final: bool = True) -> None:
        signature = self.signature
        params = [] if signature is None else list(signature.parameters.values())
        hints = {} if signature is None else _hints(self._fn, signature)
        if not final and len(hints) < sum(
            p.annotation is not inspect.Parameter.empty for p in params
        ) + (signature is not None and signature.return_annotation is not inspect.Signature.empty):
            return  # some annotation did not resolve yet: try again on first use
        kinds = inspect.Parameter

        def slot_of(param: inspect.Parameter, label: str) -> _Slot:
            if param.name in hints:
                return _Slot(label, hints[param.name])
            missing = param.annotation is not inspect.Parameter.empty
            return _Slot(label, Any, param.annotation if missing else None)

        slot = {p.name: slot_of(p, p.name) for p in params}
        self._positional = [
            slot[p.name]
            for p in params
            if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
        ]
        self._keyword = {
            p.name: slot[p.name]
            for p in params
            if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY)
        }
        star = [p for p in params if p.kind is kinds.VAR_POSITIONAL]
        stars = [p for p in params if p.kind is kinds.VAR_KEYWORD]
        self._var_positional = slot_of(star[0], f"*{star[0].name}") if star else None
        self._var_keyword = slot_of(stars[0], f"**{stars[0].name}") if stars else None
        if signature is None:
            self._var_positional, self._var_keyword = _Slot("*args"), _Slot("**kwargs")
        self._result = _Slot("return", hints.get("return", Any))
        slots = [
            *self._positional,
            *self._keyword.values(),
            self._var_positional,
            self._var_keyword,
        ]
        self._restores = any(s is not None and s.decoder is not None for s in slots)
        self._zoned = any(s is not None and s.zoned for s in slots)
        # The common signature (plain parameters, no *args / **kwargs / keyword-only) is
        # checked without ``Signature.bind``, which costs microseconds per call.
        self._simple = signature is not None and all(
            p.kind is kinds.POSITIONAL_OR_KEYWORD for p in params
        )
        self._names = {p.name: index for index, p in enumerate(params)}
        # Of plain parameters, those without a default come first (Python's own rule): given
        # n positional arguments, the keywords must name _missing[n] (for n < len(required)).
        required = [p.name for p in params if p.default is inspect.Parameter.empty]
        self._missing = [frozenset(required[n:]) for n in range(len(required))]
        self._resolved = True

    @property
    def display(self) -> str:
        """``name(a, b=0)``: the task as its callers see it, without annotations."""
        if self.signature is None:
            return f"{self.name}(...)"
        bare = self.signature.replace(
            parameters=[
                p.replace(annotation=inspect.Parameter.empty)
                for p in self.signature.parameters.values()
            ],
            return_annotation=inspect.Signature.empty,
        )
        return f"{self.name}{bare}"

    # -- binding ---------------------------------------------------------------------------
    def _fits(self, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> bool:
        if not self._simple:
            return self._why_not(args, kwargs) is None
        given = len(args)
        if given > len(self._names):
            return False
        if kwargs:
            names = self._names
            for key in kwargs:
                index = names.get(key)
                if index is None or index < given:
                    return False
        missing = self._missing
        return given >= len(missing) or kwargs.keys() >= missing[given]

    def _why_not(self, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> str | None:
        if self.signature is None:
            return None
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            return str(exc)
        return None

    def _slot_of(self, position: int | str) -> _Slot:
        if isinstance(position, int):
            if position < len(self._positional):
                return self._positional[position]
            slot = self._var_positional
        else:
            slot = self._keyword.get(position, self._var_keyword)
        assert slot is not None  # the call binds
        return slot

    # -- arguments -------------------------------------------------------------------------
    def encode_call(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], max_bytes: int, piped: bool = False
    ) -> bytes:
        """The payload of a call: ArgumentsMismatch if it does not fit the signature,
        SerializationError naming the first argument that would not arrive as given,
        PayloadTooLarge over ``max_bytes``. ``piped``: a chain step, whose first argument
        (the previous step's result) is added when it runs (``with_first_argument``)."""
        if not self._resolved:
            self._resolve()
        skip = 1 if piped else 0
        bound = (_PIPED, *args) if piped else args
        if not self._fits(bound, kwargs):
            why = self._why_not(bound, kwargs)
            if piped:
                why = f"{why} (its first argument is the previous step's result)"
            raise ArgumentsMismatch(f"cannot enqueue {self.display}: {why}")
        if self._restores:
            self._check_typed(args, kwargs, skip)
        else:  # every parameter plain: one type check per value, a message only on failure
            for value in args:
                if _plain_problem(value) is not None:
                    self._check_typed(args, kwargs, skip)
            for value in kwargs.values():
                if _plain_problem(value) is not None:
                    self._check_typed(args, kwargs, skip)
        if self._zoned:
            args = tuple(self._slot_of(i + skip).stored(v) for i, v in enumerate(args))
            kwargs = {key: self._slot_of(key).stored(v) for key, v in kwargs.items()}
        stored_args, stored_kwargs = _escaped(args, kwargs)
        try:
            payload = _encoder.encode({"args": stored_args, "kwargs": stored_kwargs})
        except _ENCODE_ERRORS as exc:  # checked above: only a value msgspec itself refuses
            raise SerializationError(f"cannot enqueue {self.name}: {exc}") from exc
        if len(payload) > max_bytes:
            raise PayloadTooLarge(
                f"cannot enqueue {self.name}: arguments are {len(payload)} bytes encoded, over "
                f"the limit of {max_bytes} bytes (App(max_payload_bytes=...))"
            )
        return payload

    def _check_typed(self, args: tuple[Any, ...], kwargs: dict[str, Any], skip: int = 0) -> None:
        """SerializationError naming the first argument that would not arrive as given
        (``args`` start at position ``skip``)."""
        for index, value in enumerate(args, start=skip):
            slot = self._slot_of(index)
            problem = slot.problem(value)
            if problem is not None:
                label = f"positional argument {index} ({slot.name})"
                raise SerializationError(f"cannot enqueue {self.name}: {label} {problem}")
        for key, value in kwargs.items():
            problem = self._slot_of(key).problem(value)
            if problem is not None:
                raise SerializationError(f"cannot enqueue {self.name}: argument {key!r} {problem}")

    def decode_call(self, payload: bytes) -> tuple[list[Any], dict[str, Any]]:
        """The arguments of a stored payload, restored to the annotated types: ValueError if it
        is corrupt, ArgumentsMismatch if it no longer fits the task (changed since enqueue)."""
        if not self._resolved:
            self._resolve()
        if not self._restores:
            args, kwargs = decode_payload(payload)
            if not self._fits(args, kwargs):
                raise self._mismatch(self._why_not(args, kwargs))
            return args, kwargs
        try:
            call = _raw_call.decode(payload)
        except msgspec.DecodeError as exc:
            raise ValueError(f"corrupt job payload: {exc}") from exc
        if not self._fits(call.args, call.kwargs):
            raise self._mismatch(self._why_not(call.args, call.kwargs))
        if ESCAPED in payload:
            call.args = [_unescaped_raw(raw) for raw in call.args]
            call.kwargs = {key: _unescaped_raw(raw) for key, raw in call.kwargs.items()}
        position: int | str = 0
        try:
            values = []
            for position, raw in enumerate(call.args):
                values.append(self._slot_of(position).decode(raw))
            named = {}
            for position, raw in call.kwargs.items():
                named[position] = self._slot_of(position).decode(raw)
        except msgspec.ValidationError as exc:
            slot = self._slot_of(position)
            where = f"argument {position!r}" if isinstance(position, str) else f"{slot.name}"
            raise self._mismatch(f"{where} is not a {_type_name(slot.type)}: {exc}") from None
        except msgspec.DecodeError as exc:
            raise ValueError(f"corrupt job payload: {exc}") from exc
        return values, named

    def _mismatch(self, why: str | None) -> ArgumentsMismatch:
        return ArgumentsMismatch(f"arguments do not match {self.display}: {why}")

    # -- results ---------------------------------------------------------------------------
    def encode_result(self, value: Any) -> bytes:
        """A return value as JSON; SerializationError if it would not be read back as it is
        (and the return annotation does not restore it)."""
        if value is None:
            return b"null"
        if not self._resolved:
            self._resolve()
        result = self._result
        problem = _plain_problem(value) if result.decoder is None else result.problem(value)
        if problem is not None:
            problem = result.problem(value)
            raise SerializationError(f"the result of {self.name} {problem}")
        try:
            return _encoder.encode(result.stored(value))
        except _ENCODE_ERRORS as exc:
            raise SerializationError(f"the result of {self.name} cannot be encoded: {exc}") from exc

    def decode_result(self, data: bytes) -> Any:
        """A stored result, restored to the return annotation's type when it has one (plain
        JSON if it no longer fits: the task changed); ValueError if it is corrupt."""
        if not self._resolved:
            self._resolve()
        if self._result.decoder is not None:
            try:
                return self._result.decode(data)
            except msgspec.ValidationError:
                pass
        return _decoder.decode(data)
