"""A running job's progress and checkpoints (PRODUCT §16): the public ``Progress`` and the
per-run ``RunProgress`` the job context writes and the worker's heartbeat reads.

``set_progress`` and ``checkpoint`` only keep the latest value in memory (no I/O, callable as
often as a loop turns, from the job's thread or the event loop); the worker's heartbeat takes
what changed (``take``) and stores it with the leases (``duly.backends.progress``), at most
about once a second, and takes the rest once more right before it reports the run's outcome.
"""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from duly._records import ProgressReport
from duly._serialization import decode, encode

__all__ = ["MAX_MESSAGE", "Progress", "RunProgress", "decode_progress"]

#: The longest progress message (characters).
MAX_MESSAGE: Final = 1000
#: What a checkpoint of ``None`` is stored as: no cursor (the next run starts from the start).
CLEARED: Final = b"null"


class Progress(msgspec.Struct, frozen=True):
    """How far a job got, as its run last reported it (``JobInfo.progress``): ``fraction`` of
    the work done (0 to 1), an optional ``message`` ("page 3 of 7") and when (aware UTC)."""

    fraction: float
    message: str | None
    at: datetime


def decode_progress(raw: bytes | None) -> Progress | None:
    """A stored progress (JSON ``{"fraction", "message", "at"}``, ``at`` POSIX seconds), or
    None when absent or unreadable (a record never fails to show because of it)."""
    if raw is None:
        return None
    try:
        value = decode(raw)
        fraction, message, at = value["fraction"], value.get("message"), value["at"]
        return Progress(
            fraction=float(fraction),
            message=None if message is None else str(message),
            at=datetime.fromtimestamp(float(at), UTC),
        )
    except (ValueError, TypeError, KeyError, OverflowError, OSError):
        return None


def _check_fraction(fraction: object) -> float:
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise TypeError(f"set_progress(fraction) must be a number from 0 to 1, got {fraction!r}")
    value = float(fraction)
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"set_progress(fraction) must be from 0 to 1, got {fraction!r}")
    return value


def _check_message(message: object) -> str | None:
    if message is None:
        return None
    if not isinstance(message, str):
        raise TypeError(f"set_progress(message=) must be a str or None, got {message!r}")
    if len(message) > MAX_MESSAGE:
        raise ValueError(f"a progress message is at most {MAX_MESSAGE} characters")
    return message


class RunProgress:
    """The progress and checkpoint of one run: the latest values set, and whether the store
    has them yet. ``cursor`` starts as the checkpoint the job's record holds (JSON bytes)."""

    __slots__ = ("_cursor", "_lock", "_progress", "_sent_cursor", "_unsent_cursor", "stored")

    def __init__(self, cursor: bytes | None = None) -> None:
        self._lock = threading.Lock()
        #: The checkpoint the job's record held when the run began.
        self.stored = cursor
        self._cursor = cursor
        self._unsent_cursor: bytes | None = None
        self._progress: bytes | None = None
        self._sent_cursor = cursor

    @property
    def cursor(self) -> Any:
        """The last checkpoint (decoded), None if none."""
        raw = self._cursor
        return None if raw is None else decode(raw)

    @property
    def pending(self) -> bool:
        """Whether something was set that the store does not have yet."""
        return self._progress is not None or self._unsent_cursor is not None

    def set_progress(self, fraction: float, message: str | None, now: float) -> None:
        """Keep ``fraction`` / ``message`` (checked) as the latest progress, set at ``now``."""
        value = {"fraction": _check_fraction(fraction), "message": _check_message(message)}
        raw = encode({**value, "at": now})
        with self._lock:
            self._progress = raw

    def checkpoint(self, cursor: Any) -> None:
        """Keep ``cursor`` (any JSON value; TypeError otherwise) as the latest checkpoint."""
        try:
            raw = encode(cursor)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"a checkpoint must be a JSON value, got {cursor!r}: {exc}") from exc
        with self._lock:
            self._cursor = raw
            self._unsent_cursor = raw

    def take(self, job_id: str, *, clear_cursor: bool = False) -> ProgressReport | None:
        """What the store does not have yet, as a report (None: nothing); marked sent.
        ``clear_cursor``: report the checkpoint cleared instead (a run that starts over)."""
        with self._lock:
            progress, cursor = self._progress, self._unsent_cursor
            self._progress = self._unsent_cursor = None
            if clear_cursor:
                cursor = CLEARED if self._sent_cursor not in (None, CLEARED) else None
                self._cursor = None
            if cursor is not None:
                self._sent_cursor = cursor
        if progress is None and cursor is None:
            return None
        return ProgressReport(job_id, progress, cursor)

    def apply(self, progress: bytes | None, cursor: bytes | None) -> None:
        """Take values another process encoded (an isolated run's child, see
        ``duly._worker.isolation``) as the latest set here; None changes nothing."""
        with self._lock:
            if progress is not None:
                self._progress = progress
            if cursor is not None:
                self._cursor = self._unsent_cursor = cursor

    def give_back(self, report: ProgressReport) -> None:
        """``report`` was not stored: send its values again, unless newer ones were set."""
        with self._lock:
            if self._progress is None:
                self._progress = report.progress
            if self._unsent_cursor is None and report.cursor is not None:
                self._unsent_cursor = report.cursor
