"""Freshness (PRODUCT §7) through the public surface, on every backend: the sync task runs in a
worker, the scope turns current, tiers, backoff capped under a ManualClock, Throttled, the
worker's baseline sweep, fingerprints and bad input."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import duly
from duly._freshness import sweep
from duly.testing import run_jobs

pytestmark = pytest.mark.timeout(60)

T = 1_800_000_000.0


def swept(app: duly.App) -> int:
    """Run one baseline sweep at the app's clock; the syncs it enqueued."""

    async def main() -> int:
        try:
            return await sweep(app, await app.backend(), app.clock.now())
        finally:
            await app.aclose()

    return app._sync(main())


def test_a_checked_scope_is_synced_by_a_worker_and_becomes_current(
    make_app: Callable[..., duly.App],
) -> None:
    clock = duly.ManualClock(T)
    app = make_app(clock=clock)
    calls: list[tuple[str, bool]] = []

    def sync_environments(scope: str, full: bool) -> None:
        calls.append((scope, full))

    envs = app.freshness(
        "environments",
        sync=sync_environments,
        max_staleness=timedelta(minutes=10),
        full_every=timedelta(hours=1),
        max_backoff=timedelta(minutes=5),
    )
    f = envs.check("team:7", active=True)
    assert (f.state, f.score, f.last_synced_at, f.syncing) == ("never", math.inf, None, True)
    assert f.job is not None and not f.job.deduplicated
    again = envs.check("team:7")
    assert again.job == f.job and again.job is not None and again.job.deduplicated
    info = f.job.info()
    assert info is not None and info.task == "freshness.environments"
    assert (info.args, info.key) == (["team:7", True], "freshness:environments:team:7")

    run_jobs(app)
    assert calls == [("team:7", True)]
    now = envs.check("team:7", active=True)
    assert (now.state, now.score, now.syncing, now.job) == ("current", 0.0, False, None)
    assert now.last_synced_at == datetime.fromtimestamp(T, UTC)

    clock.advance(6 * 60)  # score 0.6: a delta sync for an active team only
    assert envs.check("team:7").job is None
    half = envs.check("team:7", active=True)
    assert half.state == "current" and half.score == pytest.approx(0.6)
    assert half.job is not None
    run_jobs(app)
    assert calls[-1] == ("team:7", False)

    clock.advance(11 * 60)
    stale = envs.check("team:7")
    assert stale.state == "stale" and stale.score == pytest.approx(11 / 10)
    assert stale.job is not None and stale.syncing
    [listed] = envs.scopes(stale_only=True)
    assert listed.scope == "team:7" and listed.requested_by == "check"
    assert listed.to_dict()["state"] == "stale"


def test_tiers_request_touch_and_listing(make_app: Callable[..., duly.App]) -> None:
    clock = duly.ManualClock(T)
    app = make_app(clock=clock)
    calls: list[tuple[str, bool]] = []

    async def sync_nodes(scope: str, full: bool) -> None:
        calls.append((scope, full))

    def tier(scope: str) -> timedelta:
        return timedelta(minutes=1) if scope.startswith("gold:") else timedelta(hours=1)

    nodes = app.freshness(
        "nodes", sync=sync_nodes, max_staleness=tier, queue="sync", rate_limit="100/s"
    )
    assert nodes.task.config.queue == "sync"
    assert nodes.task.config.limits is not None and nodes.task.config.limits.rate is not None
    for scope in ("gold:1", "free:1"):
        nodes.check(scope)
    run_jobs(app, queues=["sync"])
    clock.advance(120)
    assert nodes.check("gold:1").state == "stale"
    assert nodes.check("free:1").state == "current"
    assert [f.scope for f in nodes.scopes()] == ["gold:1", "free:1"]
    assert [f.scope for f in nodes.scopes(stale_only=True)] == ["gold:1"]
    run_jobs(app, queues=["sync"])

    requested = nodes.request("free:1")  # current, but an admin asks
    assert requested.job is not None and not requested.job.deduplicated
    assert nodes.request("free:1").job == requested.job
    run_jobs(app, queues=["sync"])
    assert calls[-1] == ("free:1", True)
    touched = nodes.touch("free:1")
    assert touched.job is not None and touched.requested_by == "touch"
    run_jobs(app, queues=["sync"])
    assert calls[-1] == ("free:1", False)


