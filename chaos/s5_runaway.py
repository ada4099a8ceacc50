"""5. Stuck and runaway jobs.

5a, in one fleet of 2 workers x 4 slots (under RLIMIT_AS 3 GiB): sync jobs that hang in C and in
Python past their 1 s timeout, async jobs that hang, jobs that raise SystemExit /
KeyboardInterrupt / a bare BaseException (sync and async), jobs that allocate until
MemoryError -- more poison than the fleet has slots -- mixed with normal jobs. No worker may
exit; every normal job succeeds; each poison job ends ``failed`` with the right error type; and
after the poison, a second batch of normal jobs still runs at full capacity.

5b, a job that kills its own worker process (``os._exit``, SIGKILL to itself, a segfault), in a
fleet of 3 that we respawn: each such job runs at most ``max_lost`` (3) times, then is
quarantined ``failed`` "lost its worker 3 times"; every normal job still succeeds.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from chaos import harness as h

NAME_A = "5a stuck/raising jobs"
NAME_B = "5b job kills its worker"
MAX_LOST = 3  # App default

EXPECTED = {
    "chaos.hang_in_c": "JobTimeout",
    "chaos.hang_in_python": "JobTimeout",
    "chaos.ahang": "JobTimeout",
    "chaos.memory_hog": "MemoryError",
}


def run(kind: str, workdir: Path, short: bool = False) -> list[h.Result]:
    return [_stuck(kind, workdir, short), _self_kill(kind, workdir, short)]


def _error_type(info) -> str:  # type: ignore[no-untyped-def]
    return (info.error or {}).get("type", "") if isinstance(info.error, dict) else str(info.error)


def _stuck(kind: str, workdir: Path, short: bool) -> h.Result:
    result = h.Result(NAME_A, kind, ok=True, bound=0)
    url = h.fresh_url(kind, workdir)
    slots = 2 * 4
    try:
        with (
            h.producer(url) as app,
            h.fleet(
                url, workdir / f"s5a-{kind}", concurrency=4, lease=2.0, grace=2, rlimit_as=3 << 30
            ) as fleet,
        ):
            poison: dict[str, tuple[str, str]] = {}  # token -> (job id, expected error type)

            def add(task: str, count: int, *args: object, expect: str) -> None:
                toks = [h.token() for _ in range(count)]
                ids = h.enqueue_tokens(app, task, toks, *args)
                poison.update({t: (ids[t], expect) for t in toks})

            normal = [h.token() for _ in range(100 if short else 300)]
            normal_ids = h.enqueue_tokens(app, "chaos.work", normal[::2], 20)
            normal_ids |= h.enqueue_tokens(app, "chaos.awork", normal[1::2], 20)
            add("chaos.hang_in_c", slots, expect="JobTimeout")
            add("chaos.ahang", slots, expect="JobTimeout")
            add("chaos.hang_in_python", 2, expect="JobTimeout")
            for what, typ in (
                ("SystemExit", "SystemExit"),
                ("KeyboardInterrupt", "KeyboardInterrupt"),
                ("BaseException", "Doom"),
            ):
                add("chaos.raiser", 2, what, expect=typ)
                add("chaos.araiser", 2, what, expect=typ)
            add("chaos.memory_hog", 2, expect="MemoryError")
            workers = fleet.start(2)
            took = h.wait_idle(app, timeout=120)
            result.check(took is not None, "jobs still pending 120 s after start")
            # Capacity kept: a fresh batch runs at full speed next to the stuck threads.
            second = [h.token() for _ in range(200)]
            second_ids = h.enqueue_tokens(app, "chaos.work", second, 200)
            t0 = time.monotonic()
            took2 = h.wait_idle(app, timeout=60, every=0.2)
            elapsed = time.monotonic() - t0
            ideal = len(second) * 0.2 / slots
            result.check(took2 is not None, "second batch did not finish")
            result.check(
                elapsed < ideal * 2 + 2,
                f"second batch took {elapsed:.1f}s (ideal {ideal:.1f}s): capacity lost",
            )
            alive = set(fleet.alive())
            result.check(
                alive == set(workers),
                f"workers died: {sorted(set(workers) - alive)} exits {fleet.exits}",
            )
            fleet.stop(app=app)
            jobs = h.all_jobs(app)
        runs = h.read_runs(fleet.marks)
        everything = normal + second
        ids = normal_ids | second_ids
        result.jobs = len(everything) + len(poison)
        result.lost = sum(1 for t in everything if h.completed(runs, t) == 0)
        result.duplicates = h.duplicates(runs, everything + list(poison))
        bad_normal = [
            t for t in everything if jobs.get(ids[t]) is None or jobs[ids[t]].status != "succeeded"
        ]
        wrong = []
        for job_id, expect in poison.values():
            info = jobs.get(job_id)
            if info is None or info.status != "failed" or _error_type(info) != expect:
                wrong.append(
                    (
                        info.task if info else "?",
                        info.status if info else "missing",
                        _error_type(info) if info else "",
                    )
                )
        result.recovery = elapsed
        result.recovery_bound = ideal * 2 + 2
        result.check(result.lost == 0, f"{result.lost} normal jobs never completed")
        result.check(not bad_normal, f"{len(bad_normal)} normal jobs not succeeded")
        result.check(not wrong, f"{len(wrong)} poison jobs with a wrong record, e.g. {wrong[:4]}")
        result.check(result.duplicates == 0, f"{result.duplicates} duplicate runs")
        result.notes.append(
            f"{len(poison)} poison ({2 * slots} hangs > {slots} slots); "
            "recovery column = 2nd batch time"
        )
    finally:
        h.drop(url)
    return result


def _self_kill(kind: str, workdir: Path, short: bool) -> h.Result:
    result = h.Result(NAME_B, kind, ok=True)
    url = h.fresh_url(kind, workdir)
    lease = 2.0
    try:
        with (
            h.producer(url) as app,
            h.fleet(url, workdir / f"s5b-{kind}", concurrency=4, lease=lease, grace=2) as fleet,
        ):
            killers = {how: h.token() for how in ("exit", "sigkill", "segfault")}
            killer_ids = {
                how: h.enqueue_tokens(app, "chaos.self_kill", [t], how)[t]
                for how, t in killers.items()
            }
            normal = [h.token() for _ in range(150 if short else 400)]

            def per_job() -> tuple[int]:
                return (random.randint(20, 80),)

            ids = h.enqueue_tokens(app, "chaos.work", normal, per_job=per_job)
            workers = fleet.start(3)
            deaths = 0
            caught: dict[int, set[str]] = {}
            deadline = time.monotonic() + 120
            t0 = time.monotonic()
            while time.monotonic() < deadline:
                time.sleep(0.2)
                for pid, _code in fleet.reap():
                    caught[pid] = h.held_by(app, pid)  # running or finished-but-unacked
                    deaths += 1
                    fleet.spawn()
                q, s, r = h.queue_totals(app)
                if q == s == r == 0 and not fleet.reap():
                    break
            took = time.monotonic() - t0
            fleet.stop(app=app)
            jobs = h.all_jobs(app)
        del workers
        runs = h.read_runs(fleet.marks)
        result.jobs = len(normal) + len(killers)
        result.lost = sum(1 for t in normal if h.completed(runs, t) == 0)
        result.duplicates = h.duplicates(runs, normal)
        dead = {
            pid for pid, (code, _) in fleet.exits.items() if code != 0 and pid not in fleet.termed
        }
        result.bound = sum(
            len(
                (caught.get(pid, set()) | h.in_flight(runs, pid, fleet.exits[pid][1]))
                - set(killers.values())
            )
            for pid in dead
        )
        bad_normal = [
            t for t in normal if jobs.get(ids[t]) is None or jobs[ids[t]].status != "succeeded"
        ]
        result.check(result.lost == 0, f"{result.lost} normal jobs never completed")
        seen = [(jobs[ids[t]].status, jobs[ids[t]].attempts) for t in bad_normal if ids[t] in jobs]
        result.check(not bad_normal, f"{len(bad_normal)} normal jobs not succeeded: {seen[:3]}")
        result.check(
            result.duplicates <= result.bound,
            f"{result.duplicates} duplicate runs > {result.bound}",
        )
        # A pill and a normal job first claimed together both lose the worker once; after
        # that a job that lost its worker runs alone (the claim hands it out alone), so no
        # normal job should lose its worker twice: one more and it is quarantined innocent.
        relost = sorted(
            (jobs[ids[t]].lost, t) for t in normal if ids[t] in jobs and jobs[ids[t]].lost > 1
        )
        result.check(
            not relost,
            f"{len(relost)} normal jobs lost their worker more than once (a pill that already "
            f"lost its worker shared their process), e.g. lost={relost[-1][0] if relost else 0} "
            f"token {relost[-1][1] if relost else '-'}",
        )
        killer_runs = {how: len(runs.get(t, ())) for how, t in killers.items()}
        for how, job_id in killer_ids.items():
            info = jobs.get(job_id)
            message = (
                (info.error or {}).get("message", "")
                if info and isinstance(info.error, dict)
                else ""
            )
            result.check(
                info is not None
                and info.status == "failed"
                and f"lost its worker {MAX_LOST} times" in message,
                f"self-kill ({how}) job: {info.status if info else 'missing'} {message!r}",
            )
            result.check(
                killer_runs[how] <= MAX_LOST,
                f"self-kill ({how}) ran {killer_runs[how]} times > max_lost",
            )
        result.recovery = took
        result.notes.append(
            f"{deaths} worker deaths; runs per self-killing job {killer_runs} "
            f"(max_lost={MAX_LOST}); quarantined; recovery column = time to drain everything"
        )
    finally:
        h.drop(url)
    return result
