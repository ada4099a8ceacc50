"""Freshness (PRODUCT §7): per-scope state that changes with its sync job, on every backend.

The rules (duly.freshness_state.decide): one active sync per scope; a check enqueues a full
sync at score >= 1 or never synced, a delta at 0.5 <= score < 1 when active; backoff after a
failure; baseline syncs from a due index. The sync job's finish / recover / cancel update the
scope in the same step.
"""

from __future__ import annotations

import asyncio

import pytest
from contract import (
    LEASE,
    T0,
    W1,
    BackendFactory,
    approx,
    claim_ids,
    error_history,
    finish_one,
    in_own_thread,
    job,
    new_job,
    opened,
    status,
)

from duly._freshness_state import FreshnessRequest, Reason, ScopeState, backoff, next_baseline
from duly._records import Outcome
from duly.backends.base import Backend

pytestmark = pytest.mark.timeout(60)

NAME = "envs"
TASK = "freshness.envs"
MS = 600.0  # max_staleness
FE = 3600.0  # full_every
MB = 300.0  # max_backoff


def full(scope: str) -> bytes:
    return b'{"args":["' + scope.encode() + b'",true],"kwargs":{}}'


def delta(scope: str) -> bytes:
    return b'{"args":["' + scope.encode() + b'",false],"kwargs":{}}'


def request(
    scope: str,
    reason: Reason = "check",
    *,
    now: float,
    active: bool = False,
    ms: float = MS,
    offset: float = 0.0,
    jitter: float = 0.5,
    name: str = NAME,
) -> FreshnessRequest:
    """A request on ``scope`` at ``now`` whose sync job (if stored) is a fresh one."""
    job = new_job(task=TASK, payload=full(scope), at=now, key=f"freshness:{name}:{scope}")
    job.max_attempts = 1
    return FreshnessRequest(
        name=name,
        scope=scope,
        reason=reason,
        active=active,
        max_staleness=ms,
        full_every=FE,
        max_backoff=MB,
        offset=offset,
        jitter=jitter,
        job=job,
        delta_payload=delta(scope),
    )


async def sync(backend: Backend, scope: str, reason: Reason = "check", **kw: object) -> ScopeState:
    now = kw.pop("now")
    assert isinstance(now, float)
    [state] = await backend.freshness.sync([request(scope, reason, now=now, **kw)], now)  # type: ignore[arg-type]
    return state


async def run_sync(
    backend: Backend, job_id: str, *, start: float, end: float, kind: str = "succeeded"
) -> None:
    """Claim the sync job at ``start`` and finish it at ``end`` with ``kind``."""
    assert await claim_ids(backend, now=start) == [job_id]
    errors = error_history(("ValueError", "upstream said 503")) if kind != "succeeded" else None
    outcome = Outcome(job_id, kind, None, errors, None, end + 1000)  # type: ignore[arg-type]
    assert await finish_one(backend, W1, outcome, end)


async def test_first_check_enqueues_one_full_sync_and_later_checks_get_it(
    backend: Backend,
) -> None:
    first = await sync(backend, "team:7", now=T0)
    assert first.enqueued and first.job_id is not None
    assert (first.last_success, first.requested_by, first.failures) == (None, "check", 0)
    assert first.next_due == approx(next_baseline(T0, 0.0, FE))
    record = await job(backend, first.job_id)
    assert (record.status, record.task, record.payload) == ("queued", TASK, full("team:7"))
    assert record.priority == 100  # never synced: the most urgent
    assert record.key == "freshness:envs:team:7"

    again = await sync(backend, "team:7", "request", now=T0 + 1)
    assert (again.enqueued, again.job_id) == (False, first.job_id)
    touched = await sync(backend, "team:7", "touch", now=T0 + 2)
    assert (touched.enqueued, touched.job_id) == (False, first.job_id)


async def test_the_sync_a_check_enqueues_emits_its_queued_event(backend: Backend) -> None:
    """As an enqueue does: a "refreshing..." view following the events sees the sync (issue
    31.1: Redis emitted none)."""
    _, cursor = await backend.events.read(None, None, 1)
    state = await sync(backend, "team:3", now=T0)
    assert state.enqueued and state.job_id is not None
    events, _ = await backend.events.read(cursor, None, 10)
    assert [(e.job_id, e.status, e.task, e.queue, e.key) for e in events] == [
        (state.job_id, "queued", TASK, "default", "freshness:envs:team:3")
    ]
    keyed, _ = await backend.events.read(cursor, "freshness:envs:team:3", 10)
    assert [(e.job_id, e.status) for e in keyed] == [(state.job_id, "queued")]
    again = await sync(backend, "team:3", "touch", now=T0 + 1)
    assert not again.enqueued
    assert (await backend.events.read(events[-1].id, None, 10))[0] == []


