"""The Redis keyspace: the only place (on the Python side) where key strings are formed.

Every key starts with ``{<namespace>}:``; the braces are a Redis Cluster hash tag, so all of a
namespace lives in one slot and every Lua script may touch any of its keys atomically.

======================  ======  ================================================================
key                     type    content
======================  ======  ================================================================
``j:<id>``              hash    one job (fields below); absent optional fields mean ``None``/0
``q:<queue>``           zset    ready (``queued``) ids; score = ``ready_score`` (see below)
``due``                 zset    ``scheduled`` and ``retrying`` ids; score = ``scheduled_for``
``run``                 zset    ``running`` ids; score = ``lease_until``
``all``                 zset    every stored id, score 0: lexical order = id order = age
``k:<key>``             zset    ids enqueued with ``key``, score 0 (newest first = ZREVRANGE)
``s:<status>``          zset    ids of finished jobs (succeeded / failed / cancelled), score 0
``exp``                 zset    finished ids with an ``expire_at``; score = ``expire_at``
``queues``              set     every queue name ever enqueued to
``qc``                  hash    ``<queue>\\x1fs`` = scheduled+retrying count, ``<queue>\\x1fr``
                                = running count, ``<queue>\\x1fw`` = parked count (kept by the
                                scripts; queued = ZCARD q:<queue> + parked)
``c:<minute>``          hash    ``<task>\\x1f<queue>\\x1f<s|f|r>`` -> count (succeeded, failed,
                                retried) for that minute (POSIX seconds // 60); EXPIRE 25 h
``cm``                  zset    minutes that have a counter bucket; score = minute
``w``                   zset    registered workers; score = last seen (register, heartbeat)
``wi``                  hash    worker id -> JSON ``{"s": started_at, "i": info}``
``u``                   hash    unique key -> id of the active job holding it (see below)
``gr:<gate>``           set     ids of the ``running`` jobs of ``gate`` (its taken slots)
``gw:<gate>``           zset    parked ids of ``gate`` (``queued``, gate full); score = the
                                ready score they were popped with
``rl:<key>``            string  a rate limit's GCRA state ``"<tat> <floor>"`` (see
                                reserve_rate.lua); expires (SET PX) when ``tat`` passes by the
                                reserving caller's clock (a passed ``tat`` equals no state)
``ev``                  stream  one entry per job state change (see "Events" below)
``ev:k:<key>``          stream  the entries of ``ev`` of jobs with ``key``, same ids; EXPIRE 7
                                days after its last entry
``ev:n``                string  the number of the last event written
``g:<id>``              hash    a group: ``n`` members, ``left`` not settled, ``succeeded`` /
                                ``failed`` / ``cancelled`` counts, ``at`` created, ``ret``
                                retention (s), ``k`` key, ``cb`` = 1 with a callback, ``done``
                                completed_at, ``f`` first completed_at (the callback queued),
                                ``nm`` name and ``m`` member ids (``,``) of a named group;
                                EXPIRE ``ret`` once complete (PERSIST while pending again)
``gs:<id>``             set     member ids whose current outcome the group counts (once each)
``gn:<name>``           string  the id of the stored group of that name (``app.group(id=)``);
                                expires with the group
``da:<id>``             set     ids of the jobs that wait (or waited) for job ``<id>``
                                (``after=``); deleted with the job (purge)
``format``              string  the storage format of the namespace's data (format.py); absent
                                with data = format 1 (duly 0.1.0 recorded none)
``wake`` (channel)      pubsub  a queue name is published when a job may be claimable in it
``f:<member>``          hash    one freshness scope (PRODUCT §7), member = ``<name>\\x1f<scope>``;
                                fields in lua/_freshness.lua
``fd:<name>``           zset    the scopes of one freshness by next_due (baseline/backoff due)
``fs:<name>``           zset    the scopes of one freshness; score = stale_at (last success +
                                max_staleness, -1e18 when never synced)
``hooks``               hash    webhooks: SHA-256 of the secret (hex) -> msgpack of the record
                                (HSETNX stores, HGET finds, HDEL revokes; no secret stored)
``sched``               hash    runtime schedules (app.schedule): name -> msgpack of the record
                                (HSET replaces, HDEL removes, HGETALL lists)
``sk``                  hash    skipped ticks (overlap="skip"): a schedule's job key ->
                                ``"<count> <latest tick>"`` (skip_tick.lua)
``iw:<queue>``           zset    idle worker processes waiting on ``queue`` (hand-off, below);
                                score = the worker's clock at registration; PEXPIRE = the last
                                registration's TTL
``iv:<worker>``         string  an idle worker's registration ``"<lease_until> <inbox ttl ms>
                                <queue>..."``; SET PX (lapses by the server's clock)
``ib:<worker>``         list    a worker's inbox: rows of jobs enqueue.lua claimed for it;
                                PEXPIRE = the lease
``paused``              hash    paused queues: queue -> paused_at (HSETNX pauses, resume.lua
                                resumes; claim.lua and enqueue.lua's hand-off skip them)
======================  ======  ================================================================

Job hash fields (one letter each, to keep a queued job small): ``t`` task, ``q`` queue, ``p``
payload (raw bytes), ``s`` status, ``a`` attempts, ``m`` max_attempts (absent =
``DEFAULT_MAX_ATTEMPTS``, that of the default ``retries=3``), ``k`` key, ``r``
priority (absent = 0), ``e`` enqueued_at, ``d`` scheduled_for (only stored for jobs that were
scheduled or ran ``again``), ``b`` started at, ``f`` finished_at, ``o`` result (raw bytes),
``x`` errors (raw JSON list), ``w`` worker, ``l`` lease_until, ``n`` lost, ``z`` expire_at,
``y`` rate_slot,
``c`` (only on a ``running`` job whose cancel was requested) the expire_at it gets when it
ends ``cancelled`` ('' = none);
concurrency control (absent for a plain job): ``u`` unique key (see below), ``U`` = ``1`` if the
hold ends at start, ``ux`` hold expiry, ``g`` gate, ``G`` gate limit; ``X`` the job's expiry
before start (``expires=``: claim.lua ends it instead of starting it); ``gp`` the group of a
group member; dependencies (lua/_dependencies.lua): ``dh`` = ``1`` on a job others wait for,
and on a dependent ``aw`` its dependencies not succeeded yet, ``ap`` the one whose result is
its chain input, ``ai`` that input, ``ab`` the dependency that cancelled it, ``ar`` seconds it
is kept once so cancelled (a waiting dependent is ``scheduled`` with no ``d``); ``pr`` the last
progress a run reported (JSON), ``cu`` its last checkpoint (JSON; see lua/_progress.lua).
Times are Python
``repr(float)`` strings, so they read back exactly.

Invariants every script keeps: a job is ``queued`` iff its id is in exactly one ``q:<queue>`` or
(parked) in ``gw:<gate>`` of its own gate; ``scheduled``/``retrying`` iff in ``due``; ``running``
iff in ``run`` (with ``w`` = its worker) and, with a gate, in ``gr:<gate>``; finished iff in
``s:<status>``. Every job is in ``all`` and, with a key, in ``k:<key>``.

Gates: claim.lua parks a popped job whose gate has ``SCARD gr:<gate> >= G`` (its own limit) in
``gw:<gate>``. A job leaving ``running`` (finish.lua, recover.lua) leaves
``gr:<gate>`` and, in the same script, moves the best parked job of the gate (ZPOPMIN) back to
its ready zset with its old score and publishes its queue; so a parked job waits only while
every slot of its gate is taken (with one limit per gate).

Unique holds: ``u[key] = id`` only while that job is active (finishing, cancelling or
quarantining a job removes its entry); the job holds the key while, in addition, its own ``u``
field equals the key and ``ux`` is absent or later than the time asked about (a later enqueue
takes an expired hold over by overwriting ``u[key]``). The job field ``u`` is removed when the
hold ends at start or ends before the job finishes (expired or taken over), and kept when it
ends with the job finishing, so retry.lua knows to take the key again.

Ready score: ``-priority * 2**42 + ms`` with ``priority`` clamped to ``PRIORITY_MIN..PRIORITY_MAX``
and ``ms`` = ``enqueued_at`` in milliseconds (clamped to ``0..2**42-1``, i.e. until 2109), or 0
for jobs handed back (recovered orphans, released jobs) so they go first within their priority.
ZPOPMIN then yields: higher priority first, handed-back first, FIFO, ties by id. Every score is
an integer below 2**53, so doubles hold it exactly.

Events: every script that stores a job or changes a job's status emits one event per change
(``emit`` in ``lua/_events.lua``) and writes them at its end as one ``ev`` entry per 1000: id
``0-<number of its last event>`` (events are numbered per namespace, ``ev:n`` the last
number), fields ``n`` count (absent = 1), ``a`` server ms, ``e`` msgpack ``[job id, status,
task, queue, key or '', ...]`` with the status as its code (1-based in ``records.STATUSES``);
the keyed ones also per key in ``ev:k:<key>`` (same id; ``e`` = ``[number, job id, status,
task, queue, ...]``). Entries with status names and ``n`` always (written before) read the
same. The last 100 000 events at least are kept; purge trims entries older than the stats
retention. ``streams.py`` reads them.

Groups: a member's outcome (succeeded, failed, cancelled) is added to ``gs:<id>`` and
counted in ``g:<id>`` by the script that records it (``settle_member``); an operator retry
takes it back (``unsettle_member`` in retry.lua). The one that leaves none pending sets
``done`` and, the first time (``f``), moves the callback job (id = the group's id,
``scheduled`` with no ``d`` until then, in no index) to its ready zset.

Hand-off (lua/_handoff.lua): a worker process whose claim found nothing registers as idle
(``iv:``, ``iw:``) and blocks on its inbox (``handoff.py``); enqueue.lua claims a plain new job
of a queue with no ready job for the newest live registrant in the same script, which uses the
registration up, and pushes the job's row to its inbox. The job is ``running`` under its lease
from that moment, so a worker that dies with it in its inbox loses it to recovery, like any
running job. The worker's next claim withdraws its registration and takes its inbox first.

Lua scripts receive the prefix (``{<namespace>}:``) as ``ARGV[1]`` and build the per-id keys
(``j:``, ``q:``, ``k:``, ``s:``, ``gr:``, ``gw:``, ``rl:``) with the helpers in
``lua/_jobs.lua`` and ``lua/_concurrency.lua``, which mirror the methods below; the backend
tests check both sides agree.
"""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_ATTEMPTS", "PRIORITY_MAX", "PRIORITY_MIN", "Keyspace"]

