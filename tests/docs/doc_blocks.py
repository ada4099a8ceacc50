"""Find the ```python blocks of duly's Markdown docs and run them as a reader would.

A block is run with the blocks before it in the same file (they share one namespace, in
order), so a page can define ``app`` once and use it below. A block preceded by
``<!-- norun: reason -->`` is only compiled, never run. Code is compiled with the Markdown file
as its filename and its real line numbers, so a traceback points at the line in the doc.
Top-level ``await`` / ``async with`` is allowed, as in ``python -m asyncio``.

``python doc_blocks.py FILE LINE`` runs the block whose fence is on LINE of FILE (after the
blocks before it) in a fresh interpreter: what the test suite does for each block, so a block
sees only the imports it and its page make, as a reader's script would.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import sys
import textwrap
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duly

__all__ = ["ROOT", "Block", "DocError", "doc_files", "main", "parse", "run_blocks"]

ROOT = Path(__file__).resolve().parents[2]

_FENCE = re.compile(r"^ *(?P<fence>```+|~~~+)\s*(?P<info>.*)$")  # indented in a list too
_NORUN = re.compile(r"^<!--\s*norun:(?P<reason>.*?)-->\s*$")
_PYTHON = {"python", "py", "python3"}
_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


class DocError(Exception):
    """A doc's blocks are malformed (unclosed fence, a norun marker with no reason...)."""


@dataclass(frozen=True)
class Block:
    """One ```python block: its file, the line of its opening fence, its code."""

    path: Path
    line: int
    source: str = field(repr=False)
    norun: str | None = None  # the reason given in ``<!-- norun: reason -->``

    @property
    def name(self) -> str:
        """``docs/guide.md:38``: the item id pytest shows."""
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path}:{self.line}"

    def compile(self) -> Any:
        """The block's code object, with the doc's own line numbers."""
        padded = "\n" * self.line + self.source  # the code starts on the line after the fence
        return compile(padded, str(self.path), "exec", flags=_FLAGS, dont_inherit=True)


def doc_files() -> list[Path]:
    """README.md and docs/**/*.md: the docs whose code must run."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def parse(path: Path, text: str | None = None) -> list[Block]:
    """Every ```python block of ``path`` (its text read unless given), in order."""
    lines = (path.read_text() if text is None else text).splitlines()
    blocks: list[Block] = []
    i = 0
    pending_norun: tuple[int, str] | None = None
    while i < len(lines):
        line = lines[i]
        if marker := _NORUN.match(line.strip()):
            reason = marker["reason"].strip()
            if not reason:
                raise DocError(f"{path}:{i + 1}: a norun marker needs a reason")
            pending_norun = (i + 1, reason)
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence is None:
            if line.strip() and pending_norun is not None:
                raise DocError(f"{path}:{pending_norun[0]}: norun is not followed by a block")
            i += 1
            continue
        start, closing = i, fence["fence"]
        language = (fence["info"].split() or [""])[0].lower()
        i += 1
        while i < len(lines) and not (
            lines[i].lstrip().startswith(closing) and not lines[i].strip().strip(closing[0])
        ):
            i += 1
        if i == len(lines):
            raise DocError(f"{path}:{start + 1}: the fence is never closed")
        if language in _PYTHON:
            source = textwrap.dedent("\n".join(lines[start + 1 : i]) + "\n")
            norun = pending_norun[1] if pending_norun else None
            blocks.append(Block(path, start + 1, source, norun))
        elif pending_norun is not None:
            raise DocError(f"{path}:{pending_norun[0]}: norun precedes a {language!r} block")
        pending_norun = None
        i += 1
    if pending_norun is not None:
        raise DocError(f"{path}:{pending_norun[0]}: norun is not followed by a block")
    return blocks


def _apps(namespace: dict[str, Any]) -> list[duly.App]:
    return [value for value in namespace.values() if isinstance(value, duly.App)]


def _exec(block: Block, namespace: dict[str, Any]) -> None:
    code = block.compile()
    if not code.co_flags & inspect.CO_COROUTINE:
        exec(code, namespace)
        return

    async def main() -> None:
        try:
            await eval(code, namespace)
        finally:
            # The apps' connections opened on this loop die with it: close them first.
            for app in _apps(namespace):
                await app.aclose()

    asyncio.run(main())


def run_blocks(target: Block, blocks: list[Block]) -> None:
    """Run ``target`` after every runnable block before it in its file, in one namespace.

    An earlier block that fails says so in a note (the failure is that block's own test's).
    """
    earlier = [b for b in blocks if b.path == target.path and b.line < target.line]
    namespace: dict[str, Any] = {"__name__": target.path.stem.lower()}
    try:
        for block in [*earlier, target]:
            if block.norun is not None:
                continue
            try:
                _exec(block, namespace)
            except BaseException as exc:
                if block is not target:
                    exc.add_note(f"in the earlier block {block.name}, which this one builds on")
                raise
    finally:
        for app in _apps(namespace):
            app.close()


def main(argv: list[str]) -> None:
    """Run the block of ``argv[0]`` (a Markdown file) whose fence is on line ``argv[1]``."""
    path, line = Path(argv[0]).resolve(), int(argv[1])
    blocks = parse(path)
    (target,) = [block for block in blocks if block.line == line]
    try:
        run_blocks(target, blocks)
    except Exception as exc:
        # Show the doc's frames, not this runner's.
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        traceback.print_exception(exc.with_traceback(tb))
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
