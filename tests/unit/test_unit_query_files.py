"""The SQL backends' named queries: one folder of files per backend, one name per query."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import pytest

from duly.backends._sql import load_query_folder, parse_queries


def _package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> str:
    """An importable package with ``queries/<file>`` holding each text; its name."""
    name = f"sqlpkg_{uuid.uuid4().hex[:8]}"
    folder = tmp_path / name / "queries"
    folder.mkdir(parents=True)
    (tmp_path / name / "__init__.py").write_text("")
    for file, text in files.items():
        (folder / file).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
def test_each_backend_folder_loads_and_every_file_holds_queries(backend: str) -> None:
    queries = load_query_folder(f"duly.backends.{backend}")
    assert {"claim", "promote_due", "get_job", "cancel", "fresh_due"} <= set(queries)
    folder = Path(__file__).parents[2] / "src" / "duly" / "backends" / backend / "queries"
    for file in folder.glob("*.sql"):
        text = file.read_text(encoding="utf-8")
        assert parse_queries(text, file.name), f"{file.name} defines no query"
        assert text.startswith("-- "), f"{file.name} does not say what it holds"


def test_the_folder_is_every_sql_file_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _package(
        tmp_path,
        monkeypatch,
        {
            "a.sql": "-- name: one\nSELECT 1;\n\n-- name: two\n-- its comment\nSELECT 2;\n",
            "b.sql": "-- name: three\nSELECT 3;\n",
            "README.md": "-- name: not_a_query\nSELECT 0;\n",
        },
    )
    assert load_query_folder(package) == {
        "one": "SELECT 1;",
        "two": "-- its comment\nSELECT 2;",
        "three": "SELECT 3;",
    }


def test_a_name_two_files_define_is_refused_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _package(
        tmp_path,
        monkeypatch,
        {"claim.sql": "-- name: claim\nSELECT 1;\n", "finish.sql": "-- name: claim\nSELECT 2;\n"},
    )
    with pytest.raises(ValueError, match=r"'claim' defined in claim\.sql and finish\.sql"):
        load_query_folder(package)


def test_a_name_one_file_defines_twice_is_refused() -> None:
    with pytest.raises(ValueError, match=r"x\.sql: query 'q' defined twice"):
        parse_queries("-- name: q\nSELECT 1;\n-- name: q\nSELECT 2;\n", "x.sql")
