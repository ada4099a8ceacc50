"""Webhooks over HTTP: a secret URL enqueues its job; unknown or revoked secrets are 404."""

from __future__ import annotations

import pytest
from http_harness import SECRET, Hub

import duly
from duly._webhooks import digest

pytestmark = pytest.mark.timeout(60)


def test_a_webhook_enqueues_its_job(hub: Hub) -> None:
    hook = hub.app.create_webhook(
        hub.sync_link.options(key="link:456", priority=3).s(456, access_token=SECRET)
    )
    assert isinstance(hook, duly.Webhook) and hook.path == f"/hooks/{hook.secret}"
    assert hook.secret not in repr(hook)
    first = hub.client.post(hook.path, content=b'{"link_id": 1}')
    assert first.status_code == 202, first.text
    second = hub.client.post(hook.path)
    job_ids = [first.json()["job_id"], second.json()["job_id"]]
    assert job_ids[0] != job_ids[1]
    for job_id in job_ids:
        info = hub.app.get_job(job_id)
        assert info is not None and info.task == "sync_link" and info.queue == "sync"
        assert info.args == [456] and info.key == "link:456" and info.priority == 3
    hub.run(*job_ids)
    assert hub.app.get_job(job_ids[0]).result == "synced 456"  # type: ignore[union-attr]


def test_unknown_and_revoked_secrets_are_404(hub: Hub) -> None:
    hook = hub.app.create_webhook(hub.add.s(1, 2))
    assert hub.client.post("/hooks/" + "x" * 43).status_code == 404
    assert hub.client.post("/hooks/" + "x" * 500).status_code == 404
    assert hub.client.get(hook.path).status_code == 405
    assert hub.app.revoke_webhook(hook.secret) is True
    gone = hub.client.post(hook.path)
    assert gone.status_code == 404 and gone.json() == {"error": "no such webhook"}
    assert hub.app.revoke_webhook(hook.secret) is False
    assert hub.app.jobs() == []


def test_only_the_digest_is_stored(hub: Hub) -> None:
    hook = hub.app.create_webhook(hub.add.options(delay=60).s(1, 2))

    async def stored() -> object:
        return await (await hub.app.backend()).webhooks.get(digest(hook.secret))

    record = hub.app._sync(stored())  # type: ignore[arg-type]
    assert record is not None and record.digest != hook.secret and record.delay == 60
    job_id = hub.client.post(hook.path).json()["job_id"]
    assert hub.app.get_job(job_id).status == "scheduled"  # type: ignore[union-attr]


def test_a_webhook_takes_a_signature_of_this_app(hub: Hub) -> None:
    with pytest.raises(TypeError):
        hub.app.create_webhook(hub.add)  # type: ignore[arg-type]
    other = duly.App("sqlite:///:memory:")
    with pytest.raises(ValueError):
        other.create_webhook(hub.add.s(1, 2))
    from datetime import UTC, datetime

    with pytest.raises(ValueError):
        hub.app.create_webhook(hub.add.options(at=datetime.now(UTC)).s(1, 2))
    with pytest.raises(TypeError):
        hub.app.create_webhook(hub.add.s("not", "enough", "args"))
    other.close()
