"""The supervisor's first children as forks of itself: they start without a new interpreter.

A spawned child (``python -m duly worker ... --supervised``) imports duly, click and the app
again before it claims: about 0.17 s on this project's 2-core machine, paid while its
siblings do the same. A fork made right after the supervisor loaded the app starts from that
state and claims at once (``bench/startup.py --mode default``, 7 rounds: first job 0.349 s
after ``duly worker`` started with spawned children, 0.190 s with forked ones).

A fork is only made where it is safe: on Linux, while the supervisor runs no other thread (a
thread's locks would be copied held) and holds no connection (it has opened none yet). Later
children (restarts, recycling) are spawned fresh, as are all of them elsewhere.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable

__all__ = ["ForkedChild", "can_fork", "fork_child"]

_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def can_fork() -> bool:
    """Whether a fork of this process now makes a sound worker (Linux, one thread)."""
    return sys.platform == "linux" and threading.active_count() == 1


class ForkedChild:
    """A forked child, seen through the part of ``subprocess.Popen`` the supervisor uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code once the child has exited (negative: killed by that signal)."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit (``subprocess.TimeoutExpired`` after ``timeout`` seconds)."""
        if self.returncode is None:
            if timeout is None:
                self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            else:
                self._wait_exit(timeout)
        assert self.returncode is not None
        return self.returncode

    def _wait_exit(self, timeout: float) -> None:
        """Reap the child within ``timeout`` seconds: woken at its exit through a pidfd (Linux
        >= 5.3), else by polling every 20 ms."""
        deadline = time.monotonic() + timeout
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # no pidfd here, or the child is reaped already
            pidfd = None
        try:
            while self.poll() is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(f"worker pid {self.pid}", timeout)
                if pidfd is None:
                    time.sleep(min(0.02, left))
                else:
                    select.select([pidfd], [], [], left)  # readable once the child has exited
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` unless the child is already reaped."""
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        """SIGKILL the child."""
        self.send_signal(signal.SIGKILL)


def fork_child(run: Callable[[int | None], None], lease_fd: int | None) -> ForkedChild:
    """Fork; the child runs ``run(lease_fd)`` (one worker) and exits with its code, never
    returning here. Signals are blocked across the fork, so a SIGTERM meant for the
    supervisor never reaches the child's copy of the supervisor's handler."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's path ends in os._exit
            _child(run, lease_fd)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
    return ForkedChild(pid)


def _child(run: Callable[[int | None], None], lease_fd: int | None) -> None:  # pragma: no cover
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
        run(lease_fd)
        code = 0
    except SystemExit as exc:  # as the interpreter would end on it
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    except BaseException:
        traceback.print_exc()
    finally:
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed or broken stream: exit anyway
                stream.flush()
        os._exit(code)  # never the supervisor's atexit handlers, nor its stack
