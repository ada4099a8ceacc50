"""Private servers the suite may restart or cut without touching the machine's own services.

``PrivateRedis``: a ``redis-server`` on its own loopback port with ``appendonly yes`` /
``appendfsync everysec`` and its own data directory. ``PrivatePostgres``: a throw-away cluster
(``initdb`` as the ``postgres`` OS user when run as root) on its own port and socket directory,
stopped with ``-m immediate`` (a crash: recovery replays the WAL) and started again.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["PrivatePostgres", "PrivateRedis", "free_port"]

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def free_port(start: int) -> int:
    """The first loopback port >= ``start`` nobody listens on."""
    for port in range(start, start + 200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port from {start}")


def _wait_port(port: int, up: bool, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.2)
            ok = s.connect_ex(("127.0.0.1", port)) == 0
        if ok == up:
            return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} did not come {'up' if up else 'down'} in {timeout}s")


class PrivateRedis:
    """A redis-server of our own (AOF everysec) that can be SIGKILLed and restarted."""

    def __init__(self, workdir: Path, port_from: int = 6390) -> None:
        self.dir = workdir / "redis-data"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port(port_from)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / f"redis-{self.port}.log"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--appendonly", "yes",
                "--appendfsync", "everysec",
                "--save", "",
                "--dir", str(self.dir),
                "--logfile", str(self.log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_port(self.port, True)
        # Loading the AOF: PING answers LOADING until done.
        import redis

        client = redis.Redis(port=self.port, socket_timeout=2)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.BusyLoadingError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.close()

    def kill(self) -> None:
        """SIGKILL: no shutdown save; only what the AOF already holds survives."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        _wait_port(self.port, False)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


class PrivatePostgres:
    """A PostgreSQL cluster of our own, in a temporary directory, on its own port."""

    def __init__(self, workdir: Path, port_from: int = 5440) -> None:
        import tempfile

        # Its own directory: the postgres OS user may not enter the (0700) work directory.
        self.root = Path(tempfile.mkdtemp(prefix="chaos-pg-"))
        self.workdir = workdir
        self.data = self.root / "data"
        self.port = free_port(port_from)
        self.log = self.root / "pg.log"
        self.started = False

    @staticmethod
    def available() -> str | None:
        """None if a private cluster can be made here, else why not."""
        if not (PG_BIN / "initdb").exists():
            return f"no {PG_BIN}/initdb"
        if os.geteuid() == 0:
            try:
                import pwd

                pwd.getpwnam("postgres")
            except KeyError:
                return "running as root and no 'postgres' OS user for initdb"
        return None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _as_owner(self, argv: list[str]) -> None:
        if os.geteuid() == 0:
            import shlex

            cmd = " ".join(shlex.quote(a) for a in argv)
            argv = ["su", "postgres", "-s", "/bin/sh", "-c", cmd]
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
        self._as_owner(
            [str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"]
        )

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200"
        self._as_owner(
            [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.log),
             "-w", "-t", "60", "start"]
        )  # fmt: skip
        self.started = True

    def crash(self) -> None:
        """Immediate stop: like a crash, the next start replays the WAL."""
        self._as_owner(
            [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"]
        )
        self.started = False

    def stop(self) -> None:
        if self.started:
            self._as_owner(
                [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"]
            )
            self.started = False
        if self.log.exists():
            self.workdir.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.log, self.workdir / "pg.log")
        shutil.rmtree(self.root, ignore_errors=True)
