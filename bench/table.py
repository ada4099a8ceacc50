"""One markdown table from harness results (medians with min-max spread)."""

from __future__ import annotations

import os
from typing import Any

IO_N = int(os.environ.get("BENCH_IO_N", "5000"))  # = bench.harness.IO_N (no Redis import here)

COLUMNS = [
    ("enqueue", "enqueue jobs/s", 0),
    ("bulk", "bulk enqueue jobs/s", 0),
    ("drain_default", "drain jobs/s (default worker)", 0),
    ("drain_one", "drain jobs/s (1 process)", 0),
    ("drain_default_cpu_us", "worker CPU µs/job (default drain)", 0),
    ("lat_p50", "idle enq→start p50 ms", 2),
    ("lat_p99", "idle enq→start p99 ms", 2),
    ("bytes", "bytes/queued job", 0),
]


def _fmt(v: float, digits: int) -> str:
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def cell(summary: dict[str, Any], key: str, digits: int) -> str:
    s = summary.get(key)
    if not s:
        return ""
    text = _fmt(s["median"], digits)
    if s["n"] > 1 and s["min"] != s["max"]:
        text += f" ({_fmt(s['min'], digits)}-{_fmt(s['max'], digits)})"
    if summary.get(f"{key}_capped"):
        text += " †"
    if summary.get(f"{key}_short"):
        text += " ‡"
    return text


def row_cells(res: dict[str, Any]) -> list[str]:
    summary = res.get("summary", {})
    errors = res.get("errors", {})
    cells = []
    for key, _title, digits in COLUMNS:
        text = cell(summary, key, digits)
        if (
            key == "drain_one"
            and not text
            and "one" not in res.get("drain_modes", ["one"])
            and "drain_default" in summary
        ):
            text = "= default"
        if key == "bulk" and not text and not res.get("has_bulk", True):
            text = "no bulk API"
        if key == "bytes" and not text and res.get("store") != "redis":
            text = "n/a"
        err_key = {
            "enqueue": "enqueue",
            "bulk": "drain_default",
            "drain_default": "drain_default",
            "drain_one": "drain_one",
            "drain_default_cpu_us": "drain_default",
            "lat_p50": "latency",
            "lat_p99": "latency",
            "bytes": "enqueue",
        }[key]
        if not text and err_key in errors:
            text = "error¹"
        cells.append(text or "—")
    return cells


def markdown_table(results: list[dict[str, Any]]) -> str:
    head = ["library / backend"] + [c[1] for c in COLUMNS] + ["load 1m"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = []
    for res in results:
        name = res["name"]
        if res.get("version"):
            name += f" {res['version']}"
        labels = res.get("mode_labels")
        if labels:
            name += f" (default = {labels['default']}, 1 process = {labels['one']})"
        if res.get("fatal"):
            lines.append("| " + " | ".join([name] + ["not run¹"] * len(COLUMNS) + [""]) + " |")
            notes.append(f"- {res['name']}: {res['fatal']}")
            continue
        load = res.get("loadavg_1m")
        load_text = f"{load[0]:.1f}→{load[1]:.1f}" if load else ""
        lines.append("| " + " | ".join([name, *row_cells(res), load_text]) + " |")
        extra = res.get("summary", {})
        for mode in res.get("drain_modes", []):
            if mode not in ("default", "one") and f"drain_{mode}" in extra:
                lines.append(
                    f"| {res['name']} `--processes {mode[1:]}` | | | "
                    f"{cell(extra, f'drain_{mode}', 0)} | | | | | | |"
                )
        for step, err in res.get("errors", {}).items():
            notes.append(f"- {res['name']} {step}: {err}")
    out = "\n".join(lines)
    out += (
        "\n\nCells: median of the runs (min-max). † = the drain hit its time cap; the rate is "
        "of the jobs done by then. ‡ = fewer than 20,000 jobs drained: without a bulk API the "
        "queue was filled one call per job for at most 15 s. load 1m = the machine's 1-minute load "
        "average before→after the target (2 cores; other work on the machine inflates it)."
    )
    io = io_table(results)
    if io:
        out += "\n\n" + io
    if notes:
        out += "\n\n¹ errors / not run:\n" + "\n".join(notes)
    return out


IO_COLUMNS = [
    ("sleep_default", "20 ms jobs/s (default worker)"),
    ("sleep_tuned", "20 ms jobs/s (tuned)"),
    ("pg_default", "1-query jobs/s (default worker)"),
    ("pg_tuned", "1-query jobs/s (tuned)"),
]


def io_cell(summary: dict[str, Any], key: str) -> str:
    """Rate (min-max), then [slots; share of the ideal slots / 20 ms] where there is one."""
    text = cell(summary, key, 0)
    if not text:
        return ""
    slots = summary.get(f"{key}_slots")
    ideal = summary.get(f"{key}_ideal")
    if slots:
        text += f" [{slots['median']:.0f} slots"
        text += f"; {ideal['median']:.2f} of ideal]" if ideal else "]"
    return text


def io_table(results: list[dict[str, Any]]) -> str:
    """The I/O-bound table (``bench.harness.measure_io``), or "" when no target ran it."""
    rows = []
    for res in results:
        summary = res.get("summary", {})
        if not any(key in summary for key, _ in IO_COLUMNS):
            continue
        name = res["name"] + (f" {res['version']}" if res.get("version") else "")
        errors = res.get("errors", {})
        cells = [
            io_cell(summary, key) or ("error¹" if key in errors else "—") for key, _ in IO_COLUMNS
        ]
        rows.append("| " + " | ".join([name, f"`{res.get('io_tuning', '?')}`", *cells]) + " |")
    if not rows:
        return ""
    head = ["library / backend", "tuned setting"] + [title for _, title in IO_COLUMNS]
    return "\n".join(
        [
            f"I/O-bound jobs: {IO_N:,} jobs that each wait 20 ms (`asyncio.sleep` in async "
            "libraries, `time.sleep` in sync ones) or run one PostgreSQL query (a pool of 10 "
            "connections per worker process), then count (one INCRBY per event-loop turn in "
            "async libraries, an INCR per job in sync ones); jobs/s from the first finished to "
            "the last. [slots = jobs the worker runs at once; of ideal = the rate over slots / "
            "20 ms.] tuned = the one setting each library documents for such work.",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
            *rows,
        ]
    )


def main() -> None:
    """Re-render the table of ``bench/results/latest.json``."""
    import json
    import sys
    from pathlib import Path

    default = Path(__file__).parent / "results" / "latest.json"
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    print(markdown_table(json.loads(path.read_text())["results"]))


if __name__ == "__main__":
    main()
