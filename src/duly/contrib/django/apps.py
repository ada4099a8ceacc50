"""The Django application ``duly.contrib.django``: imports every installed app's ``tasks``."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules

__all__ = ["DulyConfig"]


class DulyConfig(AppConfig):
    """Put ``"duly.contrib.django"`` in ``INSTALLED_APPS``: ``manage.py duly ...`` and the
    ``tasks.py`` of every installed app are found."""

    name = "duly.contrib.django"
    label = "duly"
    verbose_name = "duly"

    def ready(self) -> None:
        """Register the tasks: import ``<app>.tasks`` of every installed app that has one."""
        autodiscover_modules("tasks")
