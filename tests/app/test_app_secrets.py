"""``secret=`` arguments: checked at registration, sealed with a key, opened only by a worker
holding one of the keys (rotation), masked and scrubbed by ``duly.secrets``."""

from __future__ import annotations

from pathlib import Path

import pytest

import duly
import duly.testing
from duly._errors import ConfigurationError
from duly._secrets import MASK, redact_job

SECRET = "tok_" + "s" * 24


def _app(tmp_path: Path, key: str | None) -> tuple[duly.App, duly.Task[..., bool]]:
    app = duly.App(f"sqlite:///{tmp_path / 'jobs.db'}", secret_key=key)

    @app.task(name="use", secret=("token",), retries=0)
    def use(n: int, token: str, note: str = "") -> bool:
        if n < 0:
            raise ValueError(f"refused {token!r}")
        return token == SECRET

    return app, use


def test_secret_names_must_be_parameters(tmp_path: Path) -> None:
    app = duly.App(f"sqlite:///{tmp_path / 'jobs.db'}")
    with pytest.raises(ConfigurationError, match="no parameter 'tokn'"):
        app.task(secret=("tokn",))(lambda token: token)
    with pytest.raises(TypeError):
        app.task(secret="token")(lambda token: token)  # type: ignore[arg-type]
    app.close()


def test_sealed_at_rest_and_opened_by_the_worker(tmp_path: Path) -> None:
    app, use = _app(tmp_path, "k1")
    job = use.enqueue(1, SECRET, note="plain")
    info = app.get_job(job.id)
    assert info is not None and SECRET not in repr(info) and "plain" in repr(info)
    assert isinstance(info.args[1], dict) and "$sealed" in info.args[1]
    duly.testing.run_jobs(app, [job])
    assert app.get_job(job.id).result is True  # type: ignore[union-attr]
    app.close()
    # A new key first, the old one kept: old jobs still open (rotation).
    rotated, use2 = _app(tmp_path, "k2,k1")
    again = use2.enqueue(1, token=SECRET)
    duly.testing.run_jobs(rotated, [again])
    assert rotated.get_job(again.id).result is True  # type: ignore[union-attr]
    rotated.close()


@pytest.mark.parametrize("worker_key", [None, "wrong"])
def test_a_worker_without_the_key_fails_the_job_clearly(
    tmp_path: Path, worker_key: str | None
) -> None:
    app, use = _app(tmp_path, "right")
    job = use.enqueue(1, SECRET)
    app.close()
    worker_app, _ = _app(tmp_path, worker_key)
    duly.testing.run_jobs(worker_app, [job])
    info = worker_app.get_job(job.id)
    assert info is not None and info.status == "failed"
    assert "DULY_SECRET_KEY" in info.error["message"]  # type: ignore[index]
    worker_app.close()


def test_masked_and_scrubbed_without_a_key(tmp_path: Path) -> None:
    app, use = _app(tmp_path, None)
    job = use.enqueue(-1, SECRET)
    duly.testing.run_jobs(app, [job])
    info = app.get_job(job.id)
    assert info is not None and info.args == [-1, SECRET]  # the library's own view: as given
    assert SECRET not in info.error["message"]  # type: ignore[index]  # scrubbed when stored
    shown = redact_job(app, info)
    assert shown.args == [-1, MASK] and SECRET not in repr(shown)
    app.close()
