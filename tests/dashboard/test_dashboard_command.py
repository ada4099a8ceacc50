"""``duly dashboard`` as a real process, and the page it serves in headless Chromium."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from served import wait_until

import duly

TASKS = """
import duly

app = duly.App()


@app.task(name="cmd.hello")
def hello(name: str) -> str:
    return f"hello {name}"
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_duly_dashboard_prints_a_login_url_that_opens_the_page(
    browser: Any, tmp_path: Path
) -> None:
    (tmp_path / "cmd_tasks.py").write_text(TASKS)
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DULY_")}
    env.update(DULY_URL=url, PYTHONPATH=str(tmp_path))
    port = free_port()
    command = [sys.executable, "-m", "duly", "dashboard", "--app", "cmd_tasks:app"]
    server = subprocess.Popen(
        [*command, "--port", str(port)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        login = ""
        deadline = time.monotonic() + 30
        assert server.stderr is not None
        while not login and time.monotonic() < deadline:
            line = server.stderr.readline()
            found = re.search(r"(http://\S+/login\?token=\S+)", line)
            login = found.group(1) if found else ""
        assert login, "duly dashboard printed no login URL"
        threading.Thread(target=server.stderr.read, daemon=True).start()  # never fills up
        with duly.App(url) as app:
            app.task(name="cmd.hello")(lambda name: name)
            job = app.tasks["cmd.hello"].enqueue("page")

        def listening() -> bool:
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", port)) == 0

        wait_until(listening, 30, "the dashboard to listen")
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto(login)
            page.wait_for_selector("#chart-outcomes svg")
            assert page.locator("#who .role").inner_text() == "admin"
            page.click("#nav a[data-section='jobs']")
            page.wait_for_selector(f'tr[data-id="{job.id}"]')
            assert "cmd.hello" in page.locator(f'tr[data-id="{job.id}"]').inner_text()
        finally:
            context.close()
    finally:
        server.terminate()
        server.wait(15)
