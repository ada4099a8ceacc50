"""The one table: scenario x backend."""

from __future__ import annotations

from collections.abc import Sequence

from chaos.harness import Result

HEADER = (
    "scenario",
    "backend",
    "jobs",
    "lost",
    "dup runs",
    "dup bound",
    "recovery s",
    "bound s",
    "result",
    "time s",
)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def rows(results: Sequence[Result]) -> list[tuple[str, ...]]:
    out = []
    for r in results:
        if r.pending:
            out.append((r.scenario, r.backend, "-", "-", "-", "-", "-", "-", "pending", "-"))
            continue
        out.append(
            (
                r.scenario, r.backend, str(r.jobs), str(r.lost), str(r.duplicates), str(r.bound),
                _fmt(r.recovery), _fmt(r.recovery_bound), "PASS" if r.ok else "FAIL",
                f"{r.seconds:.0f}",
            )
        )  # fmt: skip
    return out


#: The failover rows (scenario 9) again, with what a failover is judged by.
FAILOVER_HEADER = (
    "scenario",
    "enqueued",
    "acknowledged",
    "lost",
    "refused",
    "dup runs",
    "resume s",
    "result",
)


def failover_rows(results: Sequence[Result]) -> list[tuple[str, ...]]:
    return [
        (
            r.scenario, f"{r.enqueued:,}", f"{r.jobs:,}", str(r.lost), f"{r.refused:,}",
            str(r.duplicates), _fmt(r.recovery), "PASS" if r.ok else "FAIL",
        )
        for r in results
        if r.enqueued is not None and not r.pending
    ]  # fmt: skip


def _markdown(header: Sequence[str], body: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, body)]


def table(results: Sequence[Result]) -> str:
    """A Markdown table (readable in a terminal too), the failover table, then the notes."""
    out = _markdown(HEADER, rows(results))
    failovers = failover_rows(results)
    if failovers:
        out += ["", *_markdown(FAILOVER_HEADER, failovers)]
    out.append("")
    for r in results:
        notes = ([f"pending: {r.pending}"] if r.pending else []) + r.notes
        if notes:
            out.append(f"- {r.scenario} / {r.backend}: " + "; ".join(notes))
    return "\n".join(out)
