"""mypy catches a wrong call to ``enqueue`` (tasks are typed with ParamSpec)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import pytest

SOURCE = textwrap.dedent(
    """
    import duly

    app = duly.App("sqlite:///typing.db")

    @app.task(retries=2)
    def add(a: int, b: int) -> int:
        return a + b

    @app.task
    async def greet(name: str, *, loud: bool = False) -> str:
        return name

    ok1: duly.Job = add.enqueue(1, 2)
    ok2 = add.options(delay=3, key="k").enqueue(a=1, b=2)
    ok3 = app.enqueue_many([add.s(1, 2), greet.s("x", loud=True)])
    async def use() -> None:
        await greet.enqueue_async("bob")
    reveal_type(add)
    reveal_type(greet)

    add.enqueue(1, "two")            # error: wrong type
    add.enqueue(1)                   # error: missing argument
    greet.options(queue="q").enqueue(name=3)   # error: wrong type
    add.s(1, 2, 3)                   # error: too many arguments

    @app.task(retires=2)             # error: not a task setting (TaskSettings)
    def typo() -> None: ...

    @app.task(queue=3)               # error: wrong type of a setting
    def bad_queue() -> None: ...

    class Counting(duly.Hook):
        pass
    counting: Counting = app.add_hook(Counting())   # add_hook returns the hook's own type
    """
)


@pytest.mark.timeout(120)
def test_mypy_checks_enqueue_arguments(check_types: Callable[[str], tuple[str, str]]) -> None:
    out, err = check_types(SOURCE)
    lines = [line.split(": ", 1)[1] for line in out.splitlines() if ": " in line]
    errors = [(int(line.split(":")[1]), line) for line in out.splitlines() if ": error:" in line]
    error_lines = sorted({n for n, _ in errors})
    src_lines = SOURCE.splitlines()
    expected = sorted(i + 1 for i, text in enumerate(src_lines) if "# error:" in text)
    assert error_lines == expected, out + err
    assert any("Task[[a: int, b: int], int]" in x for x in lines), out
    assert any("Task[[name: str, *, loud: bool =], str]" in x for x in lines), out
