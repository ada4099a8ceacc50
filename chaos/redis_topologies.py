"""Private Redis topologies on loopback ports, for the tests and the chaos scenarios.

``LocalCluster``: a Redis Cluster of ``masters`` primaries (and ``replicas`` replicas per
primary) made of plain ``redis-server --cluster-enabled yes`` processes and joined by
``redis-cli --cluster create``. ``LocalSentinel``: one primary, one replica and three
``redis-server --sentinel`` processes watching it. Both live in a work directory of their
own, pick free ports (a cluster node also needs its port + 10000 free, for the cluster bus),
can kill one process (SIGKILL, a crash) and stop everything. Nothing here talks to the
machine's own Redis.
"""

from __future__ import annotations

import contextlib
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["LocalCluster", "LocalSentinel"]

_STARTUP_TIMEOUT = 30.0


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ephemeral_low() -> int:
    """The first port the kernel hands out to outgoing connections (Linux; 32768 elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _free_ports(count: int, bus: bool) -> list[int]:
    """``count`` consecutive free loopback ports (and their ``+ 10000`` twins when ``bus``),
    from a random start so parallel test processes rarely race for the same ones.

    Every port lies below the kernel's ephemeral range: a port in it that is free when checked
    can be taken by any outgoing connection (the test suite opens thousands) before the server
    binds it, and the server then exits at once ("Address already in use")."""
    ceiling = _ephemeral_low() - (10000 if bus else 0)
    for _ in range(200):
        start = random.randrange(10000, ceiling - count)
        ports = list(range(start, start + count))
        if all(_port_free(p) and (not bus or _port_free(p + 10000)) for p in ports):
            return ports
    raise RuntimeError("no free loopback ports for a private Redis topology")


def _cli(port: int, *args: str, timeout: float = 10.0) -> str:
    done = subprocess.run(
        ["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.stdout.strip()


def _wait(condition: object, what: str, timeout: float = _STARTUP_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():  # type: ignore[operator]
                return
        except (subprocess.TimeoutExpired, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _fields(info: str) -> dict[str, str]:
    return dict(line.split(":", 1) for line in info.splitlines() if ":" in line)


def _field(info: str, name: str) -> str:
    return _fields(info)[name].strip()


def _wait_replicated(primary: int, replicas: int, timeout: float = _STARTUP_TIMEOUT) -> None:
    """Wait until ``replicas`` replicas of ``primary`` have every write it had just now."""
    offset = int(_field(_cli(primary, "INFO", "replication"), "master_repl_offset"))

    def caught_up() -> bool:
        info = _cli(primary, "INFO", "replication")
        found = [v for k, v in _fields(info).items() if re.fullmatch(r"slave\d+", k)]
        return len(found) >= replicas and all(
            int(dict(kv.split("=") for kv in r.split(","))["offset"]) >= offset for r in found
        )

    _wait(caught_up, f"the replicas of {primary} to catch up", timeout)


class _ServerExited(Exception):
    """The server process ended while we waited for it to answer."""


class _Processes:
    """The redis-server processes of one topology, by port."""

    def __init__(self, prefix: str) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=prefix))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.argv: dict[int, list[str]] = {}

    def start(self, port: int, *args: str, config: str | None = None) -> None:
        workdir = self.root / str(port)
        workdir.mkdir(exist_ok=True)
        head = ["redis-server"]
        if config is not None:  # sentinel needs a writable config file of its own
            conf = workdir / "node.conf"
            conf.write_text(config)
            head.append(str(conf))
        argv = [
            *head,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--dir", str(workdir),
            "--logfile", str(workdir / "log"),
            "--save", "",
            *args,
        ]  # fmt: skip
        self.argv[port] = argv
        self._launch(port)

    def restart(self, port: int) -> None:
        """Start a killed process again with its own arguments (and its data directory)."""
        self._launch(port)

    def _launch(self, port: int) -> None:
        """Start the process of ``port`` and wait until it answers; if it exits first, or never
        answers, the error carries its exit code, stderr and the end of its log file."""
        # stderr to a file, never a pipe nobody reads (a full pipe would block the server)
        with open(self.root / str(port) / "stderr", "ab") as stderr:
            proc = subprocess.Popen(self.argv[port], stdout=subprocess.DEVNULL, stderr=stderr)
        self.procs[port] = proc

        def answering() -> bool:
            if proc.poll() is not None:
                raise _ServerExited
            return _cli(port, "PING") == "PONG"

        try:
            _wait(answering, f"redis-server on port {port}")
        except (_ServerExited, RuntimeError) as exc:
            raise RuntimeError(self._why_not_up(port, proc)) from exc

    def _why_not_up(self, port: int, proc: subprocess.Popen[bytes]) -> str:
        if proc.poll() is None:
            state = f"still running but not answering PING after {_STARTUP_TIMEOUT:.0f} s"
        else:
            state = f"exited with code {proc.returncode}"
        errors = self.root / str(port) / "stderr"
        stderr = errors.read_bytes() if errors.exists() else b""
        log = self.root / str(port) / "log"
        tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
        lines = [f"redis-server on port {port} {state}", f"argv: {' '.join(self.argv[port])}"]
        if stderr.strip():
            lines.append("stderr: " + stderr.decode(errors="replace").strip())
        lines.extend(["log (last lines):", *tail] if tail else ["log: (empty)"])
        return "\n".join(lines)

    def kill(self, port: int) -> None:
        proc = self.procs[port]
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


class LocalCluster:
    """A Redis Cluster on loopback: ``masters`` primaries, ``replicas`` replicas each."""

    def __init__(self, masters: int = 3, replicas: int = 0, node_timeout_ms: int = 1000) -> None:
        self.masters = masters
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        self.ports = _free_ports(masters * (1 + replicas), bus=True)
        self._procs = _Processes("duly-cluster-")

    @property
    def url(self) -> str:
        """The ``redis+cluster://`` URL of every node (duly needs only one that answers)."""
        nodes = ",".join(f"127.0.0.1:{port}" for port in self.ports)
        return f"redis+cluster://{nodes}"

    def start(self) -> LocalCluster:
        try:
            for port in self.ports:
                self._procs.start(
                    port,
                    "--cluster-enabled", "yes",
                    "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", str(self.node_timeout_ms),
                    "--appendonly", "no",
                )  # fmt: skip
            nodes = [f"127.0.0.1:{port}" for port in self.ports]
            subprocess.run(
                ["redis-cli", "--cluster", "create", *nodes,
                 "--cluster-replicas", str(self.replicas), "--cluster-yes"],
                check=True, capture_output=True, timeout=60,
            )  # fmt: skip
            _wait(self._healthy, "the cluster to become healthy")
        except BaseException:
            self.stop()
            raise
        return self

    def _healthy(self) -> bool:
        for port in self.ports:
            if "cluster_state:ok" not in _cli(port, "CLUSTER", "INFO"):
                return False
        if self.replicas:  # every replica has synced with its primary
            for port in self.ports:
                info = _cli(port, "INFO", "replication")
                if "role:slave" in info and "master_link_status:up" not in info:
                    return False
        return True

    def primary_of(self, key: str) -> int:
        """The port of the primary that serves ``key``'s slot now."""
        slot = int(_cli(self.alive_port(), "CLUSTER", "KEYSLOT", key))
        for line in _cli(self.alive_port(), "CLUSTER", "NODES").splitlines():
            fields = line.split()
            if "master" not in fields[2] or "fail" in fields[2]:
                continue
            for ranges in fields[8:]:
                low, _, high = ranges.partition("-")
                if low.isdigit() and int(low) <= slot <= int(high or low):
                    return int(fields[1].split(":")[1].split("@")[0])
        raise RuntimeError(f"no primary serves slot {slot}")

    def wait_replicated(self, primary: int, timeout: float = _STARTUP_TIMEOUT) -> None:
        """Wait until every replica of ``primary`` has every write ``primary`` had just now."""
        _wait_replicated(primary, self.replicas, timeout)

    def alive_port(self) -> int:
        for port, proc in self._procs.procs.items():
            if proc.poll() is None:
                return port
        raise RuntimeError("every cluster node is down")

    def kill(self, port: int) -> None:
        """SIGKILL one node (its replica, if any, is promoted after the node timeout)."""
        self._procs.kill(port)

    def restart(self, port: int) -> None:
        """Start a killed node again (it rejoins; a replaced primary as a replica)."""
        self._procs.restart(port)

    def wait_healthy(self, timeout: float = _STARTUP_TIMEOUT) -> None:
        """Wait until every node still alive says the cluster is ok."""

        def ok() -> bool:
            return all(
                "cluster_state:ok" in _cli(port, "CLUSTER", "INFO")
                for port, proc in self._procs.procs.items()
                if proc.poll() is None
            )

        _wait(ok, "the cluster to be healthy again", timeout)

    def migrate_slot(self, slot: int, to_port: int) -> None:
        """Move ``slot`` with its keys to the node on ``to_port`` (MOVED/ASK for clients)."""
        source = None
        for port in self.ports:
            if self._serves(port, slot):
                source = port
        if source is None or source == to_port:
            return
        src_id = _cli(source, "CLUSTER", "MYID")
        dst_id = _cli(to_port, "CLUSTER", "MYID")
        _cli(to_port, "CLUSTER", "SETSLOT", str(slot), "IMPORTING", src_id)
        _cli(source, "CLUSTER", "SETSLOT", str(slot), "MIGRATING", dst_id)
        while True:
            keys = _cli(source, "CLUSTER", "GETKEYSINSLOT", str(slot), "100").split()
            if not keys:
                break
            _cli(source, "MIGRATE", "127.0.0.1", str(to_port), "", "0", "5000", "KEYS", *keys)
        for port in self.ports:
            with contextlib.suppress(subprocess.TimeoutExpired):
                _cli(port, "CLUSTER", "SETSLOT", str(slot), "NODE", dst_id)

    def _serves(self, port: int, slot: int) -> bool:
        for line in _cli(port, "CLUSTER", "NODES").splitlines():
            fields = line.split()
            if "myself" in fields[2] and "master" in fields[2]:
                for ranges in fields[8:]:
                    low, _, high = ranges.partition("-")
                    if low.isdigit() and int(low) <= slot <= int(high or low):
                        return True
        return False

    def stop(self) -> None:
        self._procs.stop()


