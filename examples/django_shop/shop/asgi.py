"""The shop as an ASGI application, with duly's dashboard and API under ``/jobs/``.

Run it: ``DULY_ADMIN_TOKENS=<token> uvicorn shop.asgi:application`` (from examples/django_shop),
then open ``http://127.0.0.1:8000/jobs/login?token=<token>``.
"""

import os

from django.core.asgi import get_asgi_application

from duly.contrib.django import with_dashboard

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")

application = with_dashboard(get_asgi_application(), path="/jobs")
