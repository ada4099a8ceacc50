"""The CLI's paper cuts (issue 12): every way a command can go wrong ends in one clear line and
a documented exit code, read-only commands never create a database, and ``status --json``
carries the whole record. Each test drives the real ``duly`` in a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner
from e2e_harness import BACKENDS, E2E, require_service
from services import claim_as
from test_e2e_cli import COMMANDS, UNKNOWN_ID, one_clear_line

import duly
from duly._cli import cli
from duly.backends import backend_from_url, redact_url


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def unreachable(kind: str, tmp_path: Path) -> str:
    """A URL of ``kind`` that cannot be reached (a closed port, a directory that is missing)."""
    return {
        "sqlite": f"sqlite:///{tmp_path}/missing/dir/duly.db",
        "redis": "redis://127.0.0.1:1/0",
        "postgres": f"postgresql://postgres:secret@127.0.0.1:{closed_port()}/test",
    }[kind]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any DULY_* setting, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DULY_")}
    return {**env, "COLUMNS": "200", **extra}


def write_app(tmp_path: Path, name: str = "plainapp") -> None:
    """A module ``name`` with ``app = duly.App()`` (it reads $DULY_URL)."""
    (tmp_path / f"{name}.py").write_text("import duly\n\napp = duly.App()\n")


# -- worker --burst against an unreachable backend -----------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", BACKENDS)
def test_burst_gives_up_on_an_unreachable_backend(kind: str, tmp_path: Path) -> None:
    write_app(tmp_path)
    url = unreachable(kind, tmp_path)
    done = E2E.run_cli(
        tmp_path,
        "worker",
        "plainapp:app",
        "--burst",
        timeout=40,
        env=clean_env(DULY_URL=url, DULY_CONNECT_TIMEOUT="1"),
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("duly: --burst: "), done.stderr
    assert "gave up after 1s" in last, last
    assert "Traceback" not in done.stderr
    assert "secret" not in done.stderr
    where = {"sqlite": "missing/dir/duly.db", "redis": "127.0.0.1:1", "postgres": "127.0.0.1"}
    assert where[kind] in last, last


@pytest.mark.timeout(60)
def test_burst_give_up_is_an_option_and_url_overrides_the_apps(tmp_path: Path) -> None:
    # --url reaches an app built as duly.App(); --app is the argument's alias.
    write_app(tmp_path)
    done = E2E.run_cli(
        tmp_path,
        "worker",
        "--app",
        "plainapp:app",
        "--url",
        "redis://127.0.0.1:1/0",
        "--burst",
        "--connect-timeout",
        "0.5",
        timeout=40,
        env=clean_env(DULY_URL="sqlite:///never-used.db"),
    )
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "redis://127.0.0.1:1/0" in last and "gave up after 0.5s" in last, last
    assert not (tmp_path / "never-used.db").exists()

    helped = E2E.run_cli(tmp_path, "worker", "--help")
    section = re.search(r"^  --connect-timeout.*?(?=\n  -)", helped.stdout, re.DOTALL | re.M)
    assert section, helped.stdout
    text = " ".join(section.group().split())
    assert "default: 10" in text and "DULY_CONNECT_TIMEOUT" in text and "forever" in text


# -- migrate against an unreachable backend ------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", BACKENDS)
def test_migrate_against_an_unreachable_backend_exits_2(kind: str, tmp_path: Path) -> None:
    done = E2E.run_cli(tmp_path, "migrate", "--url", unreachable(kind, tmp_path))
    assert done.returncode == 2, (done.stdout, done.stderr)
    line = one_clear_line(done.stderr)
    assert "unavailable" in line and "secret" not in line, line
    assert done.stdout == ""


@pytest.mark.timeout(60)
def test_migrate_on_redis_says_where_it_looked(e2e_redis: E2E) -> None:
    done = e2e_redis.cli("migrate")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"schema is up to date in {e2e_redis.url}"


@pytest.fixture
def e2e_redis(tmp_path: Path) -> E2E:
    require_service("redis")
    return E2E("redis", tmp_path)  # migrate writes nothing: no data to drop


# -- read-only commands and a SQLite file that does not exist ------------------------------------


@pytest.mark.timeout(60)
def test_read_only_commands_never_create_the_database(tmp_path: Path) -> None:
    env = clean_env()
    status = E2E.run_cli(tmp_path, "status", UNKNOWN_ID, env=env)
    assert status.returncode == 1, (status.stdout, status.stderr)
    line = one_clear_line(status.stderr)
    assert line == (
        f"duly: no job {UNKNOWN_ID} in sqlite:///duly.db ({tmp_path / 'duly.db'} does not exist)"
    )
    for action in ("retry", "cancel"):
        done = E2E.run_cli(tmp_path, action, UNKNOWN_ID, env=env)
        assert done.returncode == 1 and "does not exist" in one_clear_line(done.stderr)
    for command in ("jobs", "stats", "queues", "workers"):
        done = E2E.run_cli(tmp_path, command, "--json", env=env)
        assert (done.returncode, done.stderr, json.loads(done.stdout)) == (0, "", []), command
        done = E2E.run_cli(tmp_path, command, env=env)
        assert done.returncode == 0 and "duly.db does not exist" in done.stdout, done.stdout
    done = E2E.run_cli(tmp_path, "watches", "--watch", "w", "--json", env=env)
    assert (done.returncode, json.loads(done.stdout)) == (0, [])
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "no file was created"


@pytest.mark.timeout(60)
def test_an_unknown_job_names_the_backend_without_its_password(tmp_path: Path) -> None:
    require_service("postgres")
    # trust auth: any password works; a schema of its own (not the shared default ``duly``)
    url = f"postgresql://postgres:secret@127.0.0.1:5432/test?namespace=t_{os.getpid()}_unknown"
    try:
        for action in ("status", "retry", "cancel"):
            done = E2E.run_cli(tmp_path, action, UNKNOWN_ID, "--url", url)
            assert done.returncode == 1, done.stderr
            line = one_clear_line(done.stderr)
            assert f"no job {UNKNOWN_ID} in postgresql://postgres:***@127.0.0.1:5432/test" in line
            assert "secret" not in line
    finally:
        backend = backend_from_url(url)
        asyncio.run(backend.drop())


# -- URLs ------------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis://127.0.0.1:6379/abc", "database 'abc' is not an integer"),
        ("redis://:secret@127.0.0.1:abc/0", "port 'abc' is not a number from 1 to 65535"),
        ("redis://127.0.0.1:6379?db=x", "database 'x' is not an integer"),
        ("postgresql://postgres:secret@127.0.0.1:abc/test", "port 'abc' is not a number"),
        ("postgresql://h1:5432,h2:99999/test", "port '99999' is not a number"),
        ("mysql://localhost/db", "unsupported backend URL"),
    ],
)
def test_a_bad_url_is_one_line_of_duly_s_own(url: str, says: str, tmp_path: Path) -> None:
    done = E2E.run_cli(tmp_path, "status", UNKNOWN_ID, "--url", url)
    assert done.returncode == 2, (done.stdout, done.stderr)
    line = one_clear_line(done.stderr)
    assert says in line and "secret" not in line, line
    with pytest.raises(duly.ConfigurationError, match=re.escape(says)):
        backend_from_url(url)
    write_app(tmp_path)  # the same line when the URL is for an app's module
    done = E2E.run_cli(tmp_path, "worker", "plainapp:app", "--url", url)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert says in one_clear_line(done.stderr)


def test_good_urls_pass_and_print_without_secrets() -> None:
    for url in (
        "redis://127.0.0.1:6379/0",
        "redis://127.0.0.1",
        "rediss://:pw@[::1]:6380/15?db=2",
        "unix:///tmp/redis.sock?db=3",
        "postgresql://u@h1:5432,h2:5433/db",
        "postgresql:///db?host=/tmp",
    ):
        backend_from_url(url)
    assert redact_url("redis://:pw@h:1/2?namespace=x") == "redis://:***@h:1/2?namespace=x"
    assert redact_url("postgresql://u:pw@h/db?password=pw&sslmode=require") == (
        "postgresql://u:***@h/db?password=***&sslmode=require"
    )
    assert redact_url("unix:///tmp/redis.sock?db=3") == "unix:///tmp/redis.sock?db=3"


# -- loading the app ------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_missing_attribute_or_module_is_one_line(tmp_path: Path) -> None:
    write_app(tmp_path, "mod")
    (tmp_path / "notapp.py").write_text("app = 42\n")
    for target, says in (
        ("mod:nope", "duly: module 'mod' has no attribute 'nope'"),
        ("no_such_mod:app", "duly: cannot import 'no_such_mod': no module named 'no_such_mod'"),
        ("notapp:app", "duly: 'notapp:app' is not a duly.App (got int)"),
    ):
        done = E2E.run_cli(tmp_path, "worker", target, "--burst")
        assert done.returncode == 2, done.stderr
        assert one_clear_line(done.stderr) == says


@pytest.mark.timeout(60)
def test_an_app_module_that_raises_shows_only_the_users_frames(tmp_path: Path) -> None:
    (tmp_path / "badmod.py").write_text("import helpers\n\napp = helpers.build()\n")
    (tmp_path / "helpers.py").write_text("def build():\n    return 1 / 0\n")
    for command in (("worker", "badmod:app"), ("status", UNKNOWN_ID, "--app", "badmod:app")):
        done = E2E.run_cli(tmp_path, *command)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert lines[-1] == "duly: error importing 'badmod': ZeroDivisionError: division by zero"
        files = re.findall(r'File "([^"]+)"', done.stderr)
        assert files == [str(tmp_path / "badmod.py"), str(tmp_path / "helpers.py")], done.stderr
        assert "importlib" not in done.stderr and "click" not in done.stderr


# -- --app / --url on every command ---------------------------------------------------------------


def _help(*command: str) -> str:
    """``duly COMMAND --help`` in this process (help is static: no subprocess, 40 of them cost
    ~25 s; the real entry point's help is checked once below)."""
    done = CliRunner().invoke(cli, [*command, "--help"], prog_name="duly", terminal_width=200)
    assert done.exit_code == 0, done.output
    return done.output


def test_every_command_says_which_of_app_and_url_it_takes(tmp_path: Path) -> None:
    for command in COMMANDS[:-2]:
        text = _help(command)
        assert "--app" in text and "--url" in text, (command, text)
    for command in ("demo", "bench"):
        text = _help(command)
        assert "--app" not in text and "--url" in text, (command, text)
    root = " ".join(E2E.run_cli(tmp_path, "--help").stdout.split())
    assert "demo, bench --url only" in root, root
    assert "worker, scheduler need the app: MODULE:APP (or --app)" in root, root


@pytest.mark.timeout(60)
def test_worker_wants_one_app(tmp_path: Path) -> None:
    write_app(tmp_path)
    done = E2E.run_cli(tmp_path, "worker")
    assert done.returncode == 2
    assert "missing the app" in one_clear_line(done.stderr)
    env = clean_env(DULY_APP="plainapp:app", DULY_URL="redis://127.0.0.1:1/0")
    done = E2E.run_cli(tmp_path, "worker", "--burst", "--connect-timeout", "0.2", env=env)
    assert done.returncode == 2, done.stderr  # the app from $DULY_APP, on $DULY_URL
    assert "127.0.0.1:1" in done.stderr.strip().splitlines()[-1], done.stderr
    done = E2E.run_cli(tmp_path, "scheduler", "plainapp:app", "--app", "other:app")
    assert done.returncode == 2
    assert "two apps given" in one_clear_line(done.stderr)


# -- status: the whole record and every attempt's error -------------------------------------------

FLAKY = """
import duly

app = duly.App()


@app.task(name="flaky", retries=2, backoff=duly.Backoff(base=0.01, cap=0.01))
def flaky(n):
    if duly.current_job().attempt == 1:
        raise RuntimeError(f"first try of {n}")
    return n * 2
"""


@pytest.mark.timeout(120)
def test_status_shows_every_field_and_each_attempts_error(e2e: E2E) -> None:
    (e2e.dir / "flaky.py").write_text(FLAKY)
    with duly.App(e2e.url) as app:

        @app.task(name="flaky", retries=2)  # the worker runs flaky.py's; this one enqueues
        def flaky(n: int) -> int:
            raise AssertionError("not run here")

        job_id = flaky.enqueue(21).id
    for _ in range(5):  # the retry is due 10 ms later: a burst may end before it is
        done = e2e.cli("worker", "flaky:app", "--burst", "--lease", "2", timeout=60)
        assert done.returncode == 0, done.stderr
        if e2e.info(job_id).status == "succeeded":
            break
    data = e2e.cli_json("status", job_id)
    info = e2e.info(job_id)
    assert set(data) == {*info.to_dict(), "errors"}
    assert (data["status"], data["attempts"], data["result"]) == ("succeeded", 2, 42)
    assert (data["queue"], data["args"], data["kwargs"], data["max_attempts"]) == (
        "default",
        [21],
        {},
        3,
    )
    assert data["priority"] == 0 and data["worker"] and data["scheduled_for"]
    [error] = data["errors"]
    assert (error["attempt"], error["type"], error["message"]) == (
        1,
        "RuntimeError",
        "first try of 21",
    )
    assert "Traceback" in error["traceback"] and error["at"].endswith("+00:00")
    assert data["error"]["message"] == "first try of 21"  # pinned: the last failure

    out = e2e.cli("status", job_id).stdout
    assert "attempt 1 failed: RuntimeError: first try of 21" in out, out
    assert not re.search(r"^\s*error\b", out, re.MULTILINE), out
    assert "Traceback" not in out  # an earlier attempt's error is one line


@pytest.mark.timeout(60)
def test_cancel_of_a_running_job_says_it_is_a_request(e2e: E2E) -> None:
    job = e2e.tasks.mark.enqueue(1)

    claim_as(e2e.app, job.id, "busy-worker", lease=600)  # its worker runs it still
    done = e2e.cli("cancel", job.id)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"cancel requested for {job.id}: it is running"), done.stdout
    assert e2e.info(job.id).status == "running"  # until its run returns
