"""``duly worker --processes P``: P worker processes, restarted when they die.

Children are plain ``python -m duly worker ... --processes 1`` subprocesses, except the first
ones where ``fork`` is given and safe (``duly._worker.forking``): those are forks of the
supervisor made before it starts a thread or opens a connection, which start at once. A child
that dies is restarted (spawned) with a growing delay (so a crash-looping app does not spin);
SIGTERM/SIGINT are forwarded so every child stops gracefully, and a child still alive after
its grace period is killed.

With ``burst`` (``duly worker --burst --processes P``) every child drains and exits on its own:
none is restarted, and the supervisor exits once all have, with the worst exit code.

A child recycled (``--max-jobs-per-child`` / ``--max-memory-per-child``) exits with
``EXIT_RECYCLED`` once its jobs are finished: it is replaced at once (in burst mode too).

With a ``LeaseKeeper`` (``duly._worker.leases``), each child gets a pipe (``--lease-fd N``) to
tell which jobs it holds, and the supervisor renews their leases while the child lives, so a
child whose heartbeat is stopped by a task holding the GIL keeps its jobs.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import TYPE_CHECKING

from duly._worker.forking import ForkedChild, can_fork, fork_child
from duly._worker.recycling import EXIT_RECYCLED

if TYPE_CHECKING:
    from duly._worker.leases import LeaseKeeper

__all__ = ["Supervisor"]

_Child = subprocess.Popen[bytes] | ForkedChild

log = logging.getLogger("duly.supervisor")

_MAX_RESTART_DELAY = 30.0
_HEALTHY_AFTER = 30.0


class Supervisor:
    """Keeps ``processes`` copies of ``child_argv`` running until told to stop (or, with
    ``burst``, until every copy has exited)."""

    def __init__(
        self,
        child_argv: Sequence[str],
        processes: int,
        grace: float,
        *,
        burst: bool = False,
        env: Mapping[str, str] | None = None,
        on_exit: Callable[[int], None] | None = None,
        leases: LeaseKeeper | None = None,
        fork: Callable[[int | None], None] | None = None,
    ) -> None:
        """``env``: the children's environment (default: this process's); ``on_exit(pid)`` is
        called once per child seen to exit (the metrics' bookkeeping of dead processes);
        ``leases`` renews the leases of the live children's jobs (each child is told its pipe's
        end by ``--lease-fd``); ``fork(lease_fd)`` runs one child's worker in a fork of this
        process (the same worker ``child_argv`` starts), used for the first children when
        ``can_fork()``."""
        self.child_argv = [sys.executable, "-m", "duly", *child_argv]
        self.processes = processes
        self.grace = grace
        self.burst = burst
        self.env = dict(env) if env is not None else None
        self.on_exit = on_exit
        self.leases = leases
        self.fork = fork
        self._exited: set[int] = set()
        self._stopping = False
        self._children: dict[int, tuple[_Child, float]] = {}
        self._delay: dict[int, float] = {}
        self._unwatched: list[tuple[int, int]] = []  # forked before the keeper started

    def _fork(self, slot: int) -> None:
        fork = self.fork
        assert fork is not None
        child, read = self._with_lease_pipe(lambda fd: fork_child(fork, fd))
        if read is not None:
            self._unwatched.append((child.pid, read))  # the keeper watches it once started
        self._started(slot, child, ", forked")

    def _spawn(self, slot: int) -> None:
        def popen(fd: int | None) -> _Child:
            if fd is None:
                return subprocess.Popen(self.child_argv, env=self.env)
            argv = [*self.child_argv, "--lease-fd", str(fd)]
            return subprocess.Popen(argv, env=self.env, pass_fds=(fd,))

        child, read = self._with_lease_pipe(popen)
        if read is not None:
            assert self.leases is not None
            self.leases.watch(child.pid, read)
        self._started(slot, child)

    def _with_lease_pipe(self, start: Callable[[int | None], _Child]) -> tuple[_Child, int | None]:
        """``start(fd)`` a child; with a lease keeper, ``fd`` is the write end of a new pipe
        (closed here once the child has it: its exit is then the pipe's end), and the read
        end is returned for the keeper."""
        if self.leases is None:
            return start(None), None
        read, write = os.pipe()
        try:
            child = start(write)
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)
        return child, read

    def _started(self, slot: int, child: _Child, how: str = "") -> None:
        self._children[slot] = (child, time.monotonic())
        log.info("started worker process %d (pid %d%s)", slot, child.pid, how)
        if self._stopping:  # a signal came while it started, before it was ours to tell
            child.send_signal(signal.SIGTERM)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self._stopping:
            for child, _ in self._children.values():
                child.kill()
            return
        self._stopping = True
        log.info(
            "supervisor: %s, stopping %d workers", signal.Signals(signum).name, len(self._children)
        )
        for child, _ in self._children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    def run(self) -> int:
        """Supervise until a signal (or the end of a burst); returns the exit code."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        if self.fork is not None and can_fork():  # before the keeper's thread exists
            for slot in range(self.processes):
                self._fork(slot)
        if self.leases is not None:
            self.leases.start()
            for pid, read in self._unwatched:
                self.leases.watch(pid, read)
        try:
            return self._supervise()
        finally:
            if self.leases is not None:
                self.leases.stop()

    def _supervise(self) -> int:
        for slot in range(self.processes):
            if slot not in self._children:  # (not forked)
                self._spawn(slot)
        restart_at: dict[int, float] = {}
        finished: set[int] = set()  # burst: slots whose child exited (never restarted)
        while not self._stopping and len(finished) < self.processes:
            time.sleep(0.2)
            now = time.monotonic()
            for slot, (child, started) in list(self._children.items()):
                code = child.poll()
                if code is not None:
                    self._reaped(child)
                if code is None or slot in restart_at or slot in finished or self._stopping:
                    continue  # (a child that exits because we are stopping is not a crash)
                if code == EXIT_RECYCLED:  # planned (--max-jobs-per-child...): replace it now
                    log.info(
                        "worker process %d (pid %d) recycled; starting another", slot, child.pid
                    )
                    self._delay.pop(slot, None)
                    restart_at[slot] = now
                    continue
                if self.burst:
                    finished.add(slot)
                    log.info("worker process %d (pid %d) exited with %s", slot, child.pid, code)
                    continue
                ran = now - started
                delay = (
                    0.5
                    if ran > _HEALTHY_AFTER
                    else min(self._delay.get(slot, 0.25) * 2, _MAX_RESTART_DELAY)
                )
                self._delay[slot] = delay
                log.warning(
                    "worker process %d (pid %d) exited with %s after %.1fs; restarting in %.1fs",
                    slot,
                    child.pid,
                    code,
                    ran,
                    delay,
                )
                restart_at[slot] = now + delay
            for slot, when in list(restart_at.items()):
                if now >= when and not self._stopping:
                    del restart_at[slot]
                    self._spawn(slot)
        deadline = time.monotonic() + self.grace + 10
        for child, _ in self._children.values():
            try:
                child.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                log.error("worker pid %d did not stop in time; killing it", child.pid)
                child.kill()
                child.wait()
            self._reaped(child)
        if not self.burst:
            return 0
        return max(_exit_status(child.returncode or 0) for child, _ in self._children.values())

    def _reaped(self, child: _Child) -> None:
        """``child`` exited (told once per child)."""
        if child.pid in self._exited:
            return
        self._exited.add(child.pid)
        if self.leases is not None:
            self.leases.forget(child.pid)  # its jobs' leases now lapse: they are recovered
        if self.on_exit is not None:
            self.on_exit(child.pid)


def _exit_status(returncode: int) -> int:
    """A child's return code as a shell shows it (killed by signal N: 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode
