"""examples/django_shop: a Django project whose orders start seed 004's watch in the order's
own transaction, run end to end through ``manage.py`` on SQLite and on PostgreSQL.

On PostgreSQL the shop's tables and duly's live in one database (two schemas), so jobs are
stored by the order's transaction (``connection=django.db.connection``); on SQLite they are
enqueued once it commits (``on_commit=True``). Every step is a real process: ``manage.py
migrate``, driver scripts that use Django's test client, ``manage.py duly worker|status|jobs``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from services import POSTGRES_URL, require_service

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "examples" / "django_shop"

SETUP = """
import json
import django
django.setup()
from django.db import connection, transaction
from django.test import Client
import duly
from duly.contrib.django import app
from orders.models import Email, Order
from orders.tasks import order_unshipped, send_confirmation
client = Client()
"""

PLACE = (
    SETUP
    + """
report = {"vendor": connection.vendor}
placed = [client.post("/orders/", {"email": e}) for e in ("ann@a.org", "bo@b.org")]
report["placed"] = [response.json()["id"] for response in placed]
bad = client.post("/orders/", {"email": "cy@c.invalid"})   # rolled back after its enqueues
report["bad"] = [bad.status_code, bad.json(), Order.objects.count()]
report["details"] = [client.get(f"/orders/{i}/").json() for i in report["placed"]]
report["jobs"] = len(app.jobs())

# on_commit=True: nothing before the commit, the job after it, nothing on a rollback
with transaction.atomic():
    job = send_confirmation.options(on_commit=True).enqueue(report["placed"][0])
    before = app.get_job(job.id)
report["on_commit"] = [before is None, app.get_job(job.id).status]
try:
    with transaction.atomic():
        dropped = send_confirmation.options(on_commit=True).enqueue(report["placed"][0])
        raise RuntimeError("roll back")
except RuntimeError:
    pass
report["on_commit_rollback"] = app.get_job(dropped.id) is None

# connection=: stored by Django's own transaction (PostgreSQL), refused elsewhere
try:
    with transaction.atomic():
        job = send_confirmation.options(connection=connection).enqueue(report["placed"][1])
        before = app.get_job(job.id)
    report["connection"] = [before is None, app.get_job(job.id).status]
    try:
        with transaction.atomic():
            dropped = send_confirmation.options(connection=connection).enqueue(1)
            raise RuntimeError("roll back")
    except RuntimeError:
        report["connection_rollback"] = app.get_job(dropped.id) is None
except duly.ConfigurationError as exc:
    report["connection"] = str(exc)

# call_command: a non-zero exit of the duly command is a CommandError
from django.core.management import CommandError, call_command
call_command("duly", "queues")
try:
    call_command("duly", "status", "01NOSUCHJOB00000000000000")
except CommandError as exc:
    report["call_command"] = [str(exc), exc.returncode]
print(json.dumps(report))
"""
)

WATCH = (
    SETUP
    + """
import duly.testing
dee = client.post("/orders/", {"email": "dee@d.org"}).json()["id"]
eve = client.post("/orders/", {"email": "eve@e.org"}).json()["id"]
stopped = client.post(f"/orders/{eve}/ship/").json()["stopped"]
jobs = [j.id for i in (dee, eve) for j in app.jobs(key=order_unshipped.key_of((), {"order_id": i}))]
duly.testing.run_jobs(app, jobs, timeout=60)
history = {
    w.kwargs["order_id"]: [w.state, w.reason, w.checks]
    for w in app.watch_history(order_unshipped)
}
print(json.dumps({
    "stopped": stopped,
    "emails": [sorted(client.get(f"/orders/{i}/").json()["emails"]) for i in (dee, eve)],
    "history": [history[i] for i in (dee, eve)],
}))
"""
)


class Shop:
    """The example project in a temporary directory, on one kind of database."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.env = env
        self.cwd = cwd

    def run(self, *argv: str, hour: float = 3600.0) -> subprocess.CompletedProcess[str]:
        env = {**self.env, "SHOP_HOUR": str(hour)}
        return subprocess.run(
            [sys.executable, *argv],
            cwd=self.cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def manage(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(str(PROJECT / "manage.py"), *args)

    def driver(self, source: str, hour: float = 3600.0) -> Any:
        out = self.run("-c", source, hour=hour)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(params=["sqlite", "postgres"])
def shop(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Shop]:
    kind: str = request.param
    require_service(kind)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(PROJECT), str(ROOT / "src")]),
        "DJANGO_SETTINGS_MODULE": "shop.settings",
    }
    if kind == "sqlite":
        env["SHOP_DATABASE_URL"] = f"sqlite:///{tmp_path}/shop.db"
        env["DULY_URL"] = f"sqlite:///{tmp_path}/jobs.db"
        yield Shop(env, tmp_path)
        return
    import psycopg

    tables, jobs = f"shop_{uuid4().hex[:12]}", f"jobs_{uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {tables}")
    env["SHOP_DATABASE_URL"] = f"{POSTGRES_URL}?search_path={tables}"
    env["DULY_URL"] = f"{POSTGRES_URL}?namespace={jobs}"
    try:
        yield Shop(env, tmp_path)
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            for schema in (tables, jobs):
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_orders_and_their_jobs_commit_together(shop: Shop) -> None:
    migrated = shop.manage("migrate", "--verbosity", "0")
    assert migrated.returncode == 0, migrated.stderr
    report = shop.driver(PLACE)
    postgres = report["vendor"] == "postgresql"

    # each placed order has its watch (first check in 3 h) and its confirmation
    ann, bo = report["placed"]
    for detail in report["details"]:
        tasks = sorted((j["task"], j["status"]) for j in detail["jobs"])
        assert tasks == [
            ("orders.tasks.order_unshipped", "scheduled"),
            ("orders.tasks.send_confirmation", "queued"),
        ]
    # the order rolled back after its enqueues: no order, no job
    assert report["bad"] == [400, {"error": "cannot deliver to cy@c.invalid"}, 2]
    assert report["jobs"] == 4
    assert report["on_commit"] == [True, "queued"]
    assert report["on_commit_rollback"] is True
    if postgres:
        assert report["connection"] == [True, "queued"]
        assert report["connection_rollback"] is True
    else:
        assert "PostgreSQL only" in report["connection"]
        assert "on_commit=True" in report["connection"]

    assert report["call_command"] == ["duly status 01NOSUCHJOB00000000000000: exit 1", 1]

    # manage.py duly ...: the worker finds the tasks of the project's apps
    # (two processes: each child imports the project's App without Django started)
    ran = shop.manage("duly", "worker", "--burst", "--processes", "2")
    assert ran.returncode == 0, ran.stderr
    listed = shop.manage("duly", "jobs", "--json", "--task", "orders.tasks.send_confirmation")
    assert listed.returncode == 0, listed.stderr
    confirmations = json.loads(listed.stdout)
    assert len(confirmations) == (4 if postgres else 3)
    assert {j["status"] for j in confirmations} == {"succeeded"}
    status = shop.manage("duly", "status", confirmations[0]["id"], "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["status"] == "succeeded"
    assert shop.manage("duly", "status", "01NOSUCHJOB00000000000000").returncode == 1
    scheduled = json.loads(shop.manage("duly", "jobs", "--json", "--status", "scheduled").stdout)
    assert sorted(j["kwargs"]["order_id"] for j in scheduled) == [ann, bo]
    emails = shop.driver(SETUP + "print(json.dumps(list(Email.objects.values_list('order_id'))))")
    assert sorted(emails) == sorted([[ann], [ann], [bo]] + ([[bo]] if postgres else []))


def test_an_unshipped_order_is_reminded_then_escalated(shop: Shop) -> None:
    """With an hour of 1 s: the order never shipped gets its reminder at 3 h and its
    escalation at 6 h, then its watch is done; the order shipped at once has its watch stopped
    and only its confirmation. (The reminder's check must run between 3 h and 6 h after the
    order: with an hour of 0.3 s, a loaded machine ran it past 6 h, which escalates at once.)"""
    assert shop.manage("migrate", "--verbosity", "0").returncode == 0
    report = shop.driver(WATCH, hour=1.0)
    assert report["stopped"] is True
    assert report["emails"] == [["confirmation", "escalation", "reminder"], ["confirmation"]]
    assert report["history"] == [["done", None, 2], ["stopped", "stopped", 0]]


CONNECTIONS = (
    SETUP
    + """
import duly.testing


@app.task(name="probe.fresh_connection")
def fresh_connection() -> bool:
    fresh = connection.connection is None
    Order.objects.count()  # opens this thread's connection
    return fresh


jobs = [fresh_connection.enqueue() for _ in range(3)]
duly.testing.run_jobs(app, jobs, concurrency=1)  # one thread runs all three
Order.objects.count()
print(json.dumps({
    "in_jobs": [app.get_job(j.id).result for j in jobs],
    "called_directly": fresh_connection(),  # outside a worker: left alone
}))
"""
)


def test_each_run_of_a_sync_task_starts_and_ends_with_fresh_connections(shop: Shop) -> None:
    """As a request does: a worker thread never reuses a connection past ``CONN_MAX_AGE``
    (0 here), so a connection broken by a database restart cannot fail its later tasks."""
    assert shop.manage("migrate", "--verbosity", "0").returncode == 0
    report = shop.driver(CONNECTIONS)
    assert report == {"in_jobs": [True, True, True], "called_directly": False}


DASHBOARD = (
    SETUP
    + """
from starlette.testclient import TestClient
from shop.asgi import application

placed = client.post("/orders/", {"email": "ann@a.org"}).json()["id"]
bearer = {"Authorization": "Bearer admin-token-of-the-shop"}
with TestClient(application) as http:
    page = http.get("/jobs/")
    jobs = http.get("/jobs/api/v1/jobs", headers=bearer).json()["jobs"]
    report = {
        "order": http.get(f"/orders/{placed}/").status_code,   # Django still answers
        "page": [page.status_code, '<base href="/jobs/">' in page.text],
        "csp": "unsafe-inline" not in page.headers["content-security-policy"],
        "redirect": http.get("/jobs", follow_redirects=False).headers.get("location"),
        "no_token": http.get("/jobs/api/v1/jobs").status_code,
        "jobs": sorted(j["task"] for j in jobs),
        "script": http.get("/jobs/static/js/app.js").status_code,
    }
    login = http.get("/jobs/login?token=admin-token-of-the-shop", follow_redirects=False)
    report["login"] = [login.status_code, login.headers["location"]]
    report["session"] = http.get("/jobs/api/v1/session").json()["role"]
print(json.dumps(report))
"""
)


def test_the_dashboard_is_served_under_jobs_next_to_django(shop: Shop) -> None:
    migrated = shop.manage("migrate", "--verbosity", "0")
    assert migrated.returncode == 0, migrated.stderr
    shop.env["DULY_ADMIN_TOKENS"] = "admin-token-of-the-shop"
    report = shop.driver(DASHBOARD)
    assert report["order"] == 200
    assert report["page"] == [200, True] and report["csp"] is True
    assert report["redirect"] == "/jobs/"
    assert report["no_token"] == 401
    assert report["jobs"] == ["orders.tasks.order_unshipped", "orders.tasks.send_confirmation"]
    assert report["script"] == 200
    assert report["login"] == [303, "/jobs/"]
    assert report["session"] == "admin"
