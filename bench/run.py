"""``make bench``: duly on SQLite, Redis and PostgreSQL plus every peer, one table.

    bench/.venv/bin/python bench/run.py [--runs 3] [--only duly,celery,...] [--profile]

Each target runs in its own subprocess (``run.py --one TARGET``) with a time limit, so a peer
that cannot be imported, crashes or hangs is recorded in the table instead of stopping the run.
Writes ``bench/results/latest.json`` (every run's raw numbers) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import harness  # noqa: E402
from bench.table import markdown_table  # noqa: E402

REDIS_DB = harness.BENCH_REDIS
DULY_TARGETS = {
    "duly/redis": f"{REDIS_DB}?namespace=bench",
    "duly/postgres": f"{harness.BENCH_PG}?namespace=duly_bench",
    "duly/sqlite": "sqlite:////tmp/duly-bench/bench.db",
}
PEERS = [
    "celery",
    "rq",
    "dramatiq",
    "arq",
    "saq",
    "taskiq",
    "huey",
    "streaq",
    "procrastinate",
    "pgqueuer",
]
TARGET_TIMEOUT = float(os.environ.get("BENCH_TARGET_TIMEOUT", "900"))


def _install_failures() -> dict[str, str]:
    path = Path(sys.executable).parent.parent / "install-failures.txt"
    out: dict[str, str] = {}
    if path.exists():
        current = None
        for line in path.read_text().splitlines():
            if line and not line.startswith(" ") and "ERROR" not in line and current is None:
                current = line.split("[")[0].strip()
                out[current] = ""
            elif current:
                out[current] += line.strip() + " "
    return out


async def _one(target: str, runs: int, profile: bool) -> dict[str, Any]:
    if target.startswith("duly/"):
        from bench.duly_bench import bench_url_async

        url = DULY_TARGETS[target]
        if url.startswith("sqlite:"):
            Path(url.split("sqlite:///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
        processes = [1]  # the default worker already runs one process per core
        return await bench_url_async(
            url, runs=runs, processes=processes, profile=profile and target == "duly/redis"
        )
    module = importlib.import_module(f"bench.peers.{target}_peer")
    peer = module.Peer()
    result = await harness.run_peer(peer, runs)
    result["summary"] = harness.summarize(result["runs"])
    result.update(
        name=peer.name,
        version=peer.version,
        store=peer.store,
        drain_modes=list(peer.drain_modes),
        has_bulk=peer.has_bulk,
        doc=(module.__doc__ or "").strip(),
    )
    if hasattr(peer, "mode_labels"):
        result["mode_labels"] = peer.mode_labels
    result["io_tuning"] = getattr(peer, "io_tuning", None)
    return result


def _end(proc: subprocess.Popen[str]) -> None:
    """Stop a target's child run if it still runs: SIGTERM first, so it stops its workers."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def run_target(target: str, runs: int, profile: bool) -> dict[str, Any]:
    out = harness.RESULTS / f"target-{target.replace('/', '-')}.json"
    out.unlink(missing_ok=True)
    argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--one",
        target,
        "--runs",
        str(runs),
        "--out",
        str(out),
    ] + (["--profile"] if profile else [])
    t = time.perf_counter()
    load_before = os.getloadavg()[0]
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=harness.child_env(), stdout=subprocess.PIPE, stderr=None, text=True
    )
    try:
        stdout, _ = proc.communicate(timeout=TARGET_TIMEOUT)
        fatal = None if proc.returncode == 0 else (stdout.strip().splitlines() or ["?"])[-1]
    except subprocess.TimeoutExpired:
        fatal = f"did not finish within {TARGET_TIMEOUT:g}s"
    finally:  # a timeout, Ctrl-C or SIGTERM: the child stops its workers (stop_workers_at_exit)
        _end(proc)
    if out.exists():
        res = json.loads(out.read_text())
        if fatal:
            res.setdefault("errors", {})["target"] = fatal
    else:
        res = {"name": target, "fatal": fatal or "no result"}
    res["seconds"] = round(time.perf_counter() - t, 1)
    res["loadavg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(f"{target}: {res['seconds']}s", file=sys.stderr, flush=True)
    return res


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "3")))
    parser.add_argument("--only", default="", help="comma list of targets (duly/redis, celery…)")
    parser.add_argument("--profile", action="store_true", help="py-spy duly's Redis worker")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    harness.stop_workers_at_exit()

    if args.one:
        try:
            res = asyncio.run(_one(args.one, args.runs, args.profile))
        except Exception as exc:
            print(f"{type(exc).__name__}: {exc}")
            return 1
        Path(args.out).write_text(json.dumps(res, indent=2, default=str))
        return 0

    harness.hold_bench_db()  # (a --one child runs under its parent's hold)
    targets = list(DULY_TARGETS) + PEERS
    if args.only:
        wanted = [t.strip() for t in args.only.split(",") if t.strip()]
        targets = [t for t in targets if t in wanted or t.split("/")[0] in wanted]
    harness.RESULTS.mkdir(parents=True, exist_ok=True)
    failures = _install_failures()
    started = time.time()
    results = []
    for target in targets:
        failed = next((v for k, v in failures.items() if k.split("[")[0] == target), None)
        if failed is not None:
            results.append({"name": target, "fatal": f"pip install failed: {failed[:200]}"})
            continue
        results.append(run_target(target, args.runs, args.profile))
    table = markdown_table(results)
    meta = {
        "command": " ".join([sys.executable, *sys.argv]),
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        "seconds": round(time.time() - started, 1),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "settings": {
            "runs": args.runs,
            "enqueue_n": harness.ENQUEUE_N,
            "drain_n": harness.DRAIN_N,
            "drain_cap_s": harness.DRAIN_CAP,
            "lat_samples": harness.LAT_SAMPLES,
            "lat_cap_s": harness.LAT_CAP,
            "io_n": harness.IO_N,
            "io_seconds": harness.IO_SECONDS,
        },
    }
    (harness.RESULTS / "latest.json").write_text(
        json.dumps({"meta": meta, "results": results, "table": table}, indent=2, default=str)
    )
    print(table)
    print(
        f"\n{len(targets)} targets, {args.runs} runs each, {meta['seconds']:.0f}s; "
        f"raw numbers in bench/results/latest.json",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
