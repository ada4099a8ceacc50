"""The Redis backend's Lua: every script compiles from its file and its ``--@include`` files
(src/duly/backends/redis/_scripts.py), Redis accepts each, and a bad include is a clear error
when the script is compiled, not a nil global at its first call."""

from __future__ import annotations

import re
from importlib import resources

import pytest
import redis

from duly.backends.redis import _scripts
from duly.backends.redis._scripts import LuaIncludeError, compiled, known_includes

LUA = resources.files("duly.backends.redis").joinpath("lua")
SCRIPTS = sorted(
    f.name.removesuffix(".lua")
    for f in LUA.iterdir()
    if f.name.endswith(".lua") and not f.name.startswith("_")
)
_DEFINES = re.compile(r"^local (?:function )?(\w+(?:\s*,\s*\w+)*)", re.MULTILINE)


def _defined(text: str) -> set[str]:
    """The top-level ``local`` names of a Lua text."""
    return {name for match in _DEFINES.finditer(text) for name in re.split(r"\s*,\s*", match[1])}


def _code(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def test_the_includes_are_the_capability_files() -> None:
    assert known_includes() == [
        "_cancel",
        "_concurrency",
        "_dependencies",
        "_events",
        "_expiry",
        "_freshness",
        "_groups",
        "_handoff",
        "_jobs",
        "_operator",
        "_pausing",
        "_progress",
        "_unique",
    ]


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_helper_a_script_uses_is_in_its_source(name: str) -> None:
    """A script that uses a helper of an include it does not name (directly or through
    another include) would fail at run time on a nil global: its source must define every
    include-defined name its body uses."""
    includes = known_includes()
    helpers = set().union(*(_defined(LUA.joinpath(f"{i}.lua").read_text()) for i in includes))
    body = LUA.joinpath(f"{name}.lua").read_text()
    used = set(re.findall(r"\w+", _code(body))) & helpers
    source, sha = compiled(name)
    assert used <= _defined(source), f"{name}.lua lacks an --@include for {used - _defined(source)}"
    assert len(sha) == 40


def test_finish_keeps_no_capability_logic_of_its_own() -> None:
    """finish.lua calls the capabilities' helpers; it defines none of them."""
    body = LUA.joinpath("finish.lua").read_text()
    assert not re.search(r"^local function", body, re.MULTILINE)
    for include in ("_events", "_groups", "_freshness", "_cancel"):
        assert f"--@include {include}\n" in body


def test_redis_accepts_every_script(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        for name in SCRIPTS:
            source, sha = compiled(name)
            assert client.script_load(source) == sha, name
    finally:
        client.close()


def _fake_files(monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> None:
    """Lua files that exist beside the real ones for this test only."""
    real_read, real_exists = _scripts._read, _scripts._exists
    monkeypatch.setattr(_scripts, "_read", lambda n: files[n] if n in files else real_read(n))
    monkeypatch.setattr(_scripts, "_exists", lambda n: n in files or real_exists(n))


def test_a_missing_include_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_files(monkeypatch, {"broken.lua": "-- broken.lua\n--@include _nope\nreturn 1\n"})
    with pytest.raises(LuaIncludeError, match=r"lua/broken.lua: --@include _nope: no include"):
        compiled.__wrapped__("broken")


def test_an_include_cycle_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    files = {
        "looped.lua": "--@include _a\nreturn 1\n",
        "_a.lua": "--@include _b\nlocal A = 1\n",
        "_b.lua": "--@include _a\nlocal B = 2\n",
    }
    _fake_files(monkeypatch, files)
    with pytest.raises(LuaIncludeError, match=r"cycle _a -> _b -> _a"):
        compiled.__wrapped__("looped")


def test_an_include_below_the_header_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_files(monkeypatch, {"late.lua": "-- late.lua\nlocal x = 1\n--@include _jobs\n"})
    with pytest.raises(LuaIncludeError, match="below the header"):
        compiled.__wrapped__("late")


def test_includes_come_before_what_uses_them() -> None:
    """_cancel uses _groups, which uses _events: each definition precedes its first use."""
    source, _ = compiled("finish")
    assert source.index("local function emit") < source.index("local function settle_member")
    assert source.index("local function settle_member") < source.index(
        "local function end_cancelled"
    )
