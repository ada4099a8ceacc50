"""Jobs queued by the last release drain on HEAD (PRODUCT §11), on every backend.

The last release's commit (``RELEASES``; the commit, since tags do not always survive a clone)
is exported from git history into a venv of its own: its ``src/duly`` is installed there as
``pip install --no-deps`` would install its wheel (the package and its dist-info; no build
backend needed), over HEAD's dependencies (a path entry to this venv's site-packages, not its
``.pth`` files, so HEAD's editable duly stays invisible). ``old_side.py`` runs under it and
leaves jobs of every kind of that release: queued, delayed, retrying, periodic, unique-held,
mutex-parked (behind a job left running by a worker that is gone), watches. A HEAD worker
then drains them: every job reaches its outcome, each task ran, and HEAD keeps the old
unique holds and periodic ticks (no second job for either).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import pytest
from releases import Release, git, in_history, releases
from services import BACKENDS, POSTGRES_URL, REDIS_URL, require_service
from upgrade_tasks import PERIOD, make_app

import duly
import duly._records
from duly._scheduler.periodic import Scheduler

HERE = Path(__file__).resolve().parent
FINAL = {"succeeded", "failed", "cancelled"}
#: What each task run left in the marks directory (see upgrade_tasks.py).
MARKS = {
    "plain-1", "plain-2", "plain-3", "flaky-5", "unique-7", "hold-1", "gated-2", "tick",
    "shipped-1-1", "shipped-1-2", "shipped-2-1", "shipped-2-2",
}  # fmt: skip

pytestmark = pytest.mark.timeout(120)


def _install(release: Release, root: Path) -> Path:
    """A venv at ``root`` holding ``release``'s duly over HEAD's dependencies; its python."""
    tar_path = root / "release.tar"
    archive = git("archive", "--format=tar", "-o", str(tar_path), release.commit, "src/duly")
    assert archive.returncode == 0, archive.stderr
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    package = Path(site)
    with tarfile.open(tar_path) as tar:
        tar.extractall(root / "tree", filter="data")
    (root / "tree" / "src" / "duly").rename(package / "duly")
    info = package / f"duly-{release.version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: duly\nVersion: {release.version}\n"
    )
    (info / "INSTALLER").write_text("duly upgrade test\n")
    (info / "RECORD").write_text("")
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (package / "_head_dependencies.pth").write_text("\n".join(sorted(paths)) + "\n")
    return python


@pytest.fixture(scope="session")
def old_release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Release, Path]:
    """The last release, installed in a venv of its own (once per test process)."""
    release = releases()[-1]
    if not in_history(release.commit):
        message = (
            f"release {release.version} (commit {release.commit}) is not in this clone's "
            "history: fetch it (git fetch --unshallow) to run the upgrade test"
        )
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    python = _install(release, tmp_path_factory.mktemp(f"duly-{release.version}"))
    return release, python


@pytest.fixture
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A URL and namespace of the backend kind ``request.param``, dropped afterwards."""
    kind: str = request.param
    require_service(kind)
    url = {"sqlite": f"sqlite:///{tmp_path}/jobs.db", "redis": REDIS_URL}.get(kind, POSTGRES_URL)
    namespace = f"t_up_{uuid4().hex[:10]}"
    yield url, namespace
    app = duly.App(url, namespace=namespace)

    async def drop() -> None:
        await (await app.backend()).drop()
        await app.aclose()

    asyncio.run(drop())


async def _drain(app: duly.App, ids: dict[str, str], timeout: float) -> dict[str, str]:
    """Run a HEAD worker until every job of ``ids`` is final; their statuses."""
    # No scheduler here: on the real clock it would rightly enqueue the next tick whenever the
    # test runs across a period boundary. What HEAD's scheduler makes of the old tick is
    # checked on a ManualClock after the drain.
    worker = app.worker(
        queues=["default", "prep", "gate"],
        install_signal_handlers=False,
        lease=2,
        poll=0.2,
        scheduler=False,
    )
    running = asyncio.create_task(worker.run())
    deadline = time.monotonic() + timeout
    try:
        while True:
            states = {}
            for kind, job_id in ids.items():
                job = await app.get_job_async(job_id)
                states[kind] = "missing" if job is None else job.status
            if set(states.values()) <= FINAL or time.monotonic() > deadline:
                return states
            await asyncio.sleep(0.1)
    finally:
        worker.stop()
        await running


@pytest.mark.parametrize("place", BACKENDS, indirect=True)
def test_jobs_left_by_the_last_release_drain_on_head(
    old_release: tuple[Release, Path], place: tuple[str, str], tmp_path: Path
) -> None:
    release, python = old_release
    url, namespace = place
    marks = tmp_path / "marks"
    marks.mkdir()
    old = subprocess.run(
        [str(python), str(HERE / "old_side.py"), url, namespace, str(marks)],
        cwd=HERE, capture_output=True, text=True, timeout=60, check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith(("DULY_", "PYTHON"))},
    )  # fmt: skip
    assert old.returncode == 0, old.stderr
    ids: dict[str, str] = json.loads(old.stdout.splitlines()[-1])
    assert ids.pop("duly") == release.version  # it did run the old release
    assert Path(ids.pop("from")).is_relative_to(python.parent.parent), "not the old venv's duly"
    before = {p.name for p in marks.iterdir()}
    assert before == {"flaky-started"}, before

    app = make_app(url, namespace, marks)
    try:
        held = app.tasks["up.unique"].enqueue(7)  # HEAD reads the old unique hold
        assert held.deduplicated and held.id == ids["unique"]
        states = asyncio.run(_drain(app, ids, timeout=45))
        assert states == dict.fromkeys(ids, "succeeded"), states
        assert {p.name for p in marks.iterdir()} == MARKS | before
        assert app.get_job(ids["retrying"]).attempts == 2  # type: ignore[union-attr]
        assert app.get_job(ids["retrying"]).result == 5  # type: ignore[union-attr]
        # The tick the old scheduler enqueued is the last one for HEAD's: no second job.
        ticks = app.jobs(key="periodic:up.tick")
        assert [job.id for job in ticks] == [ids["periodic"]]
        old_tick = app.get_job(ids["periodic"])
        assert old_tick is not None
        tick = PERIOD * (old_tick.enqueued_at.timestamp() // PERIOD)  # the old side's period
        ticking = make_app(url, namespace, marks, clock=duly.ManualClock(tick + 1.0))
        try:
            assert asyncio.run(_lap(ticking)) == 0
        finally:
            ticking.close()
        fresh = app.tasks["up.unique"].enqueue(7)  # the hold ended with the old job
        assert not fresh.deduplicated
        found = asyncio.run(_storage_format(app))
        assert found.stored == found.readable
    finally:
        app.close()


async def _lap(app: duly.App) -> int:
    try:
        return await Scheduler(app).run_once(await app.backend())
    finally:
        await app.aclose()


async def _storage_format(app: duly.App) -> duly._records.StorageFormat:
    try:
        return await (await app.backend()).storage_format()
    finally:
        await app.aclose()
