"""Settings of the shop: Django's database and duly's from the environment.

``SHOP_DATABASE_URL``: the shop's database, ``sqlite:///shop.db`` (default) or
``postgresql://user@host:5432/db`` (``?search_path=`` puts the tables in a schema).
``DULY_URL``: where the jobs live (default ``sqlite:///shop-jobs.db``). With both on the same
PostgreSQL database, an order and its watch are stored by one transaction.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "django-shop-example-not-a-secret"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
USE_TZ = True
ROOT_URLCONF = "shop.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "duly.contrib.django",  # manage.py duly ...; imports every app's tasks.py
    "orders",
]


def database(url: str) -> dict[str, Any]:
    """A ``DATABASES`` entry from a URL (sqlite:///path or postgresql://...)."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": parts.path.removeprefix("/")}
    query = parse_qs(parts.query)
    options = {}
    if "search_path" in query:
        options["options"] = f"-c search_path={query['search_path'][0]}"
    return {
        "ENGINE": "django.db.backends.postgresql",  # psycopg 3
        "NAME": parts.path.lstrip("/"),
        "USER": parts.username or "",
        "PASSWORD": parts.password or "",
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        "OPTIONS": options,
    }


DATABASES = {"default": database(os.environ.get("SHOP_DATABASE_URL", "sqlite:///shop.db"))}

# The App of ``from duly.contrib.django import app``.
DULY = {"URL": os.environ.get("DULY_URL", "sqlite:///shop-jobs.db")}
