"""Every ```python block of README.md and docs/*.md runs (see ``doc_blocks.py``).

One test per block, named by file and line (``test_block[docs/guide.md:38]``). Each runs in a
fresh interpreter (only the imports its page makes), in a temporary directory, with
``DULY_URL`` on a SQLite file there, so ``duly.App()`` works; the blocks of a page that names a
service get that service, isolated (``_SERVICES``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import doc_blocks
import pytest
from doc_blocks import Block, DocError, doc_files, parse, run_blocks
from services import POSTGRES_URL, require_service

BLOCKS = [block for path in doc_files() for block in parse(path)]

_TIMEOUT = 60.0

#: Pages whose blocks use a service beyond the embedded SQLite default.
_SERVICES = {"postgres.md": "postgres"}


@pytest.fixture
def postgres_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``DULY_URL`` on a schema of its own and ``DATABASE_URL`` (the reader's application
    database) with a ``search_path`` of its own, both dropped afterwards."""
    import psycopg

    require_service("postgres")
    duly_schema, app_schema = f"docs_{uuid4().hex[:12]}", f"docs_{uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {app_schema}")
    monkeypatch.setenv("DULY_URL", f"{POSTGRES_URL}?namespace={duly_schema}")
    monkeypatch.setenv("DATABASE_URL", f"{POSTGRES_URL}?options=-csearch_path%3D{app_schema}")
    try:
        yield
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            for schema in (duly_schema, app_schema):
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.mark.parametrize("block", BLOCKS, ids=[block.name for block in BLOCKS])
def test_block(
    block: Block,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """The block runs as written (a ``norun`` block at least compiles)."""
    if block.norun is not None:
        block.compile()
        return
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DULY_URL", f"sqlite:///{tmp_path}/duly.db")
    service = _SERVICES.get(block.path.name)
    if service is not None:
        request.getfixturevalue(f"{service}_env")
    run = _run(block, tmp_path)
    if run.returncode != 0:
        pytest.fail(f"{block.name} failed:\n{run.stdout}{run.stderr}", pytrace=False)


def _run(block: Block, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``block`` (after the blocks before it) in a fresh interpreter in ``cwd``."""
    command = [sys.executable, doc_blocks.__file__, str(block.path), str(block.line)]
    return subprocess.run(
        command, cwd=cwd, env=dict(os.environ), capture_output=True, text=True, timeout=_TIMEOUT
    )


def test_docs_have_blocks() -> None:
    """The collector finds the docs' blocks (a broken parser must not pass by finding none)."""
    names = {block.path.name for block in BLOCKS}
    assert {"README.md", "guide.md", "postgres.md"} <= names


def test_a_failing_block_fails_its_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block that raises fails, with the doc's line in the traceback; the blocks after it
    name it as the earlier failure."""
    monkeypatch.chdir(tmp_path)
    doc = tmp_path / "page.md"
    doc.write_text("# Page\n\n```python\nx = 1\nassert x == 2\n```\n\n```python\ny = x\n```\n")
    first, second = parse(doc)
    failed = _run(first, tmp_path)
    assert failed.returncode == 1
    assert f'File "{doc}", line 5' in failed.stderr, failed.stderr
    failed = _run(second, tmp_path)
    assert failed.returncode == 1
    assert f"in the earlier block {doc}:3" in failed.stderr, failed.stderr


def test_blocks_share_a_namespace_in_order(tmp_path: Path) -> None:
    """Later blocks see earlier ones; a norun block is skipped; top-level await runs."""
    doc = tmp_path / "page.md"
    doc.write_text(
        "```python\nimport asyncio\nx = [1]\n```\n"
        "<!-- norun: shows a mistake -->\n```python\nx.append(99)\n```\n"
        "```python\nawait asyncio.sleep(0)\nx.append(2)\nassert x == [1, 2], x\n```\n"
    )
    blocks = parse(doc)
    assert [b.norun for b in blocks] == [None, "shows a mistake", None]
    run_blocks(blocks[2], blocks)


def test_a_block_in_a_list_item_is_found(tmp_path: Path) -> None:
    """An indented fence (inside a list item) is a block too, dedented."""
    doc = tmp_path / "page.md"
    doc.write_text("- a step:\n\n  ```python\n  if True:\n      x = 1\n  ```\n- done\n")
    assert [(b.line, b.source) for b in parse(doc)] == [(3, "if True:\n    x = 1\n")]


@pytest.mark.parametrize(
    "text",
    [
        "<!-- norun: -->\n```python\nx = 1\n```\n",  # no reason
        "<!-- norun: why -->\n\nsome prose\n\n```python\nx = 1\n```\n",  # not before a block
        "<!-- norun: why -->\n```sh\nls\n```\n",  # not a python block
        "```python\nx = 1\n",  # never closed
    ],
    ids=["no-reason", "not-before-a-block", "not-python", "unclosed"],
)
def test_malformed_docs_are_rejected(text: str, tmp_path: Path) -> None:
    """A marker that would silently do nothing is an error, as is an unclosed fence."""
    with pytest.raises(DocError):
        parse(tmp_path / "page.md", text)
