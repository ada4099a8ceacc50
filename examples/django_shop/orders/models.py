"""An order, and the emails sent about it (the mailer is fake: it stores what it sends)."""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    """A customer's order; ``ship_after``: the customer asked to ship no earlier."""

    email = models.EmailField()
    placed_at = models.DateTimeField()
    ship_after = models.DateTimeField(null=True, blank=True)
    shipped_at = models.DateTimeField(null=True, blank=True)


class Email(models.Model):
    """An email sent about an order: ``kind`` is confirmation, reminder or escalation."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="emails")
    kind = models.CharField(max_length=20)
    sent_at = models.DateTimeField(auto_now_add=True)