#: Priorities are clamped to this range for ordering (the stored value is kept as given).
PRIORITY_MIN = -1000
PRIORITY_MAX = 1000
#: A job hash without ``m`` has this max_attempts (DEFAULT_MAX_ATTEMPTS in lua/_jobs.lua).
DEFAULT_MAX_ATTEMPTS = 4


def _glob_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


class Keyspace:
    """Key names of one namespace."""

    __slots__ = (
        "all",
        "counter_minutes",
        "due",
        "events",
        "events_count",
        "expiry",
        "format",
        "namespace",
        "pattern",
        "paused",
        "prefix",
        "queue_counts",
        "queues",
        "running",
        "schedules",
        "skipped_ticks",
        "unique",
        "wake",
        "webhooks",
        "worker_info",
        "workers",
    )

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.prefix = p = f"{{{namespace}}}:"
        #: ``SCAN MATCH`` pattern covering every key of the namespace.
        self.pattern = _glob_escape(p) + "*"
        self.due = p + "due"
        self.running = p + "run"
        self.all = p + "all"
        self.expiry = p + "exp"
        self.queues = p + "queues"
        self.queue_counts = p + "qc"
        self.counter_minutes = p + "cm"
        self.workers = p + "w"
        self.worker_info = p + "wi"
        self.unique = p + "u"
        self.wake = p + "wake"
        self.events = p + "ev"
        self.events_count = p + "ev:n"
        self.webhooks = p + "hooks"
        self.paused = p + "paused"
        self.schedules = p + "sched"
        self.skipped_ticks = p + "sk"
        self.format = p + "format"

    def job(self, job_id: str) -> str:
        return f"{self.prefix}j:{job_id}"

    def ready(self, queue: str) -> str:
        return f"{self.prefix}q:{queue}"

    def key_index(self, key: str) -> str:
        return f"{self.prefix}k:{key}"

    def status_index(self, status: str) -> str:
        return f"{self.prefix}s:{status}"

    def counters(self, minute: int) -> str:
        return f"{self.prefix}c:{minute}"

    def gate_running(self, gate: str) -> str:
        return f"{self.prefix}gr:{gate}"

    def gate_parked(self, gate: str) -> str:
        return f"{self.prefix}gw:{gate}"

    def fresh(self, name: str, scope: str) -> str:
        return f"{self.prefix}f:{name}\x1f{scope}"

    def fresh_index(self, name: str) -> str:
        return f"{self.prefix}fs:{name}"

    def fresh_due(self, name: str) -> str:
        return f"{self.prefix}fd:{name}"

    def rate(self, key: str) -> str:
        return f"{self.prefix}rl:{key}"

    def key_events(self, key: str) -> str:
        return f"{self.prefix}ev:k:{key}"

    def group(self, group_id: str) -> str:
        return f"{self.prefix}g:{group_id}"

    def group_name(self, name: str) -> str:
        return f"{self.prefix}gn:{name}"

    def idle(self, queue: str) -> str:
        return f"{self.prefix}iw:{queue}"

    def idle_entry(self, worker: str) -> str:
        return f"{self.prefix}iv:{worker}"

    def inbox(self, worker: str) -> str:
        return f"{self.prefix}ib:{worker}"
