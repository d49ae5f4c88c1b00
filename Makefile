# Developer entry points.
#
#   make run                      bootstrap, local key (once), migrate, collectstatic, (codex_firstrun), uvicorn via
#                                 codex_site.serve (proxy headers off, concurrency limit)
#   make run PORT=9000            ... on another port (DJANGO_DEBUG defaults to 1)
#   make test                     migrations check, then the tests on SQLite and on a
#                                 throwaway PostgreSQL (scripts/with_postgres.sh) side by side
#                                 (scripts/test_all.sh); each run ends with FAST_PATH_OFF_TESTS
#                                 again with CODEX_FAST_PATH=0
#   make test TEST_ARGS="tests.test_x -v 2"
#   make bench                    the MCP tools against a no-op SDK server, with wrk,
#                                 on SQLite (figures only; BENCH_ARGS="--duration 5")
#   make bench-pg                 ... on a throwaway PostgreSQL
#   make profile-pg               where a get's and a search's CPU goes, by layer (py-spy, PostgreSQL;
#                                 make profile: SQLite; BENCH_ARGS="--scenarios get --seconds 20")
#   make bench-scale              search/save/update in a 1,000,000-entry codex (PostgreSQL)
#   make bench-capacity           the capacity model's measured inputs, as one table (PostgreSQL;
#                                 BENCH_ARGS="--entries 0": without the 1,000,000-entry fill)
#
# CODEX_REQUIRE_POSTGRES=1 makes a missing PostgreSQL a hard failure for
# `make test` (CI sets it); otherwise the PostgreSQL run is skipped with a
# warning.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PORT ?= 8000
TEST_ARGS ?=
BENCH_ARGS ?=
CODEX_REQUIRE_POSTGRES ?=

# The contract-level, MCP end-to-end and concurrency tests, run again on the plain Django ORM
# (CODEX_FAST_PATH=0) after the full suite (not when TEST_ARGS picks a subset).
FAST_PATH_OFF_TESTS := tests.test_services_save tests.test_services_update tests.test_services_delete \
	tests.test_selectors_search tests.test_selectors_recent tests.test_quotas tests.test_transfer \
	tests.test_mcp_auth tests.test_mcp_e2e tests.test_mcp_errors tests.test_concurrency \
	tests.test_fast_path_equivalence

VENV := .venv
PY := $(VENV)/bin/python

.PHONY: run test bootstrap bootstrap-test lint bench bench-pg profile profile-pg bench-scale bench-capacity

bootstrap:
	@bash scripts/bootstrap.sh

# The server's packages and the test-only ones (requirements-test.txt).
bootstrap-test:
	@bash scripts/bootstrap.sh --test

# DEBUG on by default for local runs; an explicitly set DJANGO_DEBUG
# (even empty or 0) in the environment or on the make command line wins.
run: export DJANGO_DEBUG ?= 1
run: export CODEX_PUBLIC_URL ?= http://127.0.0.1:$(PORT)
run: bootstrap
	@# First run: a local secret key, kept out of git in var/ (settings only read it, in debug).
	@mkdir -p "$${CODEX_VAR_DIR:-var}"
	@key="$${CODEX_VAR_DIR:-var}/dev-secret-key"; if [ ! -s "$$key" ]; then \
		(umask 077 && $(PY) -c 'import secrets; print(secrets.token_urlsafe(50))' > "$$key"); \
		echo "made a local secret key in $$key"; \
	fi
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput -v 0
	@if $(PY) manage.py help codex_firstrun >/dev/null 2>&1; then \
		echo "$(PY) manage.py codex_firstrun"; \
		$(PY) manage.py codex_firstrun; \
	fi
	exec $(PY) -m codex_site.serve --host 127.0.0.1 --port $(PORT)

# makemigrations needs *some* SECRET_KEY (only the test runner brings its
# own); give it a throwaway one unless the caller set one.
test: bootstrap-test
	env -u DATABASE_URL SECRET_KEY="$${SECRET_KEY:-makemigrations-check-only-$$RANDOM$$RANDOM$$RANDOM-not-a-real-key}" \
		$(PY) manage.py makemigrations --check --dry-run
	PY=$(PY) FAST_PATH_OFF_TESTS="$(FAST_PATH_OFF_TESTS)" CODEX_REQUIRE_POSTGRES="$(CODEX_REQUIRE_POSTGRES)" \
		bash scripts/test_all.sh $(TEST_ARGS)

# Ruff (format + lint), configured in pyproject.toml; kept out of requirements.txt.
lint: bootstrap
	$(VENV)/bin/python -m pip install -q ruff==0.17.6
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

# Benchmarks print figures and never fail on speed. bench_mcp.py installs wrk
# with apt-get when it is missing (as root).
bench: bootstrap
	$(PY) scripts/bench_mcp.py $(BENCH_ARGS)

bench-pg: bootstrap
	bash scripts/with_postgres.sh $(PY) scripts/bench_mcp.py $(BENCH_ARGS)

# py-spy is pinned in requirements-test.txt.
profile: bootstrap-test
	$(PY) scripts/profile_mcp.py $(BENCH_ARGS)

profile-pg: bootstrap-test
	bash scripts/with_postgres.sh $(PY) scripts/profile_mcp.py $(BENCH_ARGS)

bench-scale: bootstrap
	bash scripts/with_postgres.sh $(PY) scripts/bench_scale.py $(BENCH_ARGS)

# bench_capacity.py imports tests.wire (the round trips): the test packages too.
bench-capacity: bootstrap-test
	bash scripts/with_postgres.sh $(PY) scripts/bench_capacity.py $(BENCH_ARGS)
