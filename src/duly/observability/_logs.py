"""``duly worker --log-format json``: one JSON object per log line, for log shippers.

Each line carries ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message`` and, when the
record has them (the worker's job lines do, see ``duly._worker.reporting``), ``job_id``,
``task``, ``attempt``, ``max_attempts``, ``queue`` and ``worker``; an exception comes as a
``traceback`` string. Nothing but the stdlib.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

__all__ = ["JOB_FIELDS", "JsonFormatter"]

#: The ``extra`` fields copied from a log record to its JSON line when present.
JOB_FIELDS = ("job_id", "task", "attempt", "max_attempts", "queue", "worker")


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON (never a bare newline inside it)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON object on one line."""
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        for name in JOB_FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["traceback"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False)
