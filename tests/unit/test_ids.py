"""Job ids: valid ULIDs, time-ordered, strictly increasing, unique across threads."""

from __future__ import annotations

import threading
import time

from hypothesis import given
from hypothesis import strategies as st

import duly._ids
from duly._ids import encode_ulid, new_id, new_ids, ulid_time

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def reference_encode(value: int) -> str:
    """The ULID spec's encoding, five bits at a time."""
    return "".join(ALPHABET[(value >> shift) & 31] for shift in range(125, -1, -5))


@given(st.integers(0, 2**48 - 1), st.integers(0, 2**80 - 1))
def test_encoding_matches_the_ulid_spec(ms: int, randomness: int) -> None:
    ulid = encode_ulid(ms, randomness)
    assert ulid == reference_encode(ms << 80 | randomness)
    assert ulid_time(ulid) == ms / 1000


def test_ids_are_strictly_increasing_and_carry_the_time() -> None:
    before = time.time()
    ids = [new_id() for _ in range(5000)]  # spans several random blocks, many per millisecond
    after = time.time()
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 26 and set(i) <= set(ALPHABET) for i in ids)
    assert before - 0.001 <= ulid_time(ids[0]) <= ulid_time(ids[-1]) <= after + 0.001


def test_ids_are_unique_across_threads() -> None:
    found: list[list[str]] = [[] for _ in range(4)]

    def make(out: list[str]) -> None:
        out.extend(new_id() for _ in range(2000))

    threads = [threading.Thread(target=make, args=(out,)) for out in found]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for out in found for i in out]
    assert len(set(every)) == len(every)
    assert all(out == sorted(out) for out in found)


def test_a_batch_of_ids_increases_and_follows_every_earlier_id() -> None:
    before = time.time()
    first = [new_id() for _ in range(10)]
    batch = new_ids(3000)
    later = new_id()
    after = time.time()
    every = [*first, *batch, later]
    assert every == sorted(every) and len(set(every)) == len(every)
    assert all(len(i) == 26 and set(i) <= set(ALPHABET) for i in batch)
    assert before - 0.001 <= ulid_time(batch[0]) <= ulid_time(batch[-1]) <= after + 0.001
    assert new_ids(0) == []


def test_an_id_that_would_not_exceed_the_last_becomes_its_successor() -> None:
    """A clock gone back (or a lower draw in the same millisecond) still gives increasing ids:
    each the one right after the last."""
    last = new_id()
    ms = int(time.time() * 1000) + 60_000  # the last id a minute ahead of the clock
    with duly._ids._lock:
        duly._ids._last = encode_ulid(ms, 5)
    try:
        assert new_id() == encode_ulid(ms, 6)
        assert new_ids(2) == [encode_ulid(ms, 7), encode_ulid(ms, 8)]
    finally:
        with duly._ids._lock:  # the ids of this test are not used elsewhere
            duly._ids._last = last
