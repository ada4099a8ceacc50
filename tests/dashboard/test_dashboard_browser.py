"""The dashboard in a real headless Chromium (issue 16): what a person sees and clicks.

Every test drives the page served by a real uvicorn (``conftest.py``); the data comes only
through the HTTP API the page calls.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest
from served import ADMIN, READ, RUNS, Dash, wait_until
from services import BACKENDS

XSS_ARG = "<img src=x onerror=alert(1)><script>alert('two')</script>"
XSS_ERROR = "</pre><svg onload=alert(3)><b>bold</b>"


def status_of(page: Any) -> str:
    return str(page.locator("#job").get_attribute("data-status"))


@pytest.mark.parametrize("kind", BACKENDS)
def test_the_jobs_page_shows_a_job_enqueued_while_it_is_open(make_dash: Any, kind: str) -> None:
    dash = make_dash(kind)
    page = dash.page(ADMIN, "/jobs")
    page.wait_for_selector("#job-list table, #job-list .empty")
    page.evaluate("window.__same_document = true")
    job = dash.app.tasks["t.add"].enqueue(2, 3)
    row = page.locator(f'#job-list tr[data-id="{job.id}"]')
    row.wait_for()
    assert "queued" in row.inner_text()
    assert page.evaluate("window.__same_document") is True  # live: no reload
    dash.run_all()
    page.wait_for_selector(f'#job-list tr[data-id="{job.id}"] .status-succeeded')


def test_retry_from_the_job_page_runs_a_failed_job_again(dash: Dash) -> None:
    job = dash.app.tasks["t.once"].enqueue("retry-me")
    dash.run_all()
    assert dash.app.get_job(job.id).status == "failed"
    page = dash.page(ADMIN, f"/jobs/{job.id}")
    page.wait_for_selector("#job-errors")
    assert "first run of retry-me fails" in page.locator("#job-errors").inner_text()
    dash.worker()
    page.click('button[data-action="retry"]')
    wait_until(lambda: status_of(page) == "succeeded", 20, "the retried job to succeed")
    assert RUNS["retry-me"] == 2
    assert "ran 2 times" in page.locator("#job").inner_text()


def test_the_overview_chart_updates_while_jobs_run(dash: Dash) -> None:
    page = dash.page(ADMIN, "/")
    chart = page.locator("#chart-outcomes svg")
    chart.wait_for()
    assert chart.get_attribute("data-total-succeeded") == "0"
    page.evaluate("window.__same_document = true")
    dash.worker()
    add = dash.app.tasks["t.add"]
    for i in range(5):
        add.enqueue(i, i)
    wait_until(
        lambda: page.locator("#chart-outcomes svg").get_attribute("data-total-succeeded") == "5",
        20,
        "the chart to count 5 successes",
    )
    assert page.evaluate("window.__same_document") is True
    boom = dash.app.tasks["t.boom"].enqueue("x")
    wait_until(
        lambda: page.locator("#chart-outcomes svg").get_attribute("data-total-failed") == "1",
        20,
        "the chart to count the failure",
    )
    assert dash.app.get_job(boom.id).status == "failed"
    page.click("#view .range a:has-text('24 h')")
    page.wait_for_selector("text=Outcomes per minute (last 24 h)")
    assert page.locator("#chart-outcomes svg").get_attribute("data-total-succeeded") == "5"


def test_an_xss_payload_in_arguments_and_errors_renders_as_text(dash: Dash) -> None:
    job = dash.app.tasks["t.boom"].enqueue(XSS_ARG + XSS_ERROR)
    dash.run_all()
    page = dash.page(ADMIN, f"/jobs/{job.id}")
    page.wait_for_selector("#job-errors")
    assert XSS_ARG in page.locator("#job-args").inner_text()
    assert XSS_ERROR in page.locator("#job-errors .error-message").inner_text()
    page.goto(f"{dash.url}/jobs?status=failed")
    page.wait_for_selector(f'tr[data-id="{job.id}"]')
    for path in (XSS_ARG, quote(XSS_ARG, safe="")):  # as typed, and as the page links it
        page.goto(f"{dash.url}/key/{path}")
        page.wait_for_selector("#entity-key")
        assert page.locator("#entity-key").inner_text() == XSS_ARG
    assert page.locator("img, script:not([src]), svg[onload]").count() == 0
    assert dash.dialogs == []


def test_a_read_token_sees_no_admin_buttons(dash: Dash) -> None:
    job = dash.app.tasks["t.boom"].enqueue("nope")
    dash.run_all()
    page = dash.page(READ, f"/jobs/{job.id}")
    page.wait_for_selector("#job-errors")
    assert page.locator("#who .role").inner_text() == "read"
    assert page.locator("button.action").count() == 0
    page.goto(f"{dash.url}/jobs?status=failed")
    page.wait_for_selector(f'tr[data-id="{job.id}"]')
    assert page.locator("#bulk-retry").count() == 0
    # And the API refuses the action anyway, CSRF header or not.
    status = page.evaluate(
        """async (id) => {
            const csrf = (await (await fetch("api/v1/session")).json()).csrf;
            const headers = {"X-Duly-CSRF": csrf};
            return (await fetch(`api/v1/jobs/${id}/retry`, {method: "POST", headers})).status;
        }""",
        job.id,
    )
    assert status == 403
    assert dash.app.get_job(job.id).status == "failed"


def test_admin_post_without_the_csrf_header_is_refused(dash: Dash) -> None:
    job = dash.app.tasks["t.boom"].enqueue("csrf")
    dash.run_all()
    page = dash.page(ADMIN, f"/jobs/{job.id}")
    page.wait_for_selector("#job-errors")
    status = page.evaluate(
        "async (id) => (await fetch(`api/v1/jobs/${id}/retry`, {method: 'POST'})).status", job.id
    )
    assert status == 403
    assert dash.app.get_job(job.id).status == "failed"


def test_bulk_retry_reruns_every_failed_job_of_the_filter(dash: Dash) -> None:
    once = dash.app.tasks["t.once"]
    jobs = [once.enqueue(f"bulk-{i}") for i in range(3)]
    other = dash.app.tasks["t.boom"].enqueue("not this task")
    dash.run_all()
    page = dash.page(ADMIN, "/jobs?status=failed&task=t.once")
    page.wait_for_selector(f'tr[data-id="{jobs[0].id}"]')
    assert page.locator(f'tr[data-id="{other.id}"]').count() == 0
    page.click("#bulk-retry")
    assert page.locator("#bulk-retry").inner_text() == "Click again to confirm"
    page.click("#bulk-retry")
    page.wait_for_selector("text=3 job(s) retried")
    dash.run_all()
    assert [dash.app.get_job(j.id).status for j in jobs] == ["succeeded"] * 3
    assert dash.app.get_job(other.id).status == "failed"


def test_the_key_page_shows_the_jobs_watches_and_scopes_of_one_key(make_dash: Any) -> None:
    def setup(app: Any) -> None:
        @app.watch(name="t.unshipped")
        def unshipped(user: str, order_id: int) -> None:
            return None

        app.freshness("profiles", sync=lambda scope, full: None, max_staleness=timedelta(minutes=5))

    dash = make_dash(setup=setup)
    app = dash.app
    mine = app.tasks["t.add"].options(key="user:7").enqueue(1, 2)
    theirs = app.tasks["t.add"].options(key="user:8").enqueue(1, 2)
    app.tasks["t.unshipped"].options(delay=timedelta(hours=1)).start(user="user:7", order_id=42)
    app.tasks["t.unshipped"].options(delay=timedelta(hours=1)).start(user="user:8", order_id=43)
    app.mirrors["profiles"].check("user:7")
    page = dash.page(ADMIN, "/key/user:7")
    page.wait_for_selector(f'#key-jobs tr[data-id="{mine.id}"]')
    assert page.locator(f'#key-jobs tr[data-id="{theirs.id}"]').count() == 0
    watches = page.locator("#key-watches").inner_text()
    # (the arguments, not bare digits: a job id may contain "43")
    assert "t.unshipped" in watches and "order_id=42" in watches
    assert "order_id=43" not in watches and 'user="user:8"' not in watches
    page.wait_for_selector("#key-scopes .scope")
    assert page.locator("#key-scopes .scope h3").all_inner_texts() == ["profiles"]
    # check() of a never-synced scope enqueued its sync job: the scope links to it.
    sync = app.jobs(key="freshness:profiles:user:7")[0]
    assert page.locator(f'#key-scopes a[href="jobs/{sync.id}"]').count() == 1


def test_the_page_works_mounted_under_a_path(make_dash: Any) -> None:
    dash = make_dash(mount="/ops/duly")
    first = dash.app.tasks["t.add"].enqueue(1, 1)
    page = dash.page(ADMIN, "/jobs")  # next= is relative to the mount
    assert page.url == f"{dash.url}/jobs"
    page.wait_for_selector(f'tr[data-id="{first.id}"]')
    second = dash.app.tasks["t.add"].enqueue(2, 2)  # the event stream works there too
    page.wait_for_selector(f'tr[data-id="{second.id}"]')
    page.click(f'tr[data-id="{first.id}"] a[href^="jobs/"]')
    page.wait_for_selector("#job-id")
    assert page.url == f"{dash.url}/jobs/{first.id}"
    page.click("#nav a[data-section='queues']")
    page.wait_for_selector("table.grid")
    assert page.url == f"{dash.url}/queues"
    page.reload()  # a history route answers the page itself
    page.wait_for_selector("table.grid")


def test_every_page_renders_without_a_script_error(make_dash: Any) -> None:
    def setup(app: Any) -> None:
        @app.periodic(every=300, name="t.tick")
        def tick() -> None:
            return None

        @app.watch(name="t.unshipped")
        def unshipped(user: str, order_id: int) -> None:
            return None

        app.freshness("profiles", sync=lambda scope, full: None, max_staleness=timedelta(minutes=5))

    dash = make_dash(setup=setup)
    app = dash.app
    app.tasks["t.unshipped"].options(delay=timedelta(hours=1)).start(user="user:7", order_id=42)
    app.mirrors["profiles"].check("user:7")
    group = app.group([app.tasks["t.add"].s(i, i) for i in range(3)], key="batch:1")
    dash.run_all()
    page = dash.page(ADMIN, "/")
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 500 else None)

    def console(message: Any) -> None:
        # A 4xx the page expects (the key page probes a route an older server lacks) is
        # logged by Chromium as "Failed to load resource"; script errors are what counts.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            errors.append(message.text)

    page.on("console", console)
    expected = {
        "/": "#chart-outcomes svg",
        "/queues": "table.grid",
        "/workers": "#view .card",
        "/jobs": "#job-list table",
        "/periodic": "text=every 5m",
        "/watches": "text=t.unshipped",
        "/watches?active=false": "#view .card",
        "/groups": "#group-lookup",
        f"/groups/{group.id}": "text=3 of 3 settled",
        "/workflows": "#workflow-lookup",
        "/freshness": "text=profiles",
        "/freshness/profiles": "text=user:7",
        "/key/batch:1": "#key-jobs table",
    }
    for path, ready in expected.items():
        page.goto(dash.url + path)
        page.wait_for_selector(ready)
        assert page.locator(".error-box").count() == 0, path
    # "Refresh now" on a scope (admin): a sync is enqueued, the row links to it.
    page.goto(dash.url + "/freshness/profiles")
    page.click("button[data-action='refresh now']")
    sync = wait_until(lambda: [j for j in app.jobs(task="freshness.profiles") if not j.finished])
    page.wait_for_selector(f'#view a[href="jobs/{sync[0].id}"]')
    assert errors == []
    assert dash.dialogs == []


def test_a_workflow_page_shows_its_steps_and_a_job_page_its_dependencies(dash: Dash) -> None:
    app = dash.app
    add, once = app.tasks["t.add"], app.tasks["t.once"]
    wf = app.chain(add.s(1, 2), once.si("chain-step"), add.si(5, 5))
    first, second, third = (j.id for j in wf.jobs)
    page = dash.page(ADMIN, f"/workflows/{wf.id}")
    page.wait_for_selector("#workflow-steps table")
    assert page.locator("#workflow").get_attribute("data-status") == "running"
    rows = page.locator("#workflow-steps tbody tr")
    assert rows.count() == 3
    assert "queued" in rows.nth(0).inner_text() and "scheduled" in rows.nth(1).inner_text()
    page.locator(f'#workflow-steps tr[data-id="{second}"] a[href="jobs/{first}"]').wait_for()
    dash.run_all()  # t.once fails its first run: the third step is cancelled
    wait_until(
        lambda: page.locator("#workflow").get_attribute("data-status") == "failed",
        20,
        "the workflow page to show the failure",
    )
    assert "DependencyFailed" in rows.nth(2).inner_text()
    # The job page of the middle step: what it waits for, and what waits for it, as links.
    page.click(f'#workflow-steps tr[data-id="{second}"] td a[href="jobs/{second}"]')
    page.wait_for_selector("#job-after")
    assert page.locator(f'#job-after a[href="jobs/{first}"]').count() == 1
    assert page.locator(f'#job-dependents a[href="jobs/{third}"]').count() == 1
