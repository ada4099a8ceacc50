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


def table(results: Sequence[Result]) -> str:
    """A Markdown table (readable in a terminal too), then the notes."""
    body = rows(results)
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(HEADER)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(HEADER), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(row) for row in body]
    out.append("")
    for r in results:
        notes = ([f"pending: {r.pending}"] if r.pending else []) + r.notes
        if notes:
            out.append(f"- {r.scenario} / {r.backend}: " + "; ".join(notes))
    return "\n".join(out)
