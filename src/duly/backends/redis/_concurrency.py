"""Rate slots on Redis: ``reserve_rate.lua`` reserves each request's next start in its
``rl:<key>`` window, all in one call. (Gates are kept by the scripts that move jobs: claim.lua
parks, ``lua/_concurrency.lua`` frees and unparks.)"""

from __future__ import annotations

from collections.abc import Sequence

from duly._records import RateRequest
from duly.backends.redis._connection import RedisConnection
from duly.backends.redis._scripts import Value

__all__ = ["reserve_rate"]


async def reserve_rate(
    conn: RedisConnection, requests: Sequence[RateRequest], now: float
) -> list[float]:
    """See ``Backend.reserve_rate``."""
    if not requests:
        return []
    args: list[Value] = [conn.keys.prefix, float(now)]
    for r in requests:
        args += (r.key, float(r.interval), r.burst, float(r.not_before))
    # KEYS[1] only routes the call to the namespace's slot (on a cluster).
    route = (conn.keys.rate(requests[0].key),)
    with conn.guard("reserve_rate"):
        starts: list[bytes] = await conn.call(conn.scripts.reserve_rate, route, args)
    return [float(start) for start in starts]
