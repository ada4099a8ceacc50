"""The supervisor keeps the leases of its live children's jobs.

A task stuck in C code that holds the GIL (a runaway regex, say) stops every other thread of its
process, the worker's heartbeat included: past the lease, another worker would recover the
task's job and the jobs running beside it, and run them twice, though their process is alive.
So a supervised child (``duly worker --processes P``, P > 1) tells its supervisor, over a pipe,
which jobs it holds (``LeaseShare``), and the supervisor, another process with a GIL of its
own, renews their leases every ``lease / 3`` too (``LeaseKeeper``), for as long as that child
lives:

- a child that dies is forgotten at once (its exit, or the end of its pipe): its jobs' leases
  lapse and they are recovered as before;
- a supervisor that dies takes its renewals with it: children that die with it lose their
  leases; children that live on keep renewing their own;
- a child holds the GIL at most between two messages: it writes the jobs it starts before
  their code runs, and what it holds at each of its own heartbeats (a finished job's id may be
  renewed once more: the backend extends only jobs still running under that worker).

Messages are JSON lines: ``{"worker": id, "add": [ids]}`` (jobs started),
``{"worker": id, "held": [ids]}`` (all it holds now), ``{"worker": id, "bye": true}`` (it is
about to unregister: the keeper renews nothing more, and if it ever renewed for this worker it
unregisters the worker again after its last renewal, which would otherwise re-register it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import select
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from duly._errors import BackendUnavailable

if TYPE_CHECKING:
    from duly._clock import Clock
    from duly.backends.base import Backend

__all__ = ["LeaseKeeper", "LeaseShare"]

log = logging.getLogger("duly.supervisor")


class LeaseShare:
    """A child's end: tells the supervisor, through the pipe ``fd``, the jobs held here.

    The pipe is non-blocking: a supervisor that stops reading (frozen, or swapped out) must
    not stop this process. A message that does not fit is dropped, and the next heartbeat's
    ``held`` (every job held then) makes up for it; a line written in part is finished before
    any other, so the supervisor never reads a torn one."""

    #: How long ``bye`` waits for a full pipe to drain (the other messages never wait).
    BYE_WAIT = 1.0

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd
        os.set_blocking(fd, False)
        #: The end of a line the pipe took only in part.
        self._rest = b""
        #: Messages dropped since the last one that went through.
        self.dropped = 0

    def add(self, worker: str, job_ids: Iterable[str]) -> None:
        """Jobs about to start here (written before their code runs)."""
        self._send({"worker": worker, "add": list(job_ids)})

    def held(self, worker: str, job_ids: Iterable[str]) -> None:
        """Every job held here now."""
        self._send({"worker": worker, "held": list(job_ids)})

    def bye(self, worker: str) -> None:
        """This worker is about to unregister: nothing more to renew."""
        self._send({"worker": worker, "bye": True}, wait=self.BYE_WAIT)

    def _send(self, message: dict[str, object], wait: float = 0.0) -> None:
        if self.fd is None:
            return
        line = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        deadline = time.monotonic() + wait
        try:
            while not self._write(line):
                left = deadline - time.monotonic()
                if left <= 0:
                    self.dropped += 1  # the next heartbeat's "held" says it all again
                    return
                select.select([], [self.fd], [], left)
        except OSError as exc:  # the supervisor is gone: this process renews its own leases
            log.warning("lease share: the supervisor's pipe is closed (%s)", exc)
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None

    def _write(self, line: bytes) -> bool:
        """Write what is left of the last line, then ``line``; False if ``line`` did not go
        (nothing of it written), True once it went, whole or in part (its rest goes first
        next time)."""
        assert self.fd is not None
        if self._rest:
            try:
                self._rest = self._rest[os.write(self.fd, self._rest) :]
            except BlockingIOError:
                return False
            if self._rest:
                return False
        try:
            written = os.write(self.fd, line)
        except BlockingIOError:
            return False
        self._rest = line[written:]
        self.dropped = 0
        return True


class _Child:
    """What one child process told the keeper."""

    __slots__ = ("beaten", "beating", "buffer", "bye", "fd", "held", "worker")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.worker: str | None = None
        self.held: set[str] = set()
        self.buffer = b""
        self.bye = False
        #: Whether the keeper ever renewed for this worker, or is renewing now.
        self.beaten = self.beating = False


class LeaseKeeper:
    """The supervisor's end: renews the leases of the jobs its live children hold, on a thread
    with an event loop (and a backend) of its own.

    ``connect()`` opens the backend on that loop and ``disconnect()`` closes it (an App's
    ``backend`` and ``aclose``); ``lease`` is the children's lease in seconds."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[Backend]],
        disconnect: Callable[[], Awaitable[None]],
        clock: Clock,
        lease: float,
    ) -> None:
        self.connect = connect
        self.disconnect = disconnect
        self.clock = clock
        self.lease = lease
        self._children: dict[int, _Child] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- the supervisor's thread -------------------------------------------------------------
    def start(self) -> None:
        """Start renewing (on a thread of its own)."""
        self._thread = threading.Thread(target=self._serve, name="duly-leases", daemon=True)
        self._thread.start()
        self._started.wait()

    def watch(self, pid: int, fd: int) -> None:
        """Renew for the child ``pid``, which writes to the other end of pipe ``fd`` (this
        keeper closes ``fd``)."""
        assert self._loop is not None, "start() first"
        self._loop.call_soon_threadsafe(self._watch, pid, fd)

    def forget(self, pid: int) -> None:
        """The child ``pid`` exited: renew nothing more for it."""
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._forget, pid)

    def stop(self) -> None:
        """Stop renewing and close the backend."""
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    # -- the keeper's thread -----------------------------------------------------------------
    def _serve(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception:  # never take the supervisor down: its children renew their own
            log.exception("lease keeper stopped")
        finally:
            self._started.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = stop = asyncio.Event()
        self._started.set()
        backend: Backend | None = None
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.lease / 3):
                        await stop.wait()
                if stop.is_set():
                    break
                if backend is None:
                    backend = await self._open()
                if backend is not None:
                    await self._beat(backend)
        finally:
            for pid in list(self._children):
                self._forget(pid)
            if backend is not None:
                with contextlib.suppress(Exception):
                    await self.disconnect()

    async def _open(self) -> Backend | None:
        try:
            return await self.connect()
        except BackendUnavailable as exc:
            log.warning("lease keeper: backend unavailable: %s", exc)
            return None

    async def _beat(self, backend: Backend) -> None:
        """One renewal of every live child's leases."""
        for child in list(self._children.values()):
            if child.worker is None or not child.held or child.bye:
                continue
            now = self.clock.now()
            child.beaten = child.beating = True
            try:
                await backend.heartbeat(child.worker, [*child.held], now, now + self.lease)
            except BackendUnavailable as exc:
                log.warning("lease keeper: heartbeat: backend unavailable: %s", exc)
            finally:
                child.beating = False
            if child.bye:  # it unregistered while this renewal was on its way
                await self._unregister(backend, child.worker)

    async def _unregister(self, backend: Backend, worker: str) -> None:
        try:
            await backend.unregister_worker(worker)
        except BackendUnavailable as exc:
            log.warning("lease keeper: unregister: backend unavailable: %s", exc)

    def _watch(self, pid: int, fd: int) -> None:
        assert self._loop is not None
        os.set_blocking(fd, False)
        self._children[pid] = child = _Child(fd)
        self._loop.add_reader(fd, self._read, pid, child)

    def _forget(self, pid: int) -> None:
        child = self._children.pop(pid, None)
        if child is None:
            return
        child.held.clear()
        assert self._loop is not None
        self._loop.remove_reader(child.fd)
        os.close(child.fd)

    def _read(self, pid: int, child: _Child) -> None:
        try:
            data = os.read(child.fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the child exited (or closed its end): nothing more to renew for it
            self._forget(pid)
            return
        *lines, child.buffer = (child.buffer + data).split(b"\n")
        for line in lines:
            self._apply(child, line)

    def _apply(self, child: _Child, line: bytes) -> None:
        try:
            message = json.loads(line)
            child.worker = str(message["worker"])
        except (ValueError, KeyError, TypeError):
            log.warning("lease keeper: unreadable message %r", line[:200])
            return
        if "add" in message:
            child.held.update(message["add"])
        elif "held" in message:
            child.held = set(message["held"])
        elif message.get("bye"):
            child.bye = True
            child.held.clear()
            if child.beaten and not child.beating:
                # A renewal sent before this may have landed after the worker unregistered.
                task = asyncio.get_running_loop().create_task(self._unregister_later(child.worker))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _unregister_later(self, worker: str) -> None:
        with contextlib.suppress(BackendUnavailable):
            await self._unregister(await self.connect(), worker)