class LocalSentinel:
    """One primary, one replica and three sentinels watching them as ``name``."""

    def __init__(self, name: str = "duly", down_after_ms: int = 1000) -> None:
        self.name = name
        self.down_after_ms = down_after_ms
        self.primary, self.replica, *self.sentinels = _free_ports(5, bus=False)
        self._procs = _Processes("duly-sentinel-")

    def url(self, db: int = 0) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.name}/{db}"

    def start(self) -> LocalSentinel:
        try:
            self._procs.start(self.primary, "--appendonly", "no")
            self._procs.start(
                self.replica, "--appendonly", "no", "--replicaof", "127.0.0.1", str(self.primary)
            )
            _wait(
                lambda: "master_link_status:up" in _cli(self.replica, "INFO", "replication"),
                "the replica to sync",
            )
            config = (
                f"sentinel monitor {self.name} 127.0.0.1 {self.primary} 2\n"
                f"sentinel down-after-milliseconds {self.name} {self.down_after_ms}\n"
                f"sentinel failover-timeout {self.name} 5000\n"
                f"sentinel parallel-syncs {self.name} 1\n"
            )
            for port in self.sentinels:
                self._procs.start(port, "--sentinel", config=config)
            _wait(self._watching, "the sentinels to see each other and the replica")
        except BaseException:
            self.stop()
            raise
        return self

    def _watching(self) -> bool:
        for port in self.sentinels:
            info = _cli(port, "SENTINEL", "MASTER", self.name).split("\n")
            fields = dict(zip(info[::2], info[1::2], strict=False))
            if fields.get("num-other-sentinels") != "2" or fields.get("num-slaves") != "1":
                return False
        return True

    def current_primary(self) -> int:
        """The port the sentinels name as the primary now."""
        reply = _cli(self.sentinels[0], "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name)
        return int(reply.split()[1])

    def wait_replicated(self, timeout: float = _STARTUP_TIMEOUT) -> None:
        """Wait until the replica has every write the current primary had just now."""
        _wait_replicated(self.current_primary(), 1, timeout)

    def kill(self, port: int) -> None:
        self._procs.kill(port)

    def restart(self, port: int) -> None:
        self._procs.restart(port)

    def stop(self) -> None:
        self._procs.stop()
