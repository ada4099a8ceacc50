"""Capabilities: what a backend offers beyond the core ``Backend`` protocol.

The core protocol (``duly.backends.base``) is the job lifecycle. Every other feature that needs
storage of its own (freshness scopes, groups, the event stream, webhooks, the Redis hand-off,
transactional enqueue...) is a *capability*: a protocol of its own, in its own module of this
package, implemented by an object the backend exposes under one attribute::

    backend.freshness          # a FreshnessStore (duly.backends.freshness)
    FRESHNESS.of(backend)      # the same, typed; ConfigurationError if the backend lacks it

A capability whose state must change in the same atomic step as a job (a group counting its
member's outcome, an event per state change) is still kept atomically by the backend: its
finish / recover / cancel step calls into the capability's part of the store (a Lua include,
SQL in the same transaction). The capability's protocol says what that step must do.

Adding a capability: a module here with its protocol and its ``Capability`` key, the
implementation in each backend (``duly/backends/<backend>/_<capability>.py``, exposed by the
facade under the key's attribute), and its conformance tests under ``tests/conformance/``.
"""

from __future__ import annotations

from typing import Generic, TypeVar, cast

from duly._errors import ConfigurationError

__all__ = ["Capability"]

T = TypeVar("T")


class Capability(Generic[T]):
    """The key of one capability: the backend attribute that holds its implementation."""

    __slots__ = ("attribute", "what")

    def __init__(self, attribute: str, what: str) -> None:
        self.attribute = attribute
        #: What a user would call it, for the error of a backend that lacks it.
        self.what = what

    def __repr__(self) -> str:
        return f"<Capability {self.attribute}>"

    def offered_by(self, backend: object) -> bool:
        """Whether ``backend`` implements this capability (now: a Redis Cluster has no
        hand-off)."""
        return getattr(backend, self.attribute, None) is not None

    def of(self, backend: object) -> T:
        """``backend``'s implementation; ``ConfigurationError`` if it has none."""
        implementation = getattr(backend, self.attribute, None)
        if implementation is None:
            raise ConfigurationError(f"{self.what} is not supported by {type(backend).__name__}")
        return cast(T, implementation)
