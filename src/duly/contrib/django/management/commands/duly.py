"""``python manage.py duly ...``: the ``duly`` command line on the project's App.

Every ``duly`` command and option works as documented for the ``duly`` script (``manage.py
duly --help``, ``manage.py duly worker --concurrency 16``, ``manage.py duly jobs --status
failed``); the App is ``duly.contrib.django:app`` (built from ``settings.DULY``) unless
``--app`` names another.
"""

from __future__ import annotations

import os
import sys
from argparse import REMAINDER
from typing import Any

import click
from django.core.management.base import BaseCommand, CommandError, CommandParser

from duly._cli import cli

__all__ = ["Command"]

#: The App every command uses unless told otherwise (``DULY_APP`` is the CLI's --app default;
#: ``duly worker --processes N`` children inherit it).
PROJECT_APP = "duly.contrib.django:app"


class Command(BaseCommand):
    """Run a ``duly`` command (worker, scheduler, status, jobs, retry, cancel, stats, ...)."""

    help = "duly's command line on this project's App: manage.py duly --help"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs=REMAINDER, help="a duly command and its options")

    def run_from_argv(self, argv: list[str]) -> None:
        """``manage.py duly ...``: the arguments go to duly's CLI untouched, and so does the
        exit code (1: unknown job or refused action, 2: bad argument or backend down)."""
        os.environ.setdefault("DULY_APP", PROJECT_APP)
        cli.main(args=argv[2:], prog_name=f"{os.path.basename(argv[0])} duly")

    def handle(self, *args: Any, **options: Any) -> None:
        """``call_command("duly", "jobs", "--json")``: a non-zero exit is a CommandError."""
        os.environ.setdefault("DULY_APP", PROJECT_APP)
        try:
            code = cli.main(args=list(args), prog_name="manage.py duly", standalone_mode=False)
        except SystemExit as exc:
            code = exc.code
        except click.ClickException as exc:
            raise CommandError(exc.format_message()) from exc
        sys.stdout.flush()
        if code not in (0, None):
            raise CommandError(f"duly {' '.join(args)}: exit {code}", returncode=int(code))
