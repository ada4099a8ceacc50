"""A child's ``LeaseShare`` never blocks on its supervisor's pipe (``duly._worker.leases``).

A supervisor that stops reading (frozen) lets the pipe fill; the child drops what does not fit
rather than wait, never tears a line, and the next ``held`` (each heartbeat's) goes through once
the supervisor reads again.
"""

from __future__ import annotations

import json
import os
import threading

from duly._worker.leases import LeaseShare


def _read_all(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return b"".join(chunks)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def test_a_full_pipe_drops_messages_instead_of_blocking_and_never_tears_a_line() -> None:
    read, write = os.pipe()
    share = LeaseShare(write)
    # Ids long enough that a message is far above PIPE_BUF: a partial write must be finished.
    ids = [f"job-{n:05d}-" + "x" * 40 for n in range(400)]
    sent = threading.Event()

    def flood() -> None:
        for n in range(200):  # ~4 MB: far more than a pipe holds
            share.held("w1", ids[: 1 + n])
        share.bye("w1")  # waits a little for room, then gives up
        sent.set()

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    thread.join(30)
    try:
        assert sent.is_set(), "a full pipe blocked the child"
        assert share.dropped > 0
        first = _read_all(read)  # may end in a line written in part: its rest goes first
        share.held("w1", ids[:3])  # the supervisor reads again: the next heartbeat goes through
        assert share.dropped == 0
        lines = (first + _read_all(read)).split(b"\n")
        assert lines[-1] == b""  # ends with a whole line
        messages = [json.loads(line) for line in lines[:-1]]  # none torn
        assert all(m["worker"] == "w1" for m in messages)
        assert len(messages) > 1 and messages[-1] == {"worker": "w1", "held": ids[:3]}
    finally:
        if not sent.is_set():
            _read_all(read)  # unblock the writer
        os.close(read)
        os.close(write)
