"""The supervisor's forked children (``duly._worker.forking``): a fork runs the worker function
and exits with its code like a spawned child; a fork is only made from a one-thread process;
a forked child draws job ids of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from duly._ids import new_id
from duly._worker.forking import fork_child
from duly._worker.supervisor import Supervisor

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="forked children are Linux-only")


def _exits(code: object) -> None:
    raise SystemExit(code)


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        (lambda fd: None, 0),
        (lambda fd: _exits(3), 3),
        (lambda fd: _exits("duly: a message"), 1),
        (lambda fd: _exits(None), 0),
        (lambda fd: 1 / 0, 1),
        (lambda fd: os.kill(os.getpid(), signal.SIGKILL), -signal.SIGKILL),
    ],
    ids=["returns", "exit-3", "exit-message", "exit-none", "raises", "killed"],
)
def test_a_forked_child_exits_with_the_code_a_spawned_one_would(run, expected) -> None:  # type: ignore[no-untyped-def]
    child = fork_child(run, None)
    assert child.pid != os.getpid()
    assert child.wait(20) == expected
    assert child.poll() == expected and child.returncode == expected


def test_the_child_gets_its_lease_pipe_and_the_parent_can_stop_it() -> None:
    read, write = os.pipe()

    def run(fd: int | None) -> None:
        assert fd is not None
        os.write(fd, b"here")
        time.sleep(60)

    child = fork_child(run, write)
    os.close(write)
    try:
        assert os.read(read, 4) == b"here"
        assert child.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(0.1)
        child.send_signal(signal.SIGTERM)  # the default action: the supervisor's handler is gone
        assert child.wait(20) == -signal.SIGTERM
        assert os.read(read, 1) == b""  # its end of the pipe closed with it
    finally:
        os.close(read)
        child.kill()  # (reaped already: a no-op)


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "polled"])
def test_a_timed_wait_times_out_while_the_child_runs_and_reaps_it_at_its_exit(
    pidfd: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not pidfd:  # a kernel without pidfd_open (before 5.3): the wait polls
        monkeypatch.setattr(os, "pidfd_open", _no_pidfd)
    read, write = os.pipe()

    def run(fd: int | None) -> None:
        os.read(read, 1)  # runs until the parent writes
        raise SystemExit(7)

    child = fork_child(run, None)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(0.05)
        assert child.poll() is None
        os.write(write, b"x")
        assert child.wait(20) == 7
    finally:
        os.close(read)
        os.close(write)
        if child.returncode is None:
            child.kill()
            child.wait(20)


def _no_pidfd(pid: int, flags: int = 0) -> int:
    raise OSError(38, "Function not implemented")


def test_a_forked_child_draws_ids_of_its_own() -> None:
    new_id()  # the parent holds a block of random characters now
    read, write = os.pipe()
    child = fork_child(lambda fd: os.write(write, new_id().encode()) and None, None)
    os.close(write)
    theirs = os.read(read, 26).decode()
    os.close(read)
    assert child.wait(20) == 0
    mine = new_id()
    assert len(theirs) == 26 and theirs[10:] != mine[10:]  # not the same 80 random bits


@pytest.mark.parametrize(("thread", "expected"), [(False, "True"), (True, "False")])
def test_a_fork_is_only_made_from_a_process_with_one_thread(thread: bool, expected: str) -> None:
    code = "import threading\nfrom duly._worker.forking import can_fork\n"
    if thread:
        code += "threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
    code += "print(can_fork())\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == expected, done.stderr


def test_a_burst_supervisor_forks_its_first_children_and_reports_the_worst_code(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    script = (
        "import os, sys\n"
        "from duly._worker.supervisor import Supervisor\n"
        "def run(fd):\n"
        f"    with open({str(runs)!r}, 'a') as f: f.write(f'forked {{os.getpid()}} {{fd}}\\n')\n"
        f"    try: os.open({str(tmp_path / 'first')!r}, os.O_CREAT | os.O_EXCL)\n"
        "    except FileExistsError: sys.exit(3)\n"
        "s = Supervisor([], 2, grace=1, burst=True, fork=run)\n"
        "s.child_argv = [sys.executable, '-c', 'raise SystemExit(9)']  # never spawned\n"
        "print(os.getpid(), s.run())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    parent, code = done.stdout.split()
    assert code == "3", done.stderr
    lines = runs.read_text().splitlines()
    assert len(lines) == 2 and all(line.startswith("forked ") for line in lines)
    assert parent not in {line.split()[1] for line in lines}
    assert {line.split()[2] for line in lines} == {"None"}  # no lease keeper: no pipe


def test_a_supervisor_with_another_thread_spawns_instead(tmp_path: Path) -> None:
    supervisor = Supervisor([], 1, grace=1, burst=True, fork=lambda fd: os._exit(7))
    supervisor.child_argv = [sys.executable, "-c", "raise SystemExit(5)"]
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert supervisor.run() == 5  # the spawned child's code, not the fork's 7
    finally:
        stop.set()
        thread.join()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


def test_a_child_started_after_the_stop_signal_is_told_to_stop() -> None:
    supervisor = Supervisor([], 1, grace=1)
    supervisor._stopping = True  # the SIGTERM came while this child was being made
    child = fork_child(lambda fd: time.sleep(60) or None, None)
    try:
        supervisor._started(0, child)
        assert child.wait(20) == -signal.SIGTERM
    finally:
        child.kill()
