"""The ``duly`` command line: thin wrappers over the library (logic lives in ``duly``)."""

from __future__ import annotations

from duly._cli.common import cli

__all__ = ["cli", "main"]

# each module's commands, imported when first used (LazyGroup)
_COMMANDS = {
    "worker": ("worker", "scheduler"),
    "inspect": (
        "status",
        "jobs",
        "retry",
        "cancel",
        "stats",
        "queues",
        "workers",
        "watches",
        "migrate",
    ),
    "operate": ("pause", "resume"),
    "freshness": ("freshness", "refresh", "forget"),
    "groups": ("groups",),
    "schedules": ("schedules", "unschedule"),
    "dashboard": ("dashboard",),
    "demo": ("demo",),
    "bench": ("bench",),
}
cli.lazy.update(
    {name: f"duly._cli.{module}:{name}" for module, names in _COMMANDS.items() for name in names}
)


def main() -> None:
    """Entry point of the ``duly`` script."""
    cli.main(prog_name="duly", standalone_mode=True)


if __name__ == "__main__":  # pragma: no cover
    main()
