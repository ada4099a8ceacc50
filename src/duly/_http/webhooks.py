"""``POST /hooks/{secret}``: run a webhook (``app.create_webhook``). No token: the secret is
the credential. 202 with the job's id; an unknown or revoked secret is a 404."""

from __future__ import annotations

from typing import Final

from duly._errors import TaskNotFound
from duly._http.api import ApiError, Call, Endpoint
from duly._http.models import HookAccepted
from duly._webhooks import fire_webhook

__all__ = ["ENDPOINTS"]


async def run_webhook(call: Call) -> HookAccepted:
    """Enqueue the webhook's job (its arguments were fixed at creation; a body is ignored)."""
    try:
        job_id = await fire_webhook(call.app, call.path["secret"])
    except TaskNotFound as exc:
        raise ApiError(503, str(exc)) from None
    if job_id is None:
        raise ApiError(404, "no such webhook")
    return HookAccepted(job_id=job_id)


ENDPOINTS: Final = (
    Endpoint(
        "POST",
        "/hooks/{secret}",
        run_webhook,
        HookAccepted,
        "Run a webhook",
        access="public",
        status=202,
        errors=(404, 503),
        tags=("webhooks",),
    ),
)
