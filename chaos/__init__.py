"""duly's fault-injection ("chaos") suite: ``python -m chaos.run`` (see docs/reliability.md).

Every scenario starts real worker processes (``python -m duly worker chaos.tasks:app
--processes 1``: one pid each, killed and counted by pid) against a fresh namespace of one
backend, injects faults from outside (SIGKILL, SIGTERM, a backend restart, killed connections,
poison jobs) and then counts runs from *outside* duly: each run of a job appends a line to a
per-process marks file (``chaos.tasks``), so the verdict never rests on duly's own bookkeeping.
"""