def test_failures_back_off_up_to_max_backoff_under_a_manual_clock(
    make_app: Callable[..., duly.App],
) -> None:
    clock = duly.ManualClock(T)
    app = make_app(clock=clock)
    attempts: list[float] = []

    def sync_snapshots(scope: str, full: bool) -> None:
        attempts.append(clock.now())
        raise ConnectionError("upstream is down")

    snaps = app.freshness(
        "snapshots",
        sync=sync_snapshots,
        max_staleness=timedelta(minutes=10),
        max_backoff=timedelta(seconds=40),
    )
    snaps.check("team:1")
    waits = []
    for failures in range(1, 9):
        run_jobs(app)
        [f] = snaps.scopes()
        assert (f.failures, f.state, f.syncing) == (failures, "never", False)
        assert f.last_error == "ConnectionError: upstream is down"
        assert f.next_due is not None
        wait = f.next_due.timestamp() - clock.now()
        assert 0 < wait <= 40
        waits.append(wait)
        assert snaps.check("team:1").job is None  # backing off: no sync before next_due
        assert swept(app) == 0
        clock.advance(wait + 0.001)  # next_due read back rounded to the microsecond
        assert swept(app) == 1  # due: the sweep starts the next attempt
    assert len(attempts) == 8
    assert waits[-1] >= 20  # 2**7 s capped at 40 s, jitter at most halves it
    assert waits[0] <= 1


def test_a_retried_sync_counts_its_failure_and_stays_the_scopes_sync(
    make_app: Callable[..., duly.App],
) -> None:
    app = make_app()
    runs: list[bool] = []

    def sync_envs(scope: str, full: bool) -> None:
        runs.append(full)
        if len(runs) == 1:
            raise TimeoutError("read timed out")

    envs = app.freshness(
        "envs",
        sync=sync_envs,
        max_staleness=timedelta(minutes=10),
        retries=1,
        backoff=duly.Backoff(base=0.05, cap=0.05),
        timeout=30,
    )
    f = envs.check("team:4")
    assert f.job is not None
    run_jobs(app, [f.job])
    assert runs == [True, True]
    info = f.job.info()
    assert info is not None and (info.status, info.attempts) == ("succeeded", 2)
    now = envs.check("team:4")
    assert (now.state, now.failures, now.last_error, now.syncing) == ("current", 0, None, False)


def test_throttled_defers_the_sync_without_failing(make_app: Callable[..., duly.App]) -> None:
    app = make_app()
    seen: list[str] = []

    def sync_envs(scope: str, full: bool) -> None:
        seen.append(scope)
        if len(seen) == 1:
            raise duly.Throttled(retry_after=0.2)  # the upstream answered 429

    envs = app.freshness("envs", sync=sync_envs, max_staleness=timedelta(minutes=10))
    f = envs.check("team:3")
    assert f.job is not None
    run_jobs(app, [f.job])
    assert seen == ["team:3", "team:3"]
    now = envs.check("team:3")
    assert (now.state, now.failures, now.last_error) == ("current", 0, None)
    info = f.job.info()
    assert info is not None and info.status == "succeeded"


def test_the_worker_sweeps_baseline_syncs(
    make_app: Callable[..., duly.App],
    worker_thread: Callable[..., Any],
    wait: Callable[..., Any],
) -> None:
    app = make_app()
    calls: list[bool] = []

    def sync_envs(scope: str, full: bool) -> None:
        calls.append(full)

    envs = app.freshness(
        "envs", sync=sync_envs, max_staleness=timedelta(hours=1), full_every=timedelta(seconds=1)
    )
    envs.check("team:5")
    with worker_thread(app):
        wait(lambda: len(calls) >= 3, timeout=20)  # the first, then baselines every second
    assert all(calls)
    assert envs.scopes()[0].requested_by == "baseline"


def test_fingerprint_is_canonical() -> None:
    a = duly.fingerprint({"id": 1, "name": "env", "nodes": [1, 2]})
    b = duly.fingerprint({"nodes": [1, 2], "name": "env", "id": 1})
    assert a == b and len(a) == 64 and int(a, 16) >= 0
    assert duly.fingerprint({"id": 1, "name": "env", "nodes": [2, 1]}) != a


def test_bad_input_is_a_clear_error(app: duly.App) -> None:
    def sync(scope: str, full: bool) -> None:
        return None

    with pytest.raises(ValueError, match="max_staleness"):
        app.freshness("x", sync=sync, max_staleness=timedelta(0))
    with pytest.raises(ValueError, match="full_every"):
        app.freshness("x", sync=sync, max_staleness=60, full_every=-1)
    with pytest.raises(ValueError, match="name"):
        app.freshness("", sync=sync, max_staleness=60)
    with pytest.raises(duly.ConfigurationError, match="drop mutex, unique"):
        app.freshness("x", sync=sync, max_staleness=60, unique=True, mutex="m")
    envs = app.freshness("x", sync=sync, max_staleness=60)
    with pytest.raises(duly.ConfigurationError, match="already"):
        app.freshness("x", sync=sync, max_staleness=60)
    for scope in ("", "a\x1fb", "x" * 401, 7):
        with pytest.raises(ValueError, match="scope"):
            envs.check(scope)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit"):
        envs.scopes(limit=0)
    bad = app.freshness("y", sync=sync, max_staleness=lambda scope: timedelta(seconds=-1))
    with pytest.raises(ValueError, match="max_staleness"):
        bad.check("team:1")
    assert envs.scopes() == [] and bad.scopes() == []  # nothing stored by the failed calls


