"""Concurrency control, written once (PRODUCT §4): key templates, rate strings, and the limits
a task declares, rendered into the fields every backend enforces (see ``duly.backends.base``).

- ``unique=`` becomes ``NewJob.unique_key`` (``<task>:<rendered>``): one active job per key.
- ``mutex=`` becomes the gate ``mutex:<rendered>`` with limit 1 — shared by every task naming
  the same mutex, so two kinds of job can exclude each other.
- ``concurrency=N`` becomes the gate ``concurrency:<rendered concurrency_key>`` (default: the
  task name) with limit N.
- ``rate_limit="N/s"`` becomes a GCRA schedule on ``rate:<rendered rate_key>`` (default: the
  task name): N start at once, then one every period/N; the worker reserves a slot per job.

A template is ``str.format`` syntax over the task's parameters (``"{team_id}:{scope}"``,
``"{user.id}"``), checked against the function's signature when the task is registered.
"""

from __future__ import annotations

import inspect
import re
import string
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from duly._errors import ConfigurationError
from duly._records import RateRequest, UniqueUntil
from duly._sealing import plain_digest
from duly._serialization import canonical

__all__ = [
    "KeyTemplate",
    "Limits",
    "RateLimit",
    "bind_arguments",
    "gcra_slots",
    "parse_rate",
    "refuse_nul",
]

_PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*\.?\d*)\s*([smhd])\s*$")
#: Rendered keys longer than this are rejected (they are stored and indexed).
MAX_KEY_LENGTH = 512


def refuse_nul(value: str, what: str) -> str:
    """``value`` unchanged; ConfigurationError (a ValueError) when it holds a NUL character.

    PostgreSQL text cannot hold NUL (issue 28 item 6), so a name or key that does is refused
    on every backend, before any backend sees it: one contract, not one per store. The value
    is not quoted (a key may be rendered from secret arguments)."""
    if "\x00" in value:
        raise ConfigurationError(f"{what} must not contain a NUL character (\\x00)")
    return value


