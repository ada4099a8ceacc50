"""Time to first render of the dashboard's pages with 1,000,000 jobs stored (issue 16).

    python -m bench.dashboard_render [--jobs 1000000] [--loads 5] [--backends redis,postgres]

For each backend, in a namespace of its own (Redis: DB 6 of ``BENCH_REDIS_URL`` or
``redis://127.0.0.1:6379/6``, key prefix ``benchdash<hex>``; PostgreSQL: schema
``benchdash_<hex>`` of ``BENCH_PG_URL`` or ``postgresql://postgres@127.0.0.1:5432/test``),
dropped at the end:

1. ``--jobs`` jobs are stored with ``app.enqueue_many`` in chunks of 10,000 (the bulk path;
   every job has a key ``user:<n>``, 20 jobs per key, so ``/key/user:7`` has 20);
2. ``app.asgi()`` is served by uvicorn on a loopback port and headless Chromium (the system
   browser, as the browser tests use it) logs in once;
3. each page is loaded ``--loads`` times after one warm-up load: ``/jobs`` (the newest 50),
   ``/jobs?before=<cursor>`` (the 50 jobs before the middle one: a page deep in the list), and
   ``/key/user:7``; then the overview ``/`` (its chart drawn) and ``/queues`` (the table),
   whose queue counts read the million jobs. The time is the page's own:
   ``performance.now()`` (milliseconds since the navigation started) when the page's table or
   chart is in the DOM — the HTML, the scripts, the session call and the API's calls included.
   Medians are printed, with min and max.

Results also go to ``bench/results/dashboard_render.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "dashboard"))

from served import CHROMIUM_ARGS, chromium_path, serve  # noqa: E402

import duly  # noqa: E402
from duly._http.api import encode_cursor  # noqa: E402

TOKEN = "bench-admin-token-" + "x" * 20
CHUNK = 10_000
PER_KEY = 20


def url_of(kind: str) -> tuple[str, str]:
    if kind == "redis":
        url = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/6")
        return url, f"benchdash{uuid4().hex[:8]}"
    url = os.environ.get("BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
    return url, f"benchdash_{uuid4().hex[:8]}"


def in_thread(coro: Any) -> Any:
    """Run ``coro`` on a loop of its own thread (Playwright's sync API owns the main one)."""
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(asyncio.run(coro)))
    thread.start()
    thread.join()
    return box[0] if box else None


def fill(app: duly.App, jobs: int) -> tuple[float, str]:
    """Store ``jobs`` jobs; the seconds it took and the id of the middle job."""
    work = app.tasks["bench.work"]
    keys = max(1, jobs // PER_KEY)
    middle = ""
    started = time.perf_counter()
    for start in range(0, jobs, CHUNK):
        sigs = [
            work.options(key=f"user:{i % keys}").s(i)
            for i in range(start, min(jobs, start + CHUNK))
        ]
        stored = app.enqueue_many(sigs)
        if start <= jobs // 2 < start + CHUNK:
            middle = stored[jobs // 2 - start].id
        if start // CHUNK % 10 == 0:
            print(f"  {start + len(sigs):>9,} jobs stored", file=sys.stderr)
    return time.perf_counter() - started, middle


def render_times(page: Any, url: str, selector: str, loads: int) -> list[float]:
    """Milliseconds from navigation start to ``selector`` in the DOM, per load."""
    times = []
    for n in range(loads + 1):
        page.goto(url, wait_until="commit")
        page.wait_for_selector(selector, state="attached", timeout=60_000)
        ms = float(page.evaluate("performance.now()"))
        if n:  # the first load warms the server's and the browser's caches
            times.append(ms)
    return times


def bench(kind: str, jobs: int, loads: int) -> dict[str, Any]:
    url, namespace = url_of(kind)
    app = duly.App(url, namespace=namespace)

    @app.task(name="bench.work")
    def work(n: int) -> None:
        return None

    result: dict[str, Any] = {"backend": kind, "jobs": jobs}
    try:
        seconds, middle = fill(app, jobs)
        result["fill_seconds"] = round(seconds, 1)
        print(f"{kind}: {jobs:,} jobs stored in {seconds:.0f} s", file=sys.stderr)
        from playwright.sync_api import sync_playwright

        pages = {
            "/jobs": ("/jobs", "#job-list table"),
            "/jobs?before=": (f"/jobs?before={encode_cursor(middle)}", "#job-list table"),
            "/key/user:7": ("/key/user:7", "#key-jobs table"),
            "/": ("/", "#chart-outcomes svg"),
            "/queues": ("/queues", "table.grid"),
        }
        with serve(app.asgi(admin_tokens=[TOKEN])) as base, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"{base}/login?token={TOKEN}")
            for name, (path, selector) in pages.items():
                times = render_times(page, base + path, selector, loads)
                result[name] = {
                    "median_ms": round(statistics.median(times)),
                    "min_ms": round(min(times)),
                    "max_ms": round(max(times)),
                }
                rows = page.locator(f"{selector.split()[0]} tbody tr").count()
                print(f"  {name:<16} {result[name]}  ({rows} rows)", file=sys.stderr)
            browser.close()
    finally:

        async def drop() -> None:
            await (await app.backend()).drop()
            await app.aclose()

        app.close()
        in_thread(drop())
        app.close()
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--backends", default="redis,postgres")
    args = parser.parse_args(argv)
    if chromium_path() is None:
        sys.exit("no Chromium: apt-get install chromium")
    results = [bench(kind, args.jobs, args.loads) for kind in args.backends.split(",")]
    print(f"\nTime to first render, median of {args.loads} loads, {args.jobs:,} jobs stored\n")
    kinds = [r["backend"] for r in results]
    print("| page | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for name in ("/jobs", "/jobs?before=", "/key/user:7", "/", "/queues"):
        cells = [f"{r[name]['median_ms']} ms" for r in results]
        print(f"| `{name}` | " + " | ".join(cells) + " |")
    out = ROOT / "bench" / "results" / "dashboard_render.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
