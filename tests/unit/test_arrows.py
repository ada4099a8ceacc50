"""Arrows run one way: the App imports the feature modules, and they reach it only through the
``duly._ports.AppPort`` protocol, never ``duly._app`` (not even for type checking) nor the
App's private members. importlinter checks the runtime imports; this checks the rest."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import duly

SRC = Path(duly.__file__).parent
FEATURES = (
    "_task.py",
    "_job.py",
    "_watch.py",
    "_freshness.py",
    "_groups.py",
    "_events.py",
    "_webhooks.py",
    "_secrets.py",
    "_decorators.py",
    "_registry.py",
    "_schedule.py",
    "_scheduler/periodic.py",
)
APP_MODULES = {"duly._app", "duly._app_queries"}


def _app_imports(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.ImportFrom) and node.module in APP_MODULES) or (
            isinstance(node, ast.Import) and any(a.name in APP_MODULES for a in node.names)
        ):
            lines.append(node.lineno)
    return lines


def _private_app_members(tree: ast.AST) -> list[str]:
    """``app._x`` / ``self.app._x`` / ``self._app._x``: a private member of the App."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")):
            continue
        owner = node.value
        name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
        if name in ("app", "_app") and not node.attr.startswith("__"):
            found.append(f"{node.lineno}: {name}.{node.attr}")
    return found


@pytest.mark.parametrize("module", FEATURES)
def test_feature_module_does_not_import_the_app(module: str) -> None:
    tree = ast.parse((SRC / module).read_text(), module)
    assert _app_imports(tree) == [], f"{module} imports duly._app: use duly._ports.AppPort"
    assert _private_app_members(tree) == [], module


def test_schedule_maths_is_pure() -> None:
    """The task side (decorators, registry) reads schedules from the pure rules module, not
    from the scheduler engine."""
    for module in ("_decorators.py", "_registry.py", "_app.py"):
        tree = ast.parse((SRC / module).read_text(), module)
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not any(m and m.startswith("duly._scheduler") for m in imported), module