async def test_a_storm_of_concurrent_checks_makes_one_job(
    backend: Backend, make_backend: BackendFactory
) -> None:
    async def storm(count: int) -> list[ScopeState]:
        async with opened(make_backend()) as other:
            calls = [other.freshness.sync([request("team:9", now=T0)], T0) for _ in range(count)]
            return [state for states in await asyncio.gather(*calls) for state in states]

    results = await asyncio.gather(*(in_own_thread(storm(25)) for _ in range(4)))
    states = [state for batch in results for state in batch]
    assert len(states) == 100
    assert sum(state.enqueued for state in states) == 1
    assert len({state.job_id for state in states}) == 1
    queued = await backend.claim(W1, ["default"], 10, T0, T0 + LEASE)
    assert [r.id for r in queued] == [states[0].job_id]


async def test_success_records_the_start_of_the_run_and_the_score_rules(
    backend: Backend,
) -> None:
    first = await sync(backend, "s", now=T0)
    assert first.job_id is not None
    await run_sync(backend, first.job_id, start=T0 + 10, end=T0 + 70)
    [row] = await backend.freshness.scopes(NAME, T0 + 70, False, 10)
    assert row.last_success == approx(T0 + 10)  # staleness counts from the start
    assert row.last_attempt == approx(T0 + 10)
    assert (row.failures, row.last_error, row.job_id) == (0, None, None)
    assert row.next_due == approx(next_baseline(T0 + 70, 0.0, FE))

    young = T0 + 10 + 0.4 * MS
    assert not (await sync(backend, "s", now=young, active=True)).enqueued
    half = T0 + 10 + 0.6 * MS
    assert not (await sync(backend, "s", now=half)).enqueued  # not active: nothing
    delta_sync = await sync(backend, "s", now=half, active=True)
    assert delta_sync.enqueued and delta_sync.job_id is not None
    record = await job(backend, delta_sync.job_id)
    assert (record.payload, record.priority) == (delta("s"), 6)  # priority = 10 * score
    await run_sync(backend, delta_sync.job_id, start=half, end=half + 1)

    stale = half + MS
    full_sync = await sync(backend, "s", now=stale)
    assert full_sync.enqueued and full_sync.job_id is not None
    record = await job(backend, full_sync.job_id)
    assert (record.payload, record.priority) == (full("s"), 10)


async def test_request_syncs_a_current_scope_and_touch_confirms_with_a_delta(
    backend: Backend,
) -> None:
    first = await sync(backend, "s", now=T0)
    assert first.job_id is not None
    await run_sync(backend, first.job_id, start=T0, end=T0 + 1)
    now = T0 + 5
    assert not (await sync(backend, "s", now=now, active=True)).enqueued  # current
    requested = await sync(backend, "s", "request", now=now)
    assert requested.enqueued and requested.requested_by == "request"
    assert requested.job_id is not None
    assert (await job(backend, requested.job_id)).payload == full("s")
    await run_sync(backend, requested.job_id, start=now, end=now + 1)
    touched = await sync(backend, "s", "touch", now=now + 2)
    assert touched.enqueued and touched.requested_by == "touch"
    assert touched.job_id is not None
    assert (await job(backend, touched.job_id)).payload == delta("s")


async def test_failures_back_off_exponentially_up_to_the_cap(backend: Backend) -> None:
    now = T0
    jitter = 0.5
    state = await sync(backend, "s", now=now, jitter=jitter)
    for failures in range(1, 13):
        assert state.enqueued and state.job_id is not None
        await run_sync(backend, state.job_id, start=now, end=now + 1, kind="failed")
        [row] = await backend.freshness.scopes(NAME, now + 1, False, 10)
        assert (row.failures, row.job_id, row.last_success) == (failures, None, None)
        assert row.last_error == "ValueError: upstream said 503"
        assert row.next_due is not None
        wait = row.next_due - (now + 1)
        assert wait == approx(backoff(failures, MB, jitter))
        assert wait <= MB
        # A check during the backoff enqueues nothing, however stale the scope.
        assert not (await sync(backend, "s", now=row.next_due - 0.5)).enqueued
        assert await backend.freshness.due(NAME, row.next_due - 0.5, 10) == []
        # Once due, the sweep finds it and its baseline request enqueues the next attempt.
        now = row.next_due
        assert await backend.freshness.due(NAME, now, 10) == ["s"]
        state = await sync(backend, "s", "baseline", now=now, jitter=jitter)
    assert wait == approx(MB * (0.5 + 0.5 * jitter))  # capped


