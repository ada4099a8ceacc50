"""The tasks the chaos workers run. Every run leaves marks that duly knows nothing about.

Each worker process appends to its own file ``$CHAOS_MARKS/<pid>.marks`` (opened ``O_APPEND``;
one ``os.write`` per line, so lines from several threads never interleave)::

    S <token> <unix time>     a run started
    E <token> <unix time>     a run finished its body (about to return)

``token`` is chosen by the harness and passed as the first argument, so a job is identified
without asking duly. The harness reads these files to count runs, duplicates and in-flight jobs.

``app`` is built on first access from ``$DULY_URL`` (the worker imports ``chaos.tasks:app``);
the harness builds its own with ``make_app(url, producer=True)``, which also registers a task
the workers do not know (for the unknown-task poison).
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import threading
import time
from typing import Any

import duly

_fd: int | None = None
_fd_pid: int | None = None
_fd_lock = threading.Lock()


def _marks_fd() -> int:
    global _fd, _fd_pid
    pid = os.getpid()
    if _fd is None or _fd_pid != pid:
        with _fd_lock:
            if _fd is None or _fd_pid != pid:
                directory = os.environ["CHAOS_MARKS"]
                _fd = os.open(
                    os.path.join(directory, f"{pid}.marks"),
                    os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                    0o644,
                )
                _fd_pid = pid
    return _fd


def mark(kind: str, token: str) -> None:
    """Append one mark line (atomic: a single small O_APPEND write)."""
    os.write(_marks_fd(), f"{kind} {token} {time.time():.6f}\n".encode())


class Doom(BaseException):
    """A BaseException that is neither Exception, SystemExit nor KeyboardInterrupt."""


_RAISE: dict[str, type[BaseException]] = {
    "SystemExit": SystemExit,
    "KeyboardInterrupt": KeyboardInterrupt,
    "BaseException": Doom,
}


# -- the functions (registered on an App by make_app) -----------------------------------------
def work(token: str, ms: float = 0.0) -> str:
    mark("S", token)
    if ms:
        time.sleep(ms / 1000)
    mark("E", token)
    return token


def pipe(previous: str, token: str, ms: float = 0.0) -> str:
    """A chain step: ``work`` that takes the previous step's result and extends it."""
    work(token, ms)
    return f"{previous}>{token}"


async def awork(token: str, ms: float = 0.0) -> str:
    mark("S", token)
    if ms:
        await asyncio.sleep(ms / 1000)
    mark("E", token)
    return token


def hang_in_c(token: str) -> None:
    """Blocks in C (time.sleep) far past its timeout: its thread cannot be interrupted."""
    mark("S", token)
    time.sleep(3600)
    mark("E", token)


def hang_in_python(token: str) -> None:
    """Spins in pure Python past its timeout (interruptible by the async JobTimeout)."""
    mark("S", token)
    deadline = time.monotonic() + 3600
    x = 0
    while time.monotonic() < deadline:
        x += 1
    mark("E", token)


async def ahang(token: str) -> None:
    mark("S", token)
    await asyncio.sleep(3600)
    mark("E", token)


def raiser(token: str, what: str) -> None:
    mark("S", token)
    raise _RAISE[what](f"chaos: {what} from a sync job")


async def araiser(token: str, what: str) -> None:
    mark("S", token)
    raise _RAISE[what](f"chaos: {what} from an async job")


def memory_hog(token: str) -> None:
    """Allocates 32 MiB blocks until MemoryError (the worker runs under an RLIMIT_AS)."""
    mark("S", token)
    blocks = []
    while True:
        blocks.append(bytearray(32 * 1024 * 1024))
        if len(blocks) > 32768:  # 1 TiB: never reached under the limit
            break
    mark("E", token)


def self_kill(token: str, how: str) -> None:
    """Kills the worker process it runs in."""
    mark("S", token)
    if how == "exit":
        os._exit(13)
    elif how == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif how == "segfault":
        ctypes.string_at(0)
    time.sleep(5)


def resumable(token: str, items: int, batch: int, pause_ms: float) -> int:
    """A long job over ``items`` items in batches (scenario 11): each batch is checkpointed
    (``duly.current_job().checkpoint``) and marked ``B <token>:<next item> <time>``; a run
    marks ``R <token>:<its start item>`` first. On a drain it hands itself back."""
    job = duly.current_job()
    start = int(job.cursor or 0)
    mark("R", f"{token}:{start}")
    done = start
    while done < items:
        if job.stopping:
            job.checkpoint(done)
            raise duly.Interrupted()
        time.sleep(pause_ms / 1000)  # a batch of work
        done = min(done + batch, items)
        job.checkpoint(done)
        job.set_progress(done / items, f"{done} of {items}")
        mark("B", f"{token}:{done}")
    mark("E", token)
    return done


def unknown_to_workers(token: str) -> None:  # registered by producers only
    mark("S", token)


TASKS: dict[str, tuple[Any, dict[str, Any]]] = {
    "chaos.work": (work, {}),
    "chaos.pipe": (pipe, {}),
    "chaos.awork": (awork, {}),
    "chaos.hang_in_c": (hang_in_c, {"timeout": 1, "retries": 0}),
    "chaos.hang_in_python": (hang_in_python, {"timeout": 1, "retries": 0}),
    "chaos.ahang": (ahang, {"timeout": 1, "retries": 0}),
    "chaos.raiser": (raiser, {"retries": 0}),
    "chaos.araiser": (araiser, {"retries": 0}),
    "chaos.memory_hog": (memory_hog, {"retries": 0}),
    "chaos.self_kill": (self_kill, {"retries": 0}),
    "chaos.resumable": (resumable, {"retries": 0}),
}


def make_app(url: str, *, producer: bool = False, **options: Any) -> duly.App:
    """An App on ``url`` with every chaos task (``producer`` adds one workers do not know)."""
    app = duly.App(url, **options)
    for name, (fn, settings) in TASKS.items():
        app.task(name=name, **settings)(fn)
    if producer:
        app.task(name="chaos.unknown_to_workers")(unknown_to_workers)
    return app


_app: duly.App | None = None


def __getattr__(name: str) -> Any:
    global _app
    if name == "app":
        if _app is None:
            lost = os.environ.get("CHAOS_MAX_LOST")  # scenario 11: more kills than the default
            _app = make_app(os.environ["DULY_URL"], **({"max_lost": int(lost)} if lost else {}))
        return _app
    raise AttributeError(name)
