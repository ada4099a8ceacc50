"""The storage format of a Redis namespace, and the steps that bring older data up to date
(Redis keeps no schema: this is its migration).

The format is the ``{<namespace>}:format`` key (inside the namespace's hash tag, so on a
cluster it lives with the data). ``format.lua`` reads it and records a newer one, never a lower
one. A namespace that holds data but no format key was written by duly 0.1.0: format 1.

Opening a backend (``open``; and the first blocking enqueue, which opens nothing) runs
``Formats``:

- nothing stored yet: record ``FORMAT`` (nothing to convert);
- an older format: run each step above it in order, recording its number after it, so a crash
  between two steps resumes at the next one (steps are idempotent: two processes upgrading at
  once both run them);
- a newer format (a newer duly wrote it): ``StorageTooNew``, nothing written.

A step that must convert data is a script ``lua/<name>.lua`` called with ``KEYS[1]`` the format
key (it routes the call to the namespace's slot) and ``ARGV[1]`` the prefix; it must finish its
work in one call or be safe to call again.

Formats:

1. duly 0.1.0: jobs, queues, counters, workers, unique holds, gates, rate limits.
2. duly 0.2: adds the event streams, groups and freshness scopes (keys.py). They are new keys
   and an optional job field, written when first used: nothing to convert.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Final

from duly._errors import StorageTooNew
from duly._records import StorageFormat
from duly.backends.redis._clients import Client
from duly.backends.redis._connection import RedisConnection
from duly.backends.redis._keys import Keyspace
from duly.backends.redis._scripts import Script, Value

__all__ = ["FORMAT", "STEPS", "Formats", "Step", "open_namespace"]


@dataclass(frozen=True, slots=True)
class Step:
    """What brings data of format ``to - 1`` to format ``to``."""

    to: int
    title: str
    #: ``lua/<script>.lua`` converting the data, or None when there is nothing to convert.
    script: str | None = None


#: The formats after the first, in order; the last one is what this duly reads and writes.
STEPS: Final = (
    Step(2, "event streams, groups and freshness scopes: new keys, nothing to convert"),
)
FORMAT: Final = STEPS[-1].to

#: One script call: the script, its KEYS and its ARGV.
Call = tuple[Script, Sequence[str], Sequence[Value]]


class Formats:
    """Checks and upgrades the storage format of one namespace (see the module docstring)."""

    def __init__(self, keys: Keyspace, where: str) -> None:
        self.keys = keys
        self.where = where
        #: True once this process found (or brought) the data at ``FORMAT``.
        self.ready = False
        self._script = Script("format")
        self._steps = {step.to: Script(step.script) for step in STEPS if step.script}

    def _format_call(self, mode: str | int) -> Call:
        k = self.keys
        return self._script, (k.format, k.all, k.queues), (FORMAT, mode)

    def _upgrade(self) -> Generator[Call, Any, None]:
        """The calls that check and upgrade the format, each sent the previous one's reply."""
        stored = int((yield self._format_call("open")))
        if stored > FORMAT:
            raise StorageTooNew(self.where, stored, FORMAT)
        for step in STEPS:
            if 0 < stored < step.to:
                if step.script is not None:
                    yield self._steps[step.to], (self.keys.format,), (self.keys.prefix,)
                yield self._format_call(step.to)
        self.ready = True

    async def ensure(self, client: Client) -> None:
        """Check the format and upgrade older data (``StorageTooNew`` on newer data)."""
        calls = self._upgrade()
        with suppress(StopIteration):
            script, keys, args = next(calls)
            while True:
                script, keys, args = calls.send(await script(client, keys, args))

    def ensure_blocking(self, run: Callable[[str, Sequence[str], Sequence[Value]], Any]) -> None:
        """``ensure`` for a blocking caller: ``run(source, keys, args)`` evaluates one script
        and returns its reply."""
        calls = self._upgrade()
        with suppress(StopIteration):
            call = next(calls)
            while True:
                call = calls.send(run(call[0].source, call[1], call[2]))

    async def read(self, client: Client) -> StorageFormat:
        """The stored format (written nothing) and ``FORMAT``."""
        script, keys, args = self._format_call("peek")
        return StorageFormat(int(await script(client, keys, args)), FORMAT)


async def open_namespace(conn: RedisConnection, formats: Formats) -> None:
    """Check the server answers, register the scripts, and check (and upgrade) the storage
    format: what ``open`` and ``migrate`` do."""
    with conn.guard("open"):
        client = conn.client
        await client.ping()
        await conn.load_scripts()
        if not formats.ready:
            await formats.ensure(client)