async def test_a_retry_counts_a_failure_and_keeps_the_sync(backend: Backend) -> None:
    state = await sync(backend, "s", now=T0)
    assert state.job_id is not None
    assert await claim_ids(backend, now=T0) == [state.job_id]
    errors = error_history(("TimeoutError", "read timed out"))
    retry = Outcome(state.job_id, "retry", None, errors, T0 + 5, None)
    assert await finish_one(backend, W1, retry, T0 + 1)
    [row] = await backend.freshness.scopes(NAME, T0 + 1, False, 10)
    assert (row.failures, row.last_error) == (1, "TimeoutError: read timed out")
    assert row.job_id == state.job_id  # still its sync: checks are absorbed
    assert not (await sync(backend, "s", "request", now=T0 + 2)).enqueued
    await backend.promote_due(T0 + 5, 10)
    await run_sync(backend, state.job_id, start=T0 + 5, end=T0 + 6)
    [row] = await backend.freshness.scopes(NAME, T0 + 6, False, 10)
    assert (row.failures, row.last_error, row.job_id) == (0, None, None)
    assert row.last_success == approx(T0 + 5)


async def test_a_worker_crash_mid_sync_is_recovered_then_quarantined(backend: Backend) -> None:
    state = await sync(backend, "s", now=T0)
    assert state.job_id is not None
    assert await claim_ids(backend, now=T0) == [state.job_id]
    # The worker dies: its lease lapses; the job is requeued and the scope stays busy.
    [recovered] = await backend.recover(T0 + LEASE + 1, 2, 10, T0 + 9999)
    assert recovered.requeued
    again = await sync(backend, "s", now=T0 + LEASE + 2)
    assert (again.enqueued, again.job_id) == (False, state.job_id)
    # The second worker dies too: quarantined, and the scope fails with it, in the same step.
    start = T0 + LEASE + 3
    assert await claim_ids(backend, now=start) == [state.job_id]
    [quarantined] = await backend.recover(start + LEASE + 1, 2, 10, T0 + 9999)
    assert not quarantined.requeued
    assert await status(backend, state.job_id) == "failed"
    [row] = await backend.freshness.scopes(NAME, start + LEASE + 1, False, 10)
    assert (row.failures, row.job_id) == (1, None)
    assert row.last_error is not None and row.last_error.startswith("LostWorker: ")
    assert row.last_attempt == approx(start)
    assert row.next_due == approx(start + LEASE + 1 + backoff(1, MB, 0.5))


async def test_a_cancelled_sync_frees_its_scope(backend: Backend) -> None:
    waiting = await sync(backend, "s", now=T0)
    assert waiting.job_id is not None
    assert await backend.cancel(waiting.job_id, T0 + 1, T0 + 999)
    [row] = await backend.freshness.scopes(NAME, T0 + 1, False, 10)
    assert (row.job_id, row.last_error, row.failures) == (None, "cancelled", 0)

    running = await sync(backend, "s", now=T0 + 2)
    assert running.enqueued and running.job_id is not None
    assert await claim_ids(backend, now=T0 + 2) == [running.job_id]
    assert await backend.cancel(running.job_id, T0 + 3, T0 + 999)  # requested: it runs on
    [row] = await backend.freshness.scopes(NAME, T0 + 3, False, 10)
    assert row.job_id == running.job_id
    outcome = Outcome(running.job_id, "succeeded", None, None, None, T0 + 999)
    assert not await finish_one(backend, W1, outcome, T0 + 4)  # ends cancelled instead
    [row] = await backend.freshness.scopes(NAME, T0 + 4, False, 10)
    assert (row.job_id, row.last_error, row.last_success) == (None, "cancelled", None)


