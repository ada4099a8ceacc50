"""Time-ordered job ids (ULID: 48-bit millisecond time + 80 random bits, Crockford base32).

Hand-rolled because it is short and on the enqueue hot path (a ULID package costs ~5 µs per
id). The 16 random characters are drawn directly: random bytes from ``os.urandom`` (in blocks)
mapped to the alphabet by ``bytes.translate`` (the low 5 bits of each byte: uniform, 80 bits
per id); the 10 time characters are encoded once per millisecond. Within one process ids are
strictly increasing even inside one millisecond (an id not above the last one becomes its
successor), so "newest first" is "largest id first"; ``new_ids`` gives a batch (a bulk enqueue)
at once, its random parts sorted so they increase without a successor step.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["encode_ulid", "new_id", "new_ids", "ulid_time"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]  # 10 bits -> 2 characters
#: A random byte -> the character of its low 5 bits (256 is a multiple of 32: uniform).
_TO_CHAR = bytes.maketrans(bytes(range(256)), bytes(ord(_ALPHABET[b & 31]) for b in range(256)))
#: Crockford characters -> the digits ``int(text, 32)`` reads.
_TO_DIGITS = str.maketrans(_ALPHABET, "0123456789abcdefghijklmnopqrstuv")
_RANDOM_CHARS = 16  # 80 bits
_RANDOM_BLOCK = 4096  # random characters drawn at once: 256 ids
_MASK_80 = (1 << 80) - 1
_MASK_40 = (1 << 40) - 1
_lock = threading.Lock()
_last = ""  # the last id made ("" sorts before any)
_random = ""
_offset = 0
_prefix_ms = -1
_prefix = ""


def _forked() -> None:
    """A forked child draws its own random block: a copy of the parent's would repeat its
    ids within one millisecond."""
    global _random, _offset
    _random, _offset = "", 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def _time_part(ms: int) -> str:
    """The 10 time characters of millisecond ``ms`` (cached for the current millisecond)."""
    global _prefix_ms, _prefix
    if ms != _prefix_ms:
        _prefix_ms, _prefix = ms, _encode((ms & (2**48 - 1)) << 80)[:10]
    return _prefix


def _successor(ulid: str) -> str:
    """The ULID right after ``ulid`` (the last id, when a new one would not exceed it)."""
    return _encode(int(ulid.translate(_TO_DIGITS), 32) + 1)


def new_id() -> str:
    """A new 26-character ULID, monotonic within this process."""
    global _last, _random, _offset
    with _lock:
        if _offset >= len(_random):
            _random, _offset = os.urandom(_RANDOM_BLOCK).translate(_TO_CHAR).decode(), 0
        ulid = _time_part(time.time_ns() // 1_000_000) + _random[_offset : _offset + _RANDOM_CHARS]
        _offset += _RANDOM_CHARS
        if ulid <= _last:  # same millisecond and a lower draw, or the clock went back
            ulid = _successor(_last)
        _last = ulid
    return ulid


def new_ids(n: int) -> list[str]:
    """``n`` new ULIDs at once, increasing (in list order) and above every earlier one."""
    global _last
    if n <= 0:
        return []
    chars = os.urandom(_RANDOM_CHARS * n).translate(_TO_CHAR).decode()
    parts = sorted([chars[i : i + _RANDOM_CHARS] for i in range(0, len(chars), _RANDOM_CHARS)])
    with _lock:
        prefix = _time_part(time.time_ns() // 1_000_000)
        ids = [prefix + part for part in parts]
        last = _last
        if ids[0] <= last or len(set(parts)) < n:  # rare: make each exceed the one before
            for i, ulid in enumerate(ids):
                if ulid <= last:
                    ids[i] = ulid = _successor(last)
                last = ulid
        _last = ids[-1]
    return ids


def encode_ulid(ms: int, randomness: int) -> str:
    """The ULID of millisecond time ``ms`` and 80-bit ``randomness`` (for derived ids)."""
    return _encode((ms & (2**48 - 1)) << 80 | (randomness & _MASK_80))


def _encode(value: int) -> str:
    # 130 bits (2 leading zeros) = 13 pairs of characters; the halves keep the ints small.
    p = _PAIRS
    hi = value >> 80
    mid = (value >> 40) & _MASK_40
    lo = value & _MASK_40
    return (
        p[hi >> 40]
        + p[(hi >> 30) & 1023]
        + p[(hi >> 20) & 1023]
        + p[(hi >> 10) & 1023]
        + p[hi & 1023]
        + p[mid >> 30]
        + p[(mid >> 20) & 1023]
        + p[(mid >> 10) & 1023]
        + p[mid & 1023]
        + p[lo >> 30]
        + p[(lo >> 20) & 1023]
        + p[(lo >> 10) & 1023]
        + p[lo & 1023]
    )


def ulid_time(ulid: str) -> float:
    """The POSIX time (seconds) in a ULID's time part; ValueError if it is not a ULID."""
    if len(ulid) != 26:
        raise ValueError(f"not a ULID: {ulid!r}")
    ms = 0
    for char in ulid[:10]:
        index = _ALPHABET.find(char.upper())
        if index < 0:
            raise ValueError(f"not a ULID: {ulid!r}")
        ms = ms * 32 + index
    return ms / 1000
