# duly's developer commands. `make demo` and `make test` are the two a newcomer needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: install bytecode demo test thorough lint typecheck unit chaos bench docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

## promtool checks the alert rules of docs/observability/ (their tests skip without it, or fail
## under CI); fetched once, as a file in the venv.
$(VENV)/bin/promtool: | $(STAMP)
	bash tools/get-promtool.sh $(VENV)/bin || echo "promtool not installed: see tools/get-promtool.sh"

install: $(STAMP) $(VENV)/bin/promtool

## Compile the sources to bytecode (incremental, ~1 s): where PYTHONDONTWRITEBYTECODE is set,
## as on this project's CI machine, every `duly` process a test starts would otherwise compile
## duly from source again (~0.2 s of CPU each, a few hundred processes per run). bench/.venv (the
## peers' venv, `make bench`) is left out: it is not ours, and not all of it is Python 3.11.
bytecode: install
	$(PY) -m compileall -q -x '/\.venv/' src tests examples bench chaos > /dev/null

## Install, then run duly's main job end to end on the embedded SQLite default.
demo: install
	$(VENV)/bin/duly demo

## Install, then run every check and the whole default test suite: the unit tier first (no
## service, seconds), then the rest on TEST_WORKERS processes that steal work from each other
## at the end. Most tests wait (on workers, leases, timers) more than they compute, so more
## processes than cores pay off; the suite's CPU time on 2 cores is the floor. Measured on
## this machine (2,824 tests): `make test` 404 s at -n 3 (pytest 395 s), 352 s at -n 4
## (pytest 337-356 s over three runs), 326 s at -n 5 (pytest 318 s); -n 6 gave pytest 320 s
## for 11 % more CPU.
TEST_WORKERS ?= 5
test: install bytecode unit lint typecheck
	$(PY) -m pytest -m "not slow" -q -n $(TEST_WORKERS) --dist worksteal --ignore=tests/unit --durations=30

## The default suite with the property tests at full depth (25 programs per state machine and
## backend instead of 10, 50 schemathesis cases per operation instead of 15: tests/depth.py).
thorough: install bytecode unit
	DULY_TEST_DEPTH=thorough $(PY) -m pytest -m "not slow" -q -n $(TEST_WORKERS) --dist worksteal --ignore=tests/unit --durations=30

## The pure rules alone (tests/unit): no backend, no service.
unit: install
	$(PY) -m pytest tests/unit -q

lint: install
	$(VENV)/bin/ruff check src tests examples bench chaos
	$(VENV)/bin/ruff format --check src tests examples bench chaos
	$(VENV)/bin/lint-imports

typecheck: install
	$(VENV)/bin/mypy

## The documentation site (MkDocs, strict: a warning fails) into site/; `mkdocs serve` to browse.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

## Long fault-injection scenarios (issue 3); prints one table.
chaos: install
	$(PY) -m chaos.run

## duly against its peers (installs them into bench/.venv).
bench: install
	bash bench/setup.sh && bench/.venv/bin/python bench/run.py

clean:
	rm -rf $(VENV) site .mypy_cache .ruff_cache .pytest_cache duly.db duly.db-*
