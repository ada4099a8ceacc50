"""The ready-made Grafana dashboard and Prometheus alert rules of docs/observability/: they
parse, and every metric they (and docs/observability.md) name is one duly exports, so a renamed
metric fails here instead of leaving a blank panel or an alert that never fires."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

import duly
from duly.observability import (
    FRESHNESS_METRICS,
    SCHEDULE_METRICS,
    BackendCollector,
    PrometheusHook,
)

ROOT = Path(__file__).resolve().parents[2]
FILES = ROOT / "docs" / "observability"
GUIDE = ROOT / "docs" / "observability.md"
METRIC = re.compile(r"\bduly_[a-z_]+\b")
#: Sample names of each kind of family, as Prometheus stores them.
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def exported_families(tmp_path: Path) -> dict[str, str]:
    """Every metric family duly exports (a worker's hook and the backend collector): name ->
    type. The freshness gauges count once the collector exports them (FRESHNESS_METRICS)."""
    app = duly.App(f"sqlite:///{tmp_path / 'duly.db'}")
    try:
        registry = CollectorRegistry()
        PrometheusHook(registry)
        registry.register(BackendCollector(app))
        families = {family.name: family.type for family in registry.collect()}
    finally:
        app.close()
    for name in (*FRESHNESS_METRICS, *SCHEDULE_METRICS):
        families.setdefault(name, "gauge")
    return families


def exported_samples(tmp_path: Path) -> set[str]:
    families = exported_families(tmp_path)
    return {name + suffix for name, kind in families.items() for suffix in SUFFIXES[kind]}


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FILES / "grafana-dashboard.json").read_text())
    return data


def alert_rules() -> list[dict[str, Any]]:
    data = yaml.safe_load((FILES / "alerts.yml").read_text())
    return [rule for group in data["groups"] for rule in group["rules"]]


def test_the_dashboard_is_grafana_json_over_duly_metrics(tmp_path: Path) -> None:
    board = dashboard()
    panels = board["panels"]
    assert [p["id"] for p in panels] == list(range(1, len(panels) + 1))
    variables = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "queue"} <= variables
    exprs = []
    for panel in panels:
        assert panel["title"] and panel["targets"], panel
        place = panel["gridPos"]
        assert place["x"] >= 0 and place["x"] + place["w"] <= 24, panel
        exprs += [target["expr"] for target in panel["targets"]]
    used = {name for expr in exprs for name in METRIC.findall(expr)}
    assert used <= exported_samples(tmp_path)
    # every family shows somewhere on the board
    assert {re.sub(r"_(total|bucket|count|sum)$", "", n) for n in used} >= (
        set(exported_families(tmp_path)) - {"duly_freshness_score"}
    )


def test_the_alert_rules_use_duly_metrics(tmp_path: Path) -> None:
    rules = alert_rules()
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names))
    assert "DulyFreshnessOverSLA" in names  # seed 000: staleness over the SLA for 5 minutes
    (sla,) = [rule for rule in rules if rule["alert"] == "DulyFreshnessOverSLA"]
    assert sla["for"] == "5m" and "duly_freshness_sla_breaches" in sla["expr"]
    exported = exported_samples(tmp_path)
    for rule in rules:
        assert set(METRIC.findall(rule["expr"])) <= exported, rule["alert"]
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert rule["annotations"]["summary"]


def test_the_guide_names_every_metric_and_no_other(tmp_path: Path) -> None:
    named = set(METRIC.findall(GUIDE.read_text()))
    families = exported_families(tmp_path)
    assert named <= exported_samples(tmp_path) | set(families)
    for name, kind in families.items():
        assert named & {name, *(name + suffix for suffix in SUFFIXES[kind])}, name


def promtool() -> str:
    found = shutil.which("promtool") or shutil.which("promtool", path=Path(sys.executable).parent)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing; `make install` fetches it (tools/get-promtool.sh)")
        pytest.skip("promtool is missing (make install fetches it: tools/get-promtool.sh)")
    return found


@pytest.mark.parametrize(
    "command", [["check", "rules", "alerts.yml"], ["test", "rules", "alerts-test.yml"]]
)
def test_promtool_accepts_the_rules(command: list[str]) -> None:
    """``promtool check rules``, and its unit tests of the rules (alerts-test.yml: the SLA
    alert pages after 5 minutes over, not before)."""
    done = subprocess.run(
        [promtool(), *command], cwd=FILES, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
