"""The App's doors to the features that store more than one job or live beside jobs: groups,
chains and dependencies, the event stream, webhooks and runtime schedules. ``duly.App``
inherits them; each door is one call into its feature module, which reaches the App only
through ``duly._ports.AppPort``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from datetime import timedelta

from duly._events import Event, check_events_args, stream_events
from duly._groups import Group, GroupInfo, load_group, prepare_group, store_group
from duly._ports import AppPort
from duly._schedule import CatchUp, Overlap
from duly._schedules import ScheduleInfo, list_schedules, put_schedule, remove_schedule
from duly._task import Signature
from duly._webhooks import Webhook, create_webhook, revoke_webhook
from duly._workflows import (
    Workflow,
    WorkflowInfo,
    load_dependents,
    load_workflow,
    prepare_chain,
    store_chain,
)

__all__ = ["AppFeatures"]


class AppFeatures:
    """Groups, chains, events, webhooks and runtime schedules of ``duly.App``."""

    # -- groups and events (duly.groups, duly.events) ---------------------------------------
    def group(
        self: AppPort,
        signatures: Iterable[Signature],
        *,
        on_complete: Signature | None = None,
        key: str | None = None,
        id: str | None = None,
    ) -> Group:
        """Enqueue ``signatures`` as one group, atomically; ``on_complete`` (a signature) is
        enqueued exactly once when every member first has an outcome (succeeded, failed for
        good, or cancelled), and sees ``duly.current_job().group``. ``key`` (default: the
        group's id) is given to every member and the callback without one of their own, so
        ``app.jobs(key=...)`` and ``app.events(key=...)`` follow the group. ``id`` (letters,
        digits, ``._:@-``; up to 200) makes it idempotent: while a group of that id is
        stored, this stores nothing and returns it (``g.deduplicated``)."""
        group, members = prepare_group(self, signatures, on_complete, key, id)
        return self.run_sync(store_group(self, group, members))

    async def group_async(
        self: AppPort,
        signatures: Iterable[Signature],
        *,
        on_complete: Signature | None = None,
        key: str | None = None,
        id: str | None = None,
    ) -> Group:
        """Async twin of ``group``."""
        group, members = prepare_group(self, signatures, on_complete, key, id)
        return await store_group(self, group, members)

    def get_group(self: AppPort, group_id: str) -> GroupInfo | None:
        """The group with this id (its ``id=`` or its generated id), or None (unknown, or
        removed by retention)."""
        return self.run_sync(load_group(self, group_id))

    async def get_group_async(self: AppPort, group_id: str) -> GroupInfo | None:
        """Async twin of ``get_group``."""
        return await load_group(self, group_id)

    # -- chains (duly._workflows) -----------------------------------------------------------
    def chain(self: AppPort, *signatures: Signature) -> Workflow:
        """Enqueue ``signatures`` as steps that run one after the other, atomically: each step
        waits for the previous one to succeed and, made with ``task.s``, takes its result as
        its first argument (``task.si``: it does not). A step that fails for good cancels the
        ones after it (``DependencyFailed``); retrying it resumes the chain."""
        return self.run_sync(store_chain(self, prepare_chain(self, signatures)))

    async def chain_async(self: AppPort, *signatures: Signature) -> Workflow:
        """Async twin of ``chain``."""
        return await store_chain(self, prepare_chain(self, signatures))

    def get_workflow(self: AppPort, workflow_id: str) -> WorkflowInfo | None:
        """The workflow (a chain) with this id, or None (unknown, or removed by retention)."""
        return self.run_sync(load_workflow(self, workflow_id))

    async def get_workflow_async(self: AppPort, workflow_id: str) -> WorkflowInfo | None:
        """Async twin of ``get_workflow``."""
        return await load_workflow(self, workflow_id)

    def dependents(self: AppPort, job_id: str) -> list[str]:
        """The ids of the jobs that wait (or waited) for this one (``options(after=...)``)."""
        return self.run_sync(load_dependents(self, job_id))

    async def dependents_async(self: AppPort, job_id: str) -> list[str]:
        """Async twin of ``dependents``."""
        return await load_dependents(self, job_id)

    def events(
        self: AppPort, since: str | None = None, key: str | None = None, *, progress: bool = False
    ) -> AsyncIterator[Event]:
        """Every job state change, as it happens: ``async for ev in app.events()``. ``since``
        resumes after that event id (``duly.EventsTrimmed`` if retention removed what
        followed it); ``key`` keeps one key's jobs; ``progress=True`` adds the ``progress``
        events of running jobs (``ev.progress``). See ``duly._events``."""
        check_events_args(since, key, progress)
        return stream_events(self, since, key, progress=progress)

    # -- webhooks (duly.webhooks) -------------------------------------------------------------
    def create_webhook(self: AppPort, sig: Signature) -> Webhook:
        """A secret URL that enqueues ``sig`` when POSTed to (``duly.Webhook(secret, path)``;
        served by ``app.asgi()`` at ``/hooks/<secret>``). Only a hash of the secret is stored."""
        return self.run_sync(create_webhook(self, sig))

    async def create_webhook_async(self: AppPort, sig: Signature) -> Webhook:
        """Async twin of ``create_webhook``."""
        return await create_webhook(self, sig)

    def revoke_webhook(self: AppPort, secret: str) -> bool:
        """Delete the webhook of ``secret`` (its URL answers 404 from now on); False if none."""
        return self.run_sync(revoke_webhook(self, secret))

    async def revoke_webhook_async(self: AppPort, secret: str) -> bool:
        """Async twin of ``revoke_webhook``."""
        return await revoke_webhook(self, secret)

    # -- runtime schedules (duly._schedules) ------------------------------------------------
    def schedule(
        self: AppPort,
        name: str,
        sig: Signature,
        *,
        every: float | timedelta | None = None,
        cron: str | None = None,
        tz: str = "UTC",
        catch_up: CatchUp = "one",
        overlap: Overlap = "skip",
    ) -> ScheduleInfo:
        """Store a periodic schedule named ``name`` that enqueues ``sig`` (``task.s(...)``)
        ``every`` seconds or on ``cron`` in ``tz``, replacing the one of that name; every
        scheduler picks it up by its next tick. ``catch_up`` and ``overlap`` as in
        ``@app.periodic``. An unknown task, a bad schedule or time zone: ConfigurationError."""
        return self.run_sync(
            put_schedule(
                self, name, sig, every=every, cron=cron, tz=tz, catch_up=catch_up, overlap=overlap
            )
        )

    async def schedule_async(
        self: AppPort,
        name: str,
        sig: Signature,
        *,
        every: float | timedelta | None = None,
        cron: str | None = None,
        tz: str = "UTC",
        catch_up: CatchUp = "one",
        overlap: Overlap = "skip",
    ) -> ScheduleInfo:
        """Async twin of ``schedule``."""
        return await put_schedule(
            self, name, sig, every=every, cron=cron, tz=tz, catch_up=catch_up, overlap=overlap
        )

    def unschedule(self: AppPort, name: str) -> bool:
        """Remove the stored schedule ``name`` (it ticks no more); False if there was none."""
        return self.run_sync(remove_schedule(self, name))

    async def unschedule_async(self: AppPort, name: str) -> bool:
        """Async twin of ``unschedule``."""
        return await remove_schedule(self, name)

    def schedules(self: AppPort) -> list[ScheduleInfo]:
        """Every periodic schedule, decorated (``@app.periodic``) and stored
        (``app.schedule``), by name, with its next and last tick and its skipped ticks."""
        return self.run_sync(list_schedules(self))

    async def schedules_async(self: AppPort) -> list[ScheduleInfo]:
        """Async twin of ``schedules``."""
        return await list_schedules(self)
