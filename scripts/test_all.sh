#!/usr/bin/env bash
# The whole suite on both databases, the two runs side by side (what `make test` runs):
#
#   scripts/test_all.sh [TEST_ARGS...]
#
# - SQLite: the suite, then (without TEST_ARGS) FAST_PATH_OFF_TESTS again with CODEX_FAST_PATH=0;
# - PostgreSQL, on a throwaway cluster (scripts/with_postgres.sh): the same two.
#
# The runs share nothing but the checkout's var/ (whatever they install there is renamed into
# place whole: tests/served.install_once) and the machine: each has its own database, ports,
# browsers and servers. Each writes to var/test-logs/<database>.log, printed whole once it
# ends, so that the two never interleave; the exit status is the first failure's.
#
# Environment: PY (the interpreter, default .venv/bin/python), FAST_PATH_OFF_TESTS (module
# list), CODEX_REQUIRE_POSTGRES=1 (a missing PostgreSQL is an error, not a skipped run),
# CODEX_TEST_SERIAL=1 (one run after the other, for a machine with one core).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PY:-.venv/bin/python}
logs=var/test-logs
mkdir -p "$logs"

# How each database's run starts a command: SQLite in the checkout, PostgreSQL on its cluster.
sqlite() { env -u DATABASE_URL "$@"; }
postgresql() { bash scripts/with_postgres.sh "$@"; }

# suite DATABASE [TEST_ARGS...]: the suite on DATABASE, then (without TEST_ARGS) the fast path off.
suite() {
    local database=$1
    shift
    "$database" "$PY" manage.py test --noinput "$@" || return
    if [[ $# -eq 0 ]]; then
        echo "==> the fast path off (CODEX_FAST_PATH=0) on $database"
        # shellcheck disable=SC2086
        CODEX_FAST_PATH=0 "$database" "$PY" manage.py test --noinput $FAST_PATH_OFF_TESTS
    fi
}

names=(sqlite)
if bash scripts/with_postgres.sh --check >/dev/null 2>&1; then
    names+=(postgresql)
elif [[ "${CODEX_REQUIRE_POSTGRES:-}" == "1" ]]; then
    echo "ERROR: CODEX_REQUIRE_POSTGRES=1 but no PostgreSQL server binaries were found" >&2
    echo "       (looked in /usr/lib/postgresql/*/bin, pg_config --bindir, PATH)." >&2
    echo "       Install with: apt-get update && apt-get install -y postgresql" >&2
    exit 3
else
    {
        echo ""
        echo "WARNING: *** PostgreSQL test run SKIPPED: no PostgreSQL server binaries found. ***"
        echo "WARNING: Only the SQLite run was executed. Install PostgreSQL (apt-get install postgresql)"
        echo "WARNING: or set CODEX_REQUIRE_POSTGRES=1 to make this an error."
    } >&2
fi

pids=()
for name in "${names[@]}"; do
    echo "==> tests on $name (log: $logs/$name.log)"
    if [[ "${CODEX_TEST_SERIAL:-}" == "1" ]]; then
        suite "$name" "$@" >"$logs/$name.log" 2>&1
        echo $? >"$logs/$name.status"
    else
        (suite "$name" "$@" >"$logs/$name.log" 2>&1; echo $? >"$logs/$name.status") &
        pids+=($!)
    fi
done
# An interrupted make test stops both runs (and, through with_postgres.sh's own trap, the cluster).
trap 'kill "${pids[@]}" 2>/dev/null; exit 130' INT TERM
for pid in "${pids[@]}"; do
    wait "$pid"
done

status=0
for name in "${names[@]}"; do
    code=$(cat "$logs/$name.status" 2>/dev/null || echo 1)
    printf '\n========== tests on %s: exit %s ==========\n' "$name" "$code"
    cat "$logs/$name.log"
    if [[ "$code" != "0" && "$status" == "0" ]]; then
        status=$code
    fi
done
for name in "${names[@]}"; do
    summary=$(grep -E '^(Ran|OK|FAILED)' "$logs/$name.log" | tr '\n' ' ')
    printf '%-10s exit %s  %s\n' "$name" "$(cat "$logs/$name.status")" "$summary"
done
exit "$status"
