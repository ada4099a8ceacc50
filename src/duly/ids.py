"""Time-ordered job ids (ULID: 48-bit millisecond time + 80 random bits, Crockford base32).

Hand-rolled because it is 20 lines and on the enqueue hot path; within one process ids are
strictly increasing even inside one millisecond, so "newest first" is "largest id first".
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["new_id"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last = 0


def new_id() -> str:
    """A new 26-character ULID, monotonic within this process."""
    global _last
    with _lock:
        value = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10), "big")
        if value <= _last:
            value = _last + 1
        _last = value
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))