def test_metrics_report_breaches_staleness_and_score_per_freshness(
    make_app: Callable[..., duly.App],
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from duly.observability import metrics_text

    clock = duly.ManualClock(T)
    app = make_app(clock=clock)

    def sync(scope: str, full: bool) -> None:
        return None

    envs = app.freshness("envs", sync=sync, max_staleness=timedelta(minutes=10))
    app.freshness("idle", sync=sync, max_staleness=timedelta(minutes=10))
    envs.check("team:1")
    run_jobs(app)
    clock.advance(15 * 60)  # team:1 is 1.5 SLAs old; team:2 never synced
    envs.check("team:2")
    samples = {
        (s.name, s.labels.get("freshness")): s.value
        for family in text_string_to_metric_families(metrics_text(app).decode())
        for s in family.samples
        if s.name.startswith("duly_freshness_")
    }
    assert samples[("duly_freshness_sla_breaches", "envs")] == 2
    assert samples[("duly_freshness_staleness_seconds", "envs")] == math.inf  # never synced
    assert samples[("duly_freshness_score", "envs")] == math.inf
    assert samples[("duly_freshness_sla_breaches", "idle")] == 0
    assert samples[("duly_freshness_score", "idle")] == 0
    gauges = envs.gauges()
    assert (gauges.name, gauges.breaches) == ("envs", 2)
    run_jobs(app)  # team:2 synced now; team:1 is the stalest
    synced = envs.gauges()
    assert synced.breaches == 1
    assert synced.staleness == pytest.approx(15 * 60) and synced.score == pytest.approx(1.5)


def test_forget_removes_a_scope_and_its_baselines(make_app: Callable[..., duly.App]) -> None:
    """PRODUCT §17 (issue 31.2): a deleted team is forgotten: no more baselines, not listed;
    an unknown scope answers False; a bad one is refused like check's."""
    clock = duly.ManualClock(T)
    app = make_app(clock=clock)
    calls: list[str] = []

    def sync(scope: str, full: bool) -> None:
        calls.append(scope)

    envs = app.freshness("envs", sync=sync, max_staleness=60, full_every=600)
    envs.check("team:gone")
    envs.check("team:kept")
    run_jobs(app)
    assert envs.forget("team:gone") is True
    assert [f.scope for f in envs.scopes()] == ["team:kept"]
    assert envs.forget("team:gone") is False
    assert app.run_sync(envs.forget_async("team:never")) is False
    clock.advance(1200)  # two baselines due for a known scope
    assert swept(app) == 1
    run_jobs(app)
    assert calls[2:] == ["team:kept"]
    for scope in ("", "a\x1fb", 7):
        with pytest.raises(ValueError, match="scope"):
            envs.forget(scope)  # type: ignore[arg-type]


def test_a_touch_during_the_running_sync_is_followed_by_one_delta(
    make_app: Callable[..., duly.App],
    worker_thread: Callable[..., Any],
    wait: Callable[..., Any],
) -> None:
    """PRODUCT §17 (issue 31.1, seed 000): "confirm my change" while the sync runs is not
    absorbed: one delta sync runs after it, however many touches came meanwhile."""
    import threading

    app = make_app()
    calls: list[tuple[str, bool]] = []
    release = threading.Event()

    def sync(scope: str, full: bool) -> None:
        calls.append((scope, full))
        if len(calls) == 1:
            release.wait(20)

    envs = app.freshness("envs", sync=sync, max_staleness=3600)
    first = envs.check("team:7").job
    assert first is not None
    with worker_thread(app):
        wait(lambda: len(calls) == 1)
        touched = envs.touch("team:7")
        again = envs.touch("team:7")
        assert touched.job is not None and not touched.job.deduplicated
        assert touched.job != first and again.job == touched.job and again.job is not None
        assert again.job.deduplicated and touched.syncing
        release.set()
        info = touched.job.wait(timeout=20)
    assert info.status == "succeeded" and info.args == ["team:7", False]
    assert calls == [("team:7", True), ("team:7", False)]
    assert envs.scopes()[0].requested_by == "touch"
