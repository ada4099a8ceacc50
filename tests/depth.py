"""How many random cases the property tests (state machines, schemathesis) try.

``make test`` tries a few programs per rule; ``make thorough`` (``DULY_TEST_DEPTH=thorough``)
tries the full counts. The rules and the invariants checked after each step are the same at
either depth: only how many random programs each machine sees changes. The machines start
from a fresh random seed each run, so the quick runs still add up to new programs over time,
and a failure any run finds is replayed first by hypothesis' example database.
"""

from __future__ import annotations

import os

_DEPTHS = ("quick", "thorough")
DEPTH = os.environ.get("DULY_TEST_DEPTH", "quick") or "quick"
if DEPTH not in _DEPTHS:
    raise RuntimeError(f"DULY_TEST_DEPTH={DEPTH!r}: expected one of {', '.join(_DEPTHS)}")


def examples(quick: int, thorough: int) -> int:
    """``quick`` in the default run, ``thorough`` under ``DULY_TEST_DEPTH=thorough``."""
    return thorough if DEPTH == "thorough" else quick
