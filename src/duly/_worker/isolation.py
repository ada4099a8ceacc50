"""``@app.task(isolated=True)``: each run in a child process of a pool the worker keeps.

A run that crashes its process (a segfault in a C extension, ``os._exit``, the kernel's
out-of-memory killer) or that must be stopped hard (past its timeout, or cancelled) takes only
its child down: the job fails with ``JobProcessDied`` ("the job's process died: signal 11
(SIGSEGV)") or ``JobTimeout`` and is retried per its task's policy, while the worker and its
other jobs go on. The pool is started on the first isolated run (a ``forkserver`` context where
the OS has one, else ``spawn``: never a fork of a process holding connections and threads),
children are reused run after run, and one spare is kept started so a replacement is ready.

What crosses: the call's already-encoded JSON payload goes in, the result's JSON comes back
(never a pickle of the arguments). The child finds the function by module and qualified name,
so an isolated task must be defined at module level. Inside, ``duly.current_job()`` works;
``cancel_requested`` and ``stopping`` stay False (a cancel kills the child instead), ``cursor``
is the job's last checkpoint, and what ``set_progress`` / ``checkpoint`` set reaches the
worker (which stores it with its heartbeat) as ``P`` messages.

Messages on the child's pipe: the worker sends a JSON header (``fn``: module and qualname,
``job``: the JobContext fields) and the payload; the child answers with one message whose
first byte says what it holds: ``R`` + result JSON, ``Y`` + seconds (``Retry``), ``T`` +
seconds (``Throttled``), ``E`` + a pickle of ``(exception or None, type name, message,
traceback)``; before it, a lone ``S`` when that call imported the function (the first one in
that child), so a run's timeout never counts its module's import, and any number of ``P`` +
JSON ``{"p": progress, "c": cursor}`` (each the JSON text the job set, or null): what the run
set since the last one, sent at most every ``_PROGRESS_EVERY`` seconds and once before the
answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import logging
import pickle
import signal
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

from duly._context import JobContext, _current
from duly._errors import JobProcessDied, JobTimeout, Retry, Throttled
from duly._progress import RunProgress
from duly._serialization import encode

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

__all__ = ["IsolatedPool", "serve"]

log = logging.getLogger("duly.worker")

#: Seconds a child that closed its pipe gets to exit before it is killed.
_EXIT_WAIT = 2.0
#: Shortest pause between two ``P`` messages of one run (the worker writes once a second).
_PROGRESS_EVERY = 0.2


class _RemoteTraceback(Exception):
    """The traceback of an error raised in the child (chained under the error itself)."""

    def __str__(self) -> str:
        return str(self.args[0])


# -- the child's side ------------------------------------------------------------------------
class _ChildProgress(RunProgress):
    """An isolated run's progress and checkpoint: sent to the worker over the pipe."""

    __slots__ = ("_conn", "_sent_at")

    def __init__(self, conn: Connection, cursor: bytes | None) -> None:
        super().__init__(cursor)
        self._conn = conn
        self._sent_at = 0.0

    def set_progress(self, fraction: float, message: str | None, now: float) -> None:
        super().set_progress(fraction, message, now)
        self._maybe_send()

    def checkpoint(self, cursor: Any) -> None:
        super().checkpoint(cursor)
        self._maybe_send()

    def _maybe_send(self) -> None:
        if time.monotonic() - self._sent_at >= _PROGRESS_EVERY:
            self.send()

    def send(self) -> None:
        """Send what was set since the last message, if anything."""
        report = self.take("")
        self._sent_at = time.monotonic()
        if report is not None:
            text = {
                "p": None if report.progress is None else report.progress.decode(),
                "c": None if report.cursor is None else report.cursor.decode(),
            }
            self._conn.send_bytes(b"P" + json.dumps(text).encode())


def _resolve(module: str, qualname: str) -> Any:
    """The function named ``module.qualname`` (a task object's own function)."""
    from duly._task import Task

    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found.fn if isinstance(found, Task) else found


def _reply(error: BaseException) -> bytes:
    if isinstance(error, Retry):
        return b"Y" + repr(error.after).encode()
    if isinstance(error, Throttled):
        return b"T" + repr(error.retry_after).encode()
    tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    error.__traceback__ = None
    try:
        pickled = pickle.dumps((error, type(error).__name__, str(error), tb))
        pickle.loads(pickled)  # some exceptions pickle but do not unpickle
    except Exception:
        pickled = pickle.dumps((None, type(error).__name__, str(error), tb))
    return b"E" + pickled


