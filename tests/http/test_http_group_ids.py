"""The HTTP API finds a group by the id its caller gave it (PRODUCT §17), on every backend."""

from __future__ import annotations

import pytest
from http_harness import Hub

pytestmark = pytest.mark.timeout(60)


def test_a_group_is_found_by_its_own_id(hub: Hub) -> None:
    group = hub.app.group([hub.add.s(1, 1), hub.add.s(2, 2)], id="obs-event:9")
    again = hub.app.group([hub.add.s(1, 1)], id="obs-event:9")
    assert again.deduplicated
    shown = hub.get("/api/v1/groups/obs-event:9")
    assert (shown["id"], shown["total"], shown["key"]) == ("obs-event:9", 2, "obs-event:9")
    hub.run(*(j.id for j in group.jobs))
    done = hub.get("/api/v1/groups/obs-event:9")
    assert (done["succeeded"], done["pending"]) == (2, 0) and done["completed_at"] is not None
