"""Time-driven work: periodic tasks (PRODUCT §5)."""

from duly._scheduler.periodic import CatchUp, Schedule, Scheduler

__all__ = ["CatchUp", "Schedule", "Scheduler"]