def serve(conn: Connection) -> None:
    """A child's loop: run each call the worker sends, answer, wait for the next."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the worker's
    from duly._serialization import CallSpec

    specs: dict[tuple[str, str], tuple[Any, CallSpec]] = {}
    while True:
        try:
            header = json.loads(conn.recv_bytes())
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            return  # the worker closed the pool (or died)
        fields = header["job"]
        cursor = fields.pop("cursor", None)
        progress = _ChildProgress(conn, None if cursor is None else encode(cursor))
        token = _current.set(JobContext(**fields, _progress=progress))
        try:
            ref = (header["fn"][0], header["fn"][1])
            if (known := specs.get(ref)) is None:
                fn = _resolve(*ref)
                known = specs[ref] = (fn, CallSpec(fn, header["job"]["task"]))
                conn.send_bytes(b"S")  # imported: the run's timeout starts now
            fn, spec = known
            args, kwargs = spec.decode_call(payload)
            value = fn(*args, **kwargs)
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
            reply = b"R" + spec.encode_result(value)
        except BaseException as error:  # SystemExit too: the job's, not this loop's
            reply = _reply(error)
        finally:
            _current.reset(token)
        progress.send()  # the last values, before the answer
        conn.send_bytes(reply)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


# -- the worker's side -----------------------------------------------------------------------
def _context() -> Any:
    """Forkserver where the OS has it (a child forked from a clean server process), else
    spawn; never a fork of the worker (its threads and connections)."""
    import multiprocessing  # with the first isolated run: a worker without one never pays it

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # Imported once by the server, so a child starts with duly loaded (seconds on a busy
    # machine otherwise, per child). Only read when the server starts.
    context.set_forkserver_preload(["duly._worker.isolation"])
    return context


def _ref(fn: Any) -> tuple[str, str]:
    """How a child finds ``fn``: module and qualified name. A module run as ``python -m
    name`` is ``__main__`` here but ``name`` there (a child's ``__main__`` is not it)."""
    module: str = fn.__module__
    if module == "__main__":
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        if spec is not None and spec.name:
            module = spec.name
    return module, fn.__qualname__


def _set_once(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _died(exitcode: int | None) -> JobProcessDied:
    if exitcode is not None and exitcode < 0:
        try:
            name = f" ({signal.Signals(-exitcode).name})"
        except ValueError:
            name = ""
        return JobProcessDied(f"the job's process died: signal {-exitcode}{name}")
    return JobProcessDied(f"the job's process died: exit code {exitcode}")


class _Child:
    """One child process and the worker's end of its pipe."""

    __slots__ = ("conn", "known", "process")

    def __init__(self, process: BaseProcess, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        #: The functions this child imported already (module, qualname).
        self.known: set[tuple[str, str]] = set()

    def kill(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.process.kill()
        with contextlib.suppress(OSError):
            self.conn.close()

    def reap(self, wait: float) -> int | None:
        """Wait up to ``wait`` seconds for the process to exit (killing it then)."""
        self.process.join(wait)
        if self.process.exitcode is None:
            self.kill()
            self.process.join(wait)
        return self.process.exitcode


class IsolatedPool:
    """Up to ``size`` child processes running isolated jobs, one job per child at a time."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._idle: list[_Child] = []
        self._busy = 0
        self._starting = 0
        self._closed = False
        self._spare: asyncio.Task[None] | None = None

    @property
    def children(self) -> int:
        """Child processes alive now (idle or running a job)."""
        return len(self._idle) + self._busy

    async def run(self, fn: Any, job: JobContext, payload: bytes, timeout: float | None) -> bytes:
        """Run ``fn`` on ``payload`` in a child; its result's JSON. Raises what the task
        raised, ``JobTimeout`` after ``timeout`` seconds or ``JobProcessDied``."""
        child = await self._take()
        self._busy += 1
        self._keep_spare()
        ref = _ref(fn)
        header = {
            "fn": ref,
            "job": {
                "id": job.id,
                "task": job.task,
                "queue": job.queue,
                "attempt": job.attempt,
                "max_attempts": job.max_attempts,
                "key": job.key,
                "worker": job.worker,
                "cursor": job.cursor,
            },
        }
        reusable = False
        try:
            try:
                child.conn.send_bytes(json.dumps(header).encode())
                child.conn.send_bytes(payload)
            except OSError:
                pass  # it died meanwhile: its reply reads as EOF below
            if ref in child.known:
                reply = await self._answer(child, timeout, job)
            else:  # its first call here: the import is not part of the run's time
                reply = await self._reply(child, None)
                if reply == b"S":
                    child.known.add(ref)
                    reply = await self._answer(child, timeout, job)
            reusable = True
        finally:
            self._busy -= 1
            if reusable and not self._closed:
                self._idle.append(child)
            else:
                child.kill()
                await asyncio.to_thread(child.reap, _EXIT_WAIT)
        return self._decode(reply)

    async def _take(self) -> _Child:
        """An idle child still alive (one may have been killed while idle), or a new one."""
        while self._idle:
            child = self._idle.pop()
            if child.process.is_alive():
                return child
            child.kill()
            await asyncio.to_thread(child.reap, _EXIT_WAIT)
        return await self._start()

    async def _answer(self, child: _Child, timeout: float | None, job: JobContext) -> bytes:
        """The run's answer, its ``P`` messages applied to ``job`` as they come, all within
        ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            left = None if deadline is None else max(deadline - loop.time(), 0.0)
            try:
                reply = await self._reply(child, left)
            except JobTimeout:
                raise JobTimeout(
                    f"timed out after {timeout:g}s (isolated job; its process was killed)"
                ) from None
            if reply[:1] != b"P":
                return reply
            sent = json.loads(reply[1:])
            job._progress.apply(
                None if sent["p"] is None else sent["p"].encode(),
                None if sent["c"] is None else sent["c"].encode(),
            )

    async def _reply(self, child: _Child, timeout: float | None) -> bytes:
        loop = asyncio.get_running_loop()
        readable: asyncio.Future[None] = loop.create_future()
        fd = child.conn.fileno()
        loop.add_reader(fd, _set_once, readable)
        try:
            async with asyncio.timeout(timeout):
                await readable
        except TimeoutError:
            raise JobTimeout(
                f"timed out after {timeout:g}s (isolated job; its process was killed)"
            ) from None
        finally:
            loop.remove_reader(fd)
        try:
            return child.conn.recv_bytes()  # readable: the child wrote (or closed) it whole
        except (EOFError, OSError):
            exitcode = await asyncio.to_thread(child.reap, _EXIT_WAIT)
            raise _died(exitcode) from None

    @staticmethod
    def _decode(reply: bytes) -> bytes:
        kind, body = reply[:1], reply[1:]
        if kind == b"R":
            return body
        if kind == b"Y":
            raise Retry(float(body))
        if kind == b"T":
            raise Throttled(float(body))
        error, name, message, tb = pickle.loads(body)
        if not isinstance(error, BaseException):
            error = type(name, (Exception,), {})(message)
        error.__cause__ = _RemoteTraceback(tb)
        raise error

    async def _start(self) -> _Child:
        self._starting += 1
        try:
            return await asyncio.to_thread(self._start_child)
        finally:
            self._starting -= 1

    @staticmethod
    def _start_child() -> _Child:
        context = _context()
        ours, theirs = context.Pipe()
        process = context.Process(target=serve, args=(theirs,), name="duly-isolated", daemon=True)
        process.start()
        theirs.close()
        return _Child(process, ours)

    def _keep_spare(self) -> None:
        """Start a spare child in the background, so the next run need not wait for one."""
        if self._idle or self._starting or self.children >= self.size or self._closed:
            return
        if self._spare is not None and not self._spare.done():
            return
        self._spare = asyncio.get_running_loop().create_task(self._add_spare())

    async def _add_spare(self) -> None:
        try:
            child = await self._start()
        except Exception:
            log.exception("could not start a process for isolated jobs")
            return
        if self._closed:
            child.kill()
            await asyncio.to_thread(child.reap, _EXIT_WAIT)
        else:
            self._idle.append(child)

    async def close(self) -> None:
        """Stop the idle children (running ones are killed as their runs end)."""
        self._closed = True
        if self._spare is not None:
            with contextlib.suppress(BaseException):
                await self._spare
        idle, self._idle = self._idle, []
        for child in idle:
            with contextlib.suppress(OSError):
                child.conn.close()  # it reads EOF and exits
        for child in idle:
            await asyncio.to_thread(child.reap, _EXIT_WAIT)