def bind_arguments(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The call's arguments by parameter name, defaults filled in."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


class KeyTemplate:
    """A key rendered from a call's arguments: a format string, or every argument (``True``).

    A key rendered from a secret argument (``secret=``: a template naming one, or ``True`` on
    a task that has one) is stored as ``digest`` of it (``duly._sealing``: ``#`` and a keyed
    hash), never as the value itself; equal calls still give equal keys."""

    __slots__ = ("_digest", "_signature", "_what", "template")

    def __init__(
        self,
        template: str | bool,
        fn: Callable[..., Any],
        what: str,
        secret: Collection[str] = (),
        digest: Callable[[str], str] = plain_digest,
    ) -> None:
        if template is True:
            self.template: str | None = None
        elif isinstance(template, str) and template:
            self.template = template
        else:
            raise ConfigurationError(f"{what}= must be a non-empty template string or True")
        self._signature = inspect.signature(fn)
        self._what = what
        roots = set(self._signature.parameters) if self.template is None else self._check(what)
        self._digest = digest if roots & set(secret) else None

    def _check(self, what: str) -> set[str]:
        """The parameters the template uses; ConfigurationError if it is not valid."""
        assert self.template is not None
        params = self._signature.parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(self.template) if f is not None]
        except ValueError as exc:
            raise ConfigurationError(
                f"{what}={self.template!r} is not a valid template: {exc}"
            ) from None
        roots = set()
        for field in fields:
            root = re.split(r"[.\[]", field, maxsplit=1)[0]
            if not root or root.isdigit():
                raise ConfigurationError(
                    f"{what}={self.template!r}: name the parameters, e.g. {{team_id}}"
                )
            if root not in params and not takes_any:
                raise ConfigurationError(
                    f"{what}={self.template!r} uses {{{root}}}, which is not a parameter of "
                    f"the function (it takes {', '.join(params) or 'nothing'})"
                )
            roots.add(root)
        return roots

    def render(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The key for one call; ValueError if the arguments do not fill the template."""
        try:
            arguments = bind_arguments(self._signature, args, kwargs)
        except TypeError as exc:
            raise TypeError(f"the arguments do not match the function: {exc}") from None
        if self.template is None:
            key = canonical(arguments).decode()
        else:
            try:
                key = self.template.format_map(arguments)
            except (KeyError, AttributeError, IndexError) as exc:
                # Named, never quoted: the arguments may be secret (issue 28).
                raise ValueError(
                    f"cannot render key template {self.template!r} from the arguments of "
                    f"({', '.join(arguments)}): {type(exc).__name__}: {exc}"
                ) from None
        if self._digest is not None:
            return self._digest(key)  # fixed length: no limit to check
        if len(key) > MAX_KEY_LENGTH:
            what = "every argument" if self.template is None else repr(self.template)
            raise ValueError(
                f"the key rendered from {what} is {len(key)} characters long, over the limit "
                f"of {MAX_KEY_LENGTH}"
            )
        return refuse_nul(key, f"the key rendered from {self._what}=")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """``count`` starts per ``period`` seconds, as a GCRA schedule: a burst of ``count``, then
    one every ``period / count``."""

    count: int
    period: float

    @property
    def interval(self) -> float:
        return self.period / self.count


def parse_rate(text: str) -> RateLimit:
    """``"10/s"``, ``"100/m"``, ``"5/h"``, ``"1000/d"`` or ``"3/10s"`` (3 per 10 seconds)."""
    match = _RATE.match(text) if isinstance(text, str) else None
    if match is None:
        raise ConfigurationError(
            f"rate_limit={text!r}: write it as 'N/s', 'N/m', 'N/h' or 'N/d' (e.g. '10/s')"
        )
    count, multiple, unit = int(match[1]), match[2], match[3]
    period = (float(multiple) if multiple else 1.0) * _PERIODS[unit]
    if count < 1 or period <= 0:
        raise ConfigurationError(f"rate_limit={text!r}: the count and period must be > 0")
    return RateLimit(count, period)


@dataclass(frozen=True, slots=True)
class Limits:
    """A task's concurrency control, validated at registration."""

    task: str
    unique: KeyTemplate | None = None
    unique_until: UniqueUntil = "finish"
    unique_ttl: float | None = None
    gate: KeyTemplate | None = None
    gate_prefix: str = ""
    gate_limit: int = 0
    rate: RateLimit | None = None
    rate_key: KeyTemplate | None = None
    #: Index jobs by their unique key (``NewJob.key``): a watch's jobs are found by it.
    key_by_unique: bool = False

    @classmethod
    def build(
        cls,
        task: str,
        fn: Callable[..., Any],
        *,
        unique: str | bool | None = None,
        unique_until: str = "finish",
        unique_ttl: float | None = None,
        mutex: str | None = None,
        concurrency: int | None = None,
        concurrency_key: str | None = None,
        rate_limit: str | None = None,
        rate_key: str | None = None,
        key_by_unique: bool = False,
        secret: Collection[str] = (),
        digest: Callable[[str], str] = plain_digest,
    ) -> Limits | None:
        """Validate a task's settings (None if it has none); ConfigurationError explains any
        mistake. Keys rendered from the ``secret`` parameters are stored as ``digest``."""

        def template(text: str | bool, what: str) -> KeyTemplate:
            return KeyTemplate(text, fn, what, secret, digest)

        if unique_until not in ("start", "finish"):
            raise ConfigurationError(
                f"unique_until must be 'start' or 'finish', not {unique_until!r}"
            )
        if unique_ttl is not None and not unique_ttl > 0:
            raise ConfigurationError(f"unique_ttl must be > 0 seconds, got {unique_ttl!r}")
        if mutex is not None and concurrency is not None:
            raise ConfigurationError(
                "give mutex= or concurrency=, not both (a mutex is concurrency=1 on a key)"
            )
        if concurrency_key is not None and concurrency is None:
            raise ConfigurationError("concurrency_key= needs concurrency=N")
        if rate_key is not None and rate_limit is None:
            raise ConfigurationError("rate_key= needs rate_limit=")
        if concurrency is not None and (
            isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
        ):
            raise ConfigurationError(f"concurrency must be an int >= 1, got {concurrency!r}")
        gate = gate_prefix = None
        gate_limit = 0
        if mutex is not None:
            gate, gate_prefix, gate_limit = template(mutex, "mutex"), "mutex:", 1
        elif concurrency is not None:
            gate = template(concurrency_key or _literal(task), "concurrency_key")
            gate_prefix, gate_limit = "concurrency:", concurrency
        unique_template = None if unique is None or unique is False else template(unique, "unique")
        if unique_template is None and gate is None and rate_limit is None:
            return None
        return cls(
            task=task,
            unique=unique_template,
            unique_until="start" if unique_until == "start" else "finish",
            unique_ttl=unique_ttl,
            gate=gate,
            gate_prefix=gate_prefix or "",
            gate_limit=gate_limit,
            rate=None if rate_limit is None else parse_rate(rate_limit),
            rate_key=(
                None if rate_limit is None else template(rate_key or _literal(task), "rate_key")
            ),
            key_by_unique=key_by_unique,
        )

    def unique_key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The unique key of one call: ``<task>:<rendered>``."""
        assert self.unique is not None
        return f"{self.task}:{self.unique.render(args, kwargs)}"

    def job_fields(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], now: float
    ) -> dict[str, Any]:
        """The ``NewJob`` fields of one call (unique key, gate; ``key`` for a watch). Renders
        the rate key too, so arguments that cannot fill it fail at enqueue, not in a worker."""
        fields: dict[str, Any] = {}
        if self.rate_key is not None:
            self.rate_key.render(args, kwargs)
        if self.unique is not None:
            fields["unique_key"] = self.unique_key(args, kwargs)
            if self.key_by_unique:
                fields["key"] = fields["unique_key"]
            fields["unique_until"] = self.unique_until
            if self.unique_ttl is not None:
                fields["unique_expires_at"] = now + self.unique_ttl
        if self.gate is not None:
            fields["gate"] = self.gate_prefix + self.gate.render(args, kwargs)
            fields["gate_limit"] = self.gate_limit
        return fields

    def rate_request(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], not_before: float = 0.0
    ) -> RateRequest:
        """The slot one run of this task asks of its rate limit."""
        assert self.rate is not None and self.rate_key is not None
        key = "rate:" + self.rate_key.render(args, kwargs)
        return RateRequest(key, self.rate.interval, self.rate.count, not_before)


def gcra_slots(
    requests: Sequence[RateRequest], now: float, state: dict[str, tuple[float, float]]
) -> list[float]:
    """GCRA over ``requests``, in order: each one's slot start (``Backend.reserve_rate``).

    ``state`` maps a key to its stored ``(tat, not_before)`` (absent = none) and is updated in
    place. A request's ``not_before`` stays on its key, so no later slot starts before it, and
    moves ``tat`` up to it: the key has its whole burst again at ``not_before``. State whose
    tat has passed counts as none. The SQL backends run this between reading and writing the
    locked rows; the Redis script ``reserve_rate.lua`` is the same algorithm.
    """
    starts = []
    for request in requests:
        tat, not_before = state.get(request.key, (now, 0.0))
        if tat <= now:
            tat, not_before = now, 0.0
        tolerance = (request.burst - 1) * request.interval
        not_before = max(not_before, request.not_before)
        tat = max(tat, not_before)
        starts.append(max(now, not_before, tat - tolerance))
        state[request.key] = (tat + request.interval, not_before)
    return starts


def _literal(text: str) -> str:
    """A template that renders to ``text`` itself."""
    return text.replace("{", "{{").replace("}", "}}")
