"""Every invalid option raises ``ConfigurationError`` (issue 27.5), whatever module checks it;
a wrong type is also a ``TypeError`` and a wrong value a ``ValueError``, as before."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import duly


def _app(tmp_path: Path) -> duly.App:
    return duly.App(f"sqlite:///{tmp_path / 'never-opened.db'}")


def f() -> None:
    return None


BAD_OPTIONS: dict[str, Callable[[duly.App], Any]] = {
    "App(max_lost=0)": lambda app: duly.App(app.url, max_lost=0),
    "App(max_payload_bytes=0)": lambda app: duly.App(app.url, max_payload_bytes=0),
    "App(stats_retention=1)": lambda app: duly.App(app.url, stats_retention=1),
    "App(retention=-1)": lambda app: duly.App(app.url, retention=-1),
    "App(backend=42)": lambda app: duly.App(backend=42),  # type: ignore[arg-type]
    "task(retries=-1)": lambda app: app.task(retries=-1)(f),
    "task(retries=1.5)": lambda app: app.task(retries=1.5)(f),  # type: ignore[arg-type]
    "task(timeout=0)": lambda app: app.task(timeout=0)(f),
    "task(priority=5000)": lambda app: app.task(priority=5000)(f),
    "task(queue='a b')": lambda app: app.task(queue="a b")(f),
    "task(backoff=5)": lambda app: app.task(backoff=5)(f),  # type: ignore[arg-type]
    "task(retry_on=('x',))": lambda app: app.task(retry_on=("x",))(f),  # type: ignore[arg-type]
    "task(name='')": lambda app: app.task(name="")(f),
    "task(rate_limit='fast')": lambda app: app.task(rate_limit="fast")(f),
    "task(mutex='{nope}')": lambda app: app.task(mutex="{nope}")(f),
    "task(unknown=1)": lambda app: app.task(unknown=1)(f),  # type: ignore[call-overload]
    "task(42)": lambda app: app.task(name="t.x")(42),  # type: ignore[call-overload]
    "periodic(every=0.1)": lambda app: app.periodic(every=0.1)(f),
    "periodic(cron='nope')": lambda app: app.periodic(cron="nope")(f),
    "periodic(tz='Mars/Base')": lambda app: app.periodic(every=60, tz="Mars/Base")(f),
    "Backoff(base=0)": lambda app: duly.Backoff(base=0),
    "Backoff(cap<base)": lambda app: duly.Backoff(base=10, cap=1),
    "options(delay=, at=)": lambda app: app.task(f).options(
        delay=1, at=datetime(2030, 1, 1).astimezone()
    ),
    "options(at=naive)": lambda app: app.task(f).options(at=datetime(2030, 1, 1)),
    "options(key='')": lambda app: app.task(f).options(key=""),
    "options(id='a b')": lambda app: app.task(f).options(id="a b"),
    "periodic options(id=)": lambda app: app.periodic(every=60)(f).options(id="x").enqueue(),
    "task(expires=0)": lambda app: app.task(expires=0)(f),
    "options(expires=naive)": lambda app: app.task(f).options(expires=datetime(2030, 1, 1)),
    "options(id=42)": lambda app: app.task(f).options(id=42),  # type: ignore[arg-type]
    "task(backoff=lambda: 1)": lambda app: app.task(backoff=lambda: 1)(f),  # type: ignore[arg-type]
    "worker(concurrency=0)": lambda app: app.worker(concurrency=0),
    "task(isolated='yes')": lambda app: app.task(isolated="yes")(f),  # type: ignore[call-overload]
    "task(isolated=, a lambda)": lambda app: app.task(isolated=True)(lambda: None),
    "worker(max_jobs=0)": lambda app: app.worker(max_jobs=0),
    "worker(max_jobs='10')": lambda app: app.worker(max_jobs="10"),
    "worker(max_memory=-1)": lambda app: app.worker(max_memory=-1),
    "asgi(read_tokens='one')": lambda app: app.asgi(read_tokens="one"),  # type: ignore[arg-type]
    "App('mysql://')": lambda app: duly.App("mysql://localhost/db"),
}


@pytest.mark.parametrize("make", list(BAD_OPTIONS.values()), ids=list(BAD_OPTIONS))
def test_every_invalid_option_is_a_configuration_error(
    make: Callable[[duly.App], Any], tmp_path: Path
) -> None:
    app = _app(tmp_path)
    with pytest.raises(duly.ConfigurationError) as refused:
        make(app)
    assert isinstance(refused.value, ValueError | TypeError)
    assert not (tmp_path / "never-opened.db").exists()  # refused before any storage


def test_a_wrong_type_is_still_a_type_error(tmp_path: Path) -> None:
    app = _app(tmp_path)
    with pytest.raises(TypeError):
        app.task(retries=1.5)(f)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        app.task(retries=-1)(f)
