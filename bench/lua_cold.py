"""What one enqueue with a hand-off costs an idle Redis, and how much of it is the calls.

    python -m bench.lua_cold [--calls 300] [--rounds 3] [--url redis://127.0.0.1:6379/9]

The idle-latency sample (``bench/harness.py``'s ``measure_latency``) meets a server that slept
10 ms: every command then runs on a cold CPU, several times slower than back to back. Each
call here registers an idle worker (as a worker's empty claim does), sleeps 10 ms, and runs
one plain job's enqueue, whose script hands it to that worker; the figure is the server's own
time for the script (``INFO commandstats``), over ``--calls`` calls. Two scripts take turns:
``enqueue.lua`` as shipped, and a hand-written script making the same 15 ``redis.call``s in
the same order with nothing around them (no helpers, no tables, no branches for other kinds of
job). Their difference is what the Lua around the calls costs; the rest is the calls. Run on a
scratch DB of its own (flushed at the end), with no other script calls on the server meanwhile
(they would count in the figure).
"""

from __future__ import annotations

import argparse
import statistics
import time

import redis

from duly.backends.redis._scripts import compiled

PREFIX = "{luacold}:"

#: enqueue.lua's calls for one plain job handed to an idle worker, and only those.
BARE = """
local P = ARGV[1]
local id = ARGV[13]
local jk = P .. 'j:' .. id
if redis.call('EXISTS', jk) == 1 then return {1, id} end
local q = ARGV[6]
local worker, lease, ttl
if redis.call('ZCARD', P .. 'q:' .. q) == 0 and redis.call('HEXISTS', P .. 'paused', q) == 0 then
  local top = redis.call('ZPOPMAX', P .. 'iw:' .. q)
  if #top > 0 then
    local e = redis.call('GETDEL', P .. 'iv:' .. top[1])
    if e then worker = top[1]; lease, ttl = string.match(e, '(%S+) (%S+)') end
  end
end
redis.call('HSET', jk, 't', ARGV[5], 'q', q, 'p', ARGV[14], 's', 'running', 'e', ARGV[10],
  'a', 1, 'b', ARGV[10], 'w', worker, 'l', lease)
redis.call('ZADD', KEYS[6], lease, id)
redis.call('RPUSH', P .. 'ib:' .. worker, id .. ':' .. ARGV[14])
redis.call('PEXPIRE', P .. 'ib:' .. worker, ttl)
local t = redis.call('TIME')
local n = redis.call('INCRBY', P .. 'ev:n', 2)
redis.call('XADD', P .. 'ev', '0-' .. n, 'n', 2, 'a', t[1],
  'e', cmsgpack.pack({id, 2, ARGV[5], q, '', id, 3, ARGV[5], q, ''}))
redis.call('ZADD', KEYS[2], 0, id)
redis.call('SADD', KEYS[3], q)
redis.call('HINCRBY', KEYS[4], q .. '\\31r', 1)
return {}
"""

KEYS = [PREFIX + k for k in ("due", "all", "queues", "qc", "u", "run")]


def _evalsha_usec(r: redis.Redis) -> int:
    """The server's total µs in EVALSHA so far (read, never reset: other clients keep theirs)."""
    stats = r.info("commandstats").get("cmdstat_evalsha")
    return int(stats["usec"]) if stats else 0


def cold_us(r: redis.Redis, sha: str, calls: int, first: int) -> float:
    """Mean server µs of ``calls`` hand-off enqueues, each 10 ms after the last command."""
    total = 0
    for i in range(first, first + calls):
        r.set(PREFIX + "iv:w1", "1796414640.5 30000 default", px=30000)
        r.zadd(PREFIX + "iw:default", {"w1": 1})
        r.delete(PREFIX + "ib:w1")
        before = _evalsha_usec(r)
        time.sleep(0.01)
        args = [PREFIX, PREFIX + "wake", "", 1, "bench.stamp", "default", "4", "", "0"]
        args += ["1796414610.5", "1796414610.5", "", f"ID{i:024d}", '{"args":[]}']
        r.evalsha(sha, len(KEYS), *KEYS, *args)
        total += _evalsha_usec(r) - before
    return total / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", default="redis://127.0.0.1:6379/9")
    args = parser.parse_args()
    r = redis.Redis.from_url(args.url)
    shipped = r.script_load(compiled("enqueue")[0])
    bare = r.script_load(BARE)
    results: dict[str, list[float]] = {"enqueue.lua": [], "bare calls": []}
    try:
        for round_ in range(args.rounds):
            first = round_ * 2 * args.calls
            results["enqueue.lua"].append(cold_us(r, shipped, args.calls, first))
            results["bare calls"].append(cold_us(r, bare, args.calls, first + args.calls))
            print(
                f"round {round_ + 1}: enqueue.lua {results['enqueue.lua'][-1]:.1f} µs, "
                f"bare calls {results['bare calls'][-1]:.1f} µs",
                flush=True,
            )
    finally:
        r.flushdb()
    shipped_us, bare_us = (statistics.median(v) for v in results.values())
    print(
        f"median: enqueue.lua {shipped_us:.1f} µs, the same calls bare {bare_us:.1f} µs "
        f"({bare_us / shipped_us:.2f} of it)"
    )


if __name__ == "__main__":
    main()
