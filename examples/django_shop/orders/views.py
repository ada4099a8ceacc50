"""JSON views: place an order, look it up (with its jobs), ship it."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from orders.models import Order
from orders.services import place_order, ship_order
from orders.tasks import order_unshipped

from duly.contrib.django import app


@csrf_exempt
@require_POST
def create_order(request: HttpRequest) -> JsonResponse:
    """POST email=...: the order is stored with its watch and confirmation (or not at all)."""
    try:
        order = place_order(request.POST["email"])
    except (KeyError, ValueError) as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    return JsonResponse({"id": order.id}, status=201)


@require_GET
def order_detail(request: HttpRequest, order_id: int) -> JsonResponse:
    """The order, its emails, and every job about it (watch checks and confirmation)."""
    order = Order.objects.filter(id=order_id).first()
    if order is None:
        return JsonResponse({"error": "no such order"}, status=404)
    watch_key = order_unshipped.key_of((), {"order_id": order.id})
    jobs = app.jobs(key=watch_key) + app.jobs(key=f"order:{order.id}")
    return JsonResponse(
        {
            "id": order.id,
            "shipped": order.shipped_at is not None,
            "emails": [e.kind for e in order.emails.order_by("id")],
            "jobs": [{"id": j.id, "task": j.task, "status": j.status} for j in jobs],
        }
    )


@csrf_exempt
@require_POST
def ship(request: HttpRequest, order_id: int) -> JsonResponse:
    """Ship the order: its watch stops."""
    return JsonResponse({"stopped": ship_order(order_id)})
