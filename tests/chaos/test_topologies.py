"""The private Redis topologies' start-up: ports out of the kernel's way, and a server that
does not come up says why (issue 28.11: a fixture timed out under load with no reason given)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from services import require_service

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from chaos.redis_topologies import _ephemeral_low, _free_ports, _Processes  # noqa: E402


@pytest.mark.parametrize("bus", [False, True])
def test_ports_lie_below_the_ephemeral_range(bus: bool) -> None:
    """A port the kernel may hand to any outgoing connection can be lost between the check and
    the server's bind; a cluster node's bus port (+10000) must stay out of that range too."""
    low = _ephemeral_low()
    for _ in range(50):
        ports = _free_ports(6, bus=bus)
        assert max(ports) + (10000 if bus else 0) < low


def test_a_server_that_cannot_bind_says_why() -> None:
    require_service("redis-sentinel")  # redis-server and redis-cli on PATH
    port = _free_ports(1, bus=False)[0]
    procs = _Processes("duly-topology-test-")
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))  # bound, not listening: PING is refused at once
        try:
            with pytest.raises(RuntimeError) as failure:
                procs.start(port)
        finally:
            procs.stop()
    message = str(failure.value)
    assert f"redis-server on port {port} exited with code 1" in message
    assert "Address already in use" in message