async def test_the_due_index_returns_only_due_scopes_and_baseline_moves_them(
    backend: Backend,
) -> None:
    offsets = {"a": 100.0, "b": 200.0, "c": 3000.0}
    for scope, offset in offsets.items():
        state = await sync(backend, scope, now=T0, offset=offset)
        assert state.job_id is not None
        await run_sync(backend, state.job_id, start=T0, end=T0)
    first = {scope: next_baseline(T0, off, FE) for scope, off in offsets.items()}
    earliest = min(first.values())
    assert await backend.freshness.due(NAME, earliest - 1, 10) == []
    due = await backend.freshness.due(NAME, earliest, 10)
    assert due == [min(first, key=first.__getitem__)]
    everything = await backend.freshness.due(NAME, T0 + FE + 1, 10)
    assert sorted(everything) == ["a", "b", "c"]
    assert len(await backend.freshness.due(NAME, T0 + FE + 1, 2)) == 2  # limit
    assert await backend.freshness.due("other", T0 + FE + 1, 10) == []  # per freshness
    other_name = await sync(backend, "a", now=T0, offset=100.0, name="other")
    assert other_name.enqueued  # the same scope of another freshness is another scope

    scope = due[0]
    baseline = await sync(backend, scope, "baseline", now=earliest, offset=offsets[scope])
    assert baseline.enqueued and baseline.requested_by == "baseline"
    assert baseline.next_due == approx(next_baseline(earliest, offsets[scope], FE))
    assert baseline.job_id is not None
    assert (await job(backend, baseline.job_id)).payload == full(scope)
    assert scope not in await backend.freshness.due(NAME, earliest, 10)
    # A baseline request of a scope not due yet changes nothing.
    other = "c" if scope != "c" else "a"
    assert not (await sync(backend, other, "baseline", now=earliest)).enqueued


async def test_scopes_list_stalest_first_with_tiers(backend: Backend) -> None:
    tiers = {"gold": 60.0, "free": 6000.0, "never": 60.0}
    for scope, ms in tiers.items():
        state = await sync(backend, scope, now=T0, ms=ms)
        assert state.job_id is not None
        if scope != "never":
            await run_sync(backend, state.job_id, start=T0, end=T0)
    now = T0 + 120  # gold: score 2 (stale); free: 0.02; never: inf
    listed = await backend.freshness.scopes(NAME, now, False, 10)
    assert [s.scope for s in listed] == ["never", "gold", "free"]
    assert [s.max_staleness for s in listed] == [60.0, 60.0, 6000.0]
    stale = await backend.freshness.scopes(NAME, now, True, 10)
    assert [s.scope for s in stale] == ["never", "gold"]
    assert await backend.freshness.stale_count(NAME, now) == 2
    assert await backend.freshness.stale_count(NAME, T0 + 6000) == 3
    assert await backend.freshness.stale_count("other", now) == 0
    assert await backend.freshness.scopes("other", now, False, 10) == []
    # The tier decides the rule: the gold scope is stale, the free one is not.
    assert (await sync(backend, "gold", now=now, ms=60.0)).enqueued
    assert not (await sync(backend, "free", now=now, ms=6000.0, active=True)).enqueued


async def test_one_scope_is_read_as_the_listing_reads_it(backend: Backend) -> None:
    assert await backend.freshness.scope(NAME, "team:7") is None
    state = await sync(backend, "team:7", now=T0)
    assert state.job_id is not None
    await run_sync(backend, state.job_id, start=T0 + 1, end=T0 + 2, kind="failed")
    await sync(backend, "team:8", now=T0)
    [listed] = [
        s for s in await backend.freshness.scopes(NAME, T0 + 3, False, 10) if s.scope == "team:7"
    ]
    one = await backend.freshness.scope(NAME, "team:7")
    assert one == listed
    assert one is not None and one.failures == 1 and one.job_id is None and one.last_error
    assert await backend.freshness.scope("other", "team:7") is None
    assert await backend.freshness.scope(NAME, "team:9") is None


