"""Where a task's own code starts in a traceback (stored errors start there, not in duly)."""

from __future__ import annotations

import os
from types import TracebackType

__all__ = ["user_traceback"]

_WORKER_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_traceback(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` from the first frame after the last one of duly's worker package (the run
    machinery: execute.py, threads.py, and the asyncio frames between them), so a stored
    traceback starts at the task function. Unchanged when nothing follows that frame (the
    error was raised by the worker itself: an unknown task, a timeout)."""
    start = tb
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(_WORKER_DIR):
            start = tb.tb_next
        tb = tb.tb_next
    return start
