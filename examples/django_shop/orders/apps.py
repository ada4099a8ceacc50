"""The orders application."""

from django.apps import AppConfig


class OrdersConfig(AppConfig):
    """Orders and the emails sent about them."""

    name = "orders"
    default_auto_field = "django.db.models.BigAutoField"