async def test_a_sync_job_is_stored_without_unique_hold_or_gate(backend: Backend) -> None:
    """The scope's row is the one-at-a-time guard of its sync: a unique hold would let another
    job's hold leave the sync out (the row naming a job never stored), a gate would park it.
    Every backend stores it without either, whatever the request's job carries (issue 31.6c:
    SQLite kept them, PostgreSQL and Redis did not)."""
    r = request("s", now=T0)
    r.job.unique_key, r.job.gate, r.job.gate_limit = "u:s", "g:s", 1
    [state] = await backend.freshness.sync([r], T0)
    assert state.enqueued and state.job_id == r.job.id
    assert await claim_ids(backend, now=T0) == [r.job.id]  # running, holding nothing
    held = new_job(at=T0)
    held.unique_key = "u:s"
    gated = new_job(at=T0)
    gated.gate, gated.gate_limit = "g:s", 1
    results = await backend.enqueue([held, gated])
    assert [(x.id, x.deduplicated) for x in results] == [(held.id, False), (gated.id, False)]
    assert sorted(await claim_ids(backend, limit=5, now=T0)) == sorted([held.id, gated.id])


async def test_forget_removes_a_scope_its_due_entry_and_its_place(backend: Backend) -> None:
    """PRODUCT §17: a deleted team's scope is forgotten (issue 31.2): no more baselines, no row,
    not listed nor counted; unknown scopes answer False; other scopes keep theirs."""
    for scope in ("gone", "kept"):
        state = await sync(backend, scope, now=T0)
        assert state.job_id is not None
        await run_sync(backend, state.job_id, start=T0, end=T0)
    await sync(backend, "gone", now=T0, name="other")  # the same scope of another freshness
    later = T0 + 2 * FE
    assert sorted(await backend.freshness.due(NAME, later, 10)) == ["gone", "kept"]

    assert await backend.freshness.forget(NAME, "gone") is True
    assert await backend.freshness.scope(NAME, "gone") is None
    assert await backend.freshness.due(NAME, later, 10) == ["kept"]
    assert [s.scope for s in await backend.freshness.scopes(NAME, later, False, 10)] == ["kept"]
    assert await backend.freshness.stale_count(NAME, later) == 1
    assert await backend.freshness.scope("other", "gone") is not None
    assert await backend.freshness.forget(NAME, "gone") is False
    assert await backend.freshness.forget(NAME, "never-seen") is False
    # Seen again, it is a new scope (never synced).
    again = await sync(backend, "gone", now=later)
    assert again.enqueued and again.last_success is None


async def test_a_forgotten_scopes_active_sync_ends_without_bringing_it_back(
    backend: Backend,
) -> None:
    state = await sync(backend, "s", now=T0)
    assert state.job_id is not None
    assert await claim_ids(backend, now=T0) == [state.job_id]
    assert await backend.freshness.forget(NAME, "s") is True
    outcome = Outcome(state.job_id, "succeeded", None, None, None, T0 + 999)
    assert await finish_one(backend, W1, outcome, T0 + 1)
    assert await status(backend, state.job_id) == "succeeded"
    assert await backend.freshness.scope(NAME, "s") is None
    assert await backend.freshness.due(NAME, T0 + 2 * FE, 10) == []


async def keyed_jobs(backend: Backend, scope: str) -> list[str]:
    """The ids of every job of the scope's sync key, oldest first."""
    from duly._records import JobFilter

    records = await backend.list_jobs(JobFilter(key=f"freshness:{NAME}:{scope}"), 100)
    return sorted(r.id for r in records)


