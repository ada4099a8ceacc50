"""mypy sees what a job returns: ``Task[P, R].enqueue`` gives a ``Job[R]`` whose result is R."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable

import pytest

SOURCE = textwrap.dedent(
    """
    import duly

    app = duly.App("sqlite:///typing.db")

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    @app.task
    async def greet(name: str) -> str:
        return name

    job = add.enqueue(1, 2)
    reveal_type(job)                                    # R: duly._job.Job[int]
    reveal_type(job.result(timeout=5))                  # R: int
    reveal_type(job.wait().result)                      # R: int | None
    reveal_type(add.options(delay=3).enqueue(1, 2).result())   # R: int

    async def use() -> None:
        handle = await greet.enqueue_async("bob")
        reveal_type(await handle.result_async())        # R: str

    page = app.jobs(limit=10)
    reveal_type(app.jobs(limit=10, before=page[-1].id)) # R: list[duly._job.JobInfo[Any]]
    legacy: duly.Job = job                              # a bare Job still checks (Job[Any])
    info: duly.JobInfo | None = app.get_job(job.id)

    wrong: str = add.enqueue(1, 2).result()             # error: an int is no str
    """
)


@pytest.mark.timeout(120)
def test_mypy_knows_the_result_type_of_a_job(
    check_types: Callable[[str], tuple[str, str]],
) -> None:
    out, err = check_types(SOURCE)
    src_lines = SOURCE.splitlines()
    revealed = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(r":(\d+): note: Revealed type is \"(.*)\"", out)
    }
    expected = {
        i + 1: line.split("# R: ", 1)[1].strip()
        for i, line in enumerate(src_lines)
        if "# R: " in line
    }
    assert revealed == expected, out + err
    errors = sorted({int(m.group(1)) for m in re.finditer(r":(\d+): error:", out)})
    assert errors == [i + 1 for i, line in enumerate(src_lines) if "# error:" in line], out
