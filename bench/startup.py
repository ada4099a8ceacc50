"""A worker's start-up: seconds from spawning ``duly worker`` to its first job's first line.

    python bench/startup.py [URL] [--rounds N] [--mode default|one]

One job (``bench.stamp``: appends ``time.time()`` to the bench Redis list) is enqueued before
the worker process is spawned, so the time covers the interpreter, the imports (duly, the app
module, the backend client), the connection set-up and the first claim. ``default`` is
``duly worker`` as shipped (a supervisor and one child per CPU core), ``one`` is
``--processes 1``. Prints the min / median / max over the rounds, and ``import duly`` alone
(``python -X importtime``, the cumulative figure of its last line) as the part that is imports.
duly's sources are compiled to bytecode first, as ``pip install`` does: an editable install
under ``PYTHONDONTWRITEBYTECODE`` would otherwise compile them in every round.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.duly_bench import DulyPeer


async def first_job_seconds(peer: DulyPeer, mode: str) -> float:
    """One round: the stamp job queued, then the worker spawned; seconds to the stamp."""
    await peer.reset()
    peer.enqueue_stamp()
    pop = getattr(peer, "pop_stamp", None) or (lambda: harness.counter().lpop(harness.LAT_KEY))
    spawned = time.time()
    worker = harness.WorkerProcess(peer.worker_cmd(mode), f"startup-{mode}", peer.env)
    try:
        while (stamp := pop()) is None:
            if not worker.alive():
                raise RuntimeError(f"worker exited: {worker.tail()}")
            if time.time() - spawned > harness.BOOT_CAP:
                raise RuntimeError(f"no first job in {harness.BOOT_CAP:g}s: {worker.tail()}")
            await asyncio.sleep(0.002)
    finally:
        worker.stop(grace=2.0)
    return float(stamp) - spawned


def import_seconds() -> float:
    """``import duly`` in a fresh interpreter, as ``-X importtime`` counts it."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import duly"],
        capture_output=True,
        text=True,
        check=True,
    )
    last = [line for line in done.stderr.splitlines() if re.search(r"\|\s*duly$", line)][-1]
    return int(last.split("|")[1]) / 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", default="redis://127.0.0.1:6379/5?namespace=startup")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--mode", default="default", choices=["default", "one"])
    args = parser.parse_args(argv)
    import duly

    compileall.compile_dir(Path(duly.__file__).parent, quiet=1)
    peer = DulyPeer(args.url)
    try:
        rounds = [asyncio.run(first_job_seconds(peer, args.mode)) for _ in range(args.rounds)]
    finally:
        peer.close()
    imports = sorted(import_seconds() for _ in range(args.rounds))
    print(
        f"first job after spawn [{args.mode}, {peer.store}]: min {min(rounds):.3f} s, "
        f"median {statistics.median(rounds):.3f} s, max {max(rounds):.3f} s "
        f"({args.rounds} rounds); import duly: median {statistics.median(imports):.3f} s"
    )


if __name__ == "__main__":
    main()