async def test_touches_during_a_running_sync_queue_one_follow_up_delta(
    backend: Backend,
) -> None:
    """PRODUCT §17 (issue 31.1): a touch while the sync runs may follow a change the run did
    not see: one delta sync follows it (any number of touches coalesce), stored by the finish
    that records the success, with its queued event."""
    first = await sync(backend, "s", now=T0)
    assert first.job_id is not None
    queued_touch = await sync(backend, "s", "touch", now=T0 + 1)
    assert not queued_touch.enqueued and queued_touch.follow_up is None  # not started: absorbed
    assert await claim_ids(backend, now=T0 + 2) == [first.job_id]

    touched = await sync(backend, "s", "touch", now=T0 + 3)
    assert touched.enqueued and touched.job_id == first.job_id
    follow_up = touched.follow_up
    assert follow_up is not None and follow_up != first.job_id
    for at in (T0 + 4, T0 + 5):
        again = await sync(backend, "s", "touch", now=at)
        assert not again.enqueued and (again.job_id, again.follow_up) == (first.job_id, follow_up)
    assert not (await sync(backend, "s", "request", now=T0 + 5)).enqueued
    assert await keyed_jobs(backend, "s") == [first.job_id]  # nothing stored yet
    assert await claim_ids(backend, now=T0 + 5) == []

    _, cursor = await backend.events.read(None, None, 1)
    outcome = Outcome(first.job_id, "succeeded", None, None, None, T0 + 999)
    assert await finish_one(backend, W1, outcome, T0 + 6)
    record = await job(backend, follow_up)
    assert (record.status, record.payload, record.key) == ("queued", delta("s"), "freshness:envs:s")
    row = await backend.freshness.scope(NAME, "s")
    assert row is not None and (row.job_id, row.requested_by) == (follow_up, "touch")
    assert row.last_success == approx(T0 + 2)
    events, _ = await backend.events.read(cursor, None, 10)
    assert (follow_up, "queued") in [(e.job_id, e.status) for e in events]

    await run_sync(backend, follow_up, start=T0 + 7, end=T0 + 8)
    assert sorted(await keyed_jobs(backend, "s")) == sorted([first.job_id, follow_up])
    row = await backend.freshness.scope(NAME, "s")
    assert row is not None and row.job_id is None and row.last_success == approx(T0 + 7)
    assert await claim_ids(backend, now=T0 + 9) == []  # exactly one follow-up


async def test_a_failed_or_cancelled_sync_drops_its_follow_up(backend: Backend) -> None:
    """A failure backs off and its next attempt is a full sync; a cancel stops the scope's
    syncing: neither leaves a follow-up behind."""
    for kind in ("failed", "cancelled"):
        scope = f"s-{kind}"
        state = await sync(backend, scope, now=T0, jitter=0.0)
        assert state.job_id is not None
        assert await claim_ids(backend, now=T0) == [state.job_id]
        touched = await sync(backend, scope, "touch", now=T0 + 1)
        assert touched.follow_up is not None
        if kind == "failed":
            errors = error_history(("ValueError", "upstream said 503"))
            outcome = Outcome(state.job_id, "failed", None, errors, None, T0 + 1000)
            assert await finish_one(backend, W1, outcome, T0 + 2)
        else:
            assert await backend.cancel(state.job_id, T0 + 2, T0 + 999)
            outcome = Outcome(state.job_id, "succeeded", None, None, None, T0 + 999)
            await finish_one(backend, W1, outcome, T0 + 2)
        assert await status(backend, touched.follow_up) is None
        row = await backend.freshness.scope(NAME, scope)
        assert row is not None and row.job_id is None
        assert await keyed_jobs(backend, scope) == [state.job_id]
        # The follow-up is gone: the next run's success stores none.
        later = await sync(backend, scope, "request", now=T0 + 600)
        assert later.job_id is not None and later.follow_up is None
        await run_sync(backend, later.job_id, start=T0 + 600, end=T0 + 601)
        assert await keyed_jobs(backend, scope) == sorted([state.job_id, later.job_id])


async def test_touches_racing_the_end_of_the_sync_leave_exactly_one_delta(
    backend: Backend, make_backend: BackendFactory
) -> None:
    """A touch meets the running sync (a follow-up stored at its finish) or the free scope
    (a delta of its own), never the gap between: one delta sync after the run, whatever the
    interleaving (issue 31.1: atomic on every backend)."""
    state = await sync(backend, "s", now=T0)
    assert state.job_id is not None
    assert await claim_ids(backend, now=T0) == [state.job_id]

    async def touches(count: int) -> None:
        async with opened(make_backend()) as other:
            for _ in range(count):
                await other.freshness.sync([request("s", "touch", now=T0 + 1)], T0 + 1)

    async def end() -> None:
        async with opened(make_backend()) as other:
            outcome = Outcome(state.job_id or "", "succeeded", None, None, None, T0 + 999)
            assert await finish_one(other, W1, outcome, T0 + 1)

    await asyncio.gather(
        in_own_thread(touches(10)), in_own_thread(end()), in_own_thread(touches(10))
    )
    ids = await keyed_jobs(backend, "s")
    assert len(ids) == 2 and state.job_id in ids
    [delta_id] = [i for i in ids if i != state.job_id]
    record = await job(backend, delta_id)
    assert (record.status, record.payload) == ("queued", delta("s"))
    row = await backend.freshness.scope(NAME, "s")
    assert row is not None and row.job_id == delta_id
