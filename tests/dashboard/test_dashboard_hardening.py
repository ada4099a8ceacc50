"""Issue 28 item 8 in a real Chromium: bidi controls in keys are shown, not applied; a
freshness named with ``/`` does not break the key page."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import quote

from served import ADMIN

SPOOF = "user\u202etxt.exe"  # shown as "userexe.txt" if the override applied


def test_bidi_controls_in_a_key_are_shown_escaped(make_dash: Any) -> None:
    def setup(app: Any) -> None:
        app.freshness("team/profiles", sync=lambda scope, full: None, max_staleness=timedelta(1))

    dash = make_dash(setup=setup)
    app = dash.app
    marks = "\u200e\u200f\u202a\u2066\u2069"
    job = app.tasks["t.add"].options(key=SPOOF).enqueue(1, 2)
    other = app.tasks["t.add"].options(key=f"k{marks}").enqueue(1, 2)
    app.mirrors["team/profiles"].check(SPOOF)
    page = dash.page(ADMIN, f"/key/{quote(SPOOF, safe='')}")
    page.wait_for_selector(f'#key-jobs tr[data-id="{job.id}"]')
    assert page.locator("#entity-key").inner_text() == "user\\u202Etxt.exe"
    row = page.locator(f'#key-jobs tr[data-id="{job.id}"]').inner_text()
    assert "user\\u202Etxt.exe" in row and "\u202e" not in row
    # The key page asks every freshness for this key's scope, "team/profiles" too.
    page.wait_for_selector("#key-scopes .scope")
    assert page.locator("#key-scopes .scope h3").all_inner_texts() == ["team/profiles"]
    page.goto(f"{dash.url}/jobs")
    page.wait_for_selector(f'tr[data-id="{other.id}"]')
    text = page.locator(f'tr[data-id="{other.id}"]').inner_text()
    assert "k\\u200E\\u200F\\u202A\\u2066\\u2069" in text
    assert not any(c in page.locator("#view").inner_text() for c in marks + "\u202e")
