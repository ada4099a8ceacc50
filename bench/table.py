"""One markdown table from harness results (medians with min-max spread)."""

from __future__ import annotations

from typing import Any

COLUMNS = [
    ("enqueue", "enqueue jobs/s", 0),
    ("bulk", "bulk enqueue jobs/s", 0),
    ("drain_default", "drain jobs/s (default worker)", 0),
    ("drain_one", "drain jobs/s (1 process)", 0),
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
                    f"{cell(extra, f'drain_{mode}', 0)} | | | | | |"
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
    if notes:
        out += "\n\n¹ errors / not run:\n" + "\n".join(notes)
    return out


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
