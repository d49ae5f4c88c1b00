#!/usr/bin/env bash
# Run a command against a throwaway PostgreSQL cluster.
#
# Usage:
#   scripts/with_postgres.sh CMD [ARGS...]   start a temp cluster, export
#                                            DATABASE_URL, run CMD, tear down
#   scripts/with_postgres.sh --check         exit 0 if PostgreSQL server
#                                            binaries are found, 3 otherwise
#
# The cluster lives in a fresh mktemp directory, listens on 127.0.0.1 on a
# free port (unix socket inside the temp dir), is tuned for speed
# (fsync/synchronous_commit/full_page_writes off) and is stopped and deleted
# on exit, including on failure or Ctrl-C. The exit status is CMD's.
#
# Environment knobs (all optional):
#   PG_BINDIR             directory holding initdb/pg_ctl (overrides discovery)
#   WITH_POSTGRES_TMPDIR  parent dir for the cluster (default /tmp)
#   WITH_POSTGRES_DB      database name (default codex)
#   WITH_POSTGRES_KEEP=1  don't delete the data dir on exit (for debugging)
#   WITH_POSTGRES_USER    OS user for the server when run as root (default postgres)
set -euo pipefail

log() { printf 'with_postgres: %s\n' "$*" >&2; }
die() { local code=$1; shift; log "ERROR: $*"; exit "$code"; }

# --------------------------------------------------------------------------
# Locate PostgreSQL server binaries.
# --------------------------------------------------------------------------
find_pg_bindir() {
    local d
    if [[ -n "${PG_BINDIR:-}" ]]; then
        [[ -x "$PG_BINDIR/initdb" && -x "$PG_BINDIR/pg_ctl" ]] && { echo "$PG_BINDIR"; return 0; }
        return 1
    fi
    # Highest version under /usr/lib/postgresql/*/bin (Debian/Ubuntu layout).
    while IFS= read -r d; do
        if [[ -x "$d/initdb" && -x "$d/pg_ctl" && -x "$d/postgres" ]]; then
            echo "$d"; return 0
        fi
    done < <(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5,5 -V -r)
    # pg_config --bindir (other distros / source builds).
    if command -v pg_config >/dev/null 2>&1; then
        d=$(pg_config --bindir 2>/dev/null || true)
        if [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" ]]; then
            echo "$d"; return 0
        fi
    fi
    # Plain PATH as a last resort.
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v initdb)"; return 0
    fi
    return 1
}

if ! PGBIN=$(find_pg_bindir); then
    if [[ "${1:-}" == "--check" ]]; then
        exit 3
    fi
    log "ERROR: no PostgreSQL server binaries found (looked in /usr/lib/postgresql/*/bin,"
    log "       'pg_config --bindir' and PATH; set PG_BINDIR to override)."
    log "       Install them, e.g.: apt-get update && apt-get install -y postgresql"
    exit 3
fi

if [[ "${1:-}" == "--check" ]]; then
    echo "$PGBIN"
    exit 0
fi

[[ $# -gt 0 ]] || die 2 "usage: $0 CMD [ARGS...]   |   $0 --check"

# --------------------------------------------------------------------------
# Decide which OS user runs the server (PostgreSQL refuses to run as root).
# --------------------------------------------------------------------------
if [[ "$(id -u)" -eq 0 ]]; then
    PG_OS_USER=${WITH_POSTGRES_USER:-postgres}
    if ! id -u "$PG_OS_USER" >/dev/null 2>&1; then
        log "OS user '$PG_OS_USER' missing; creating it"
        useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_OS_USER" \
            || die 1 "could not create OS user '$PG_OS_USER'"
    fi
    if command -v runuser >/dev/null 2>&1; then
        AS_PG=(runuser -u "$PG_OS_USER" --)
    else
        # "--" stops su's option parsing so CMD's own -D/-c flags pass through.
        AS_PG=(su -s /bin/sh -c 'exec "$0" "$@"' "$PG_OS_USER" --)
    fi
else
    PG_OS_USER=$(id -un)
    AS_PG=()
fi
as_pg() { "${AS_PG[@]}" "$@"; }
if command -v setsid >/dev/null 2>&1; then SETSID=(setsid); else SETSID=(); fi

# --------------------------------------------------------------------------
# Temp dir + cleanup trap.
# --------------------------------------------------------------------------
PARENT_TMP=${WITH_POSTGRES_TMPDIR:-/tmp}
PGTMP=$(mktemp -d "$PARENT_TMP/codex-pg.XXXXXXXX")
PGDATA_DIR="$PGTMP/data"
PGLOG="$PGTMP/server.log"
CLEANED=0
CMD_PID=
PG_CHILD=

cleanup() {
    local rc=$?
    [[ $CLEANED -eq 1 ]] && return 0
    CLEANED=1
    trap - INT TERM HUP
    set +e
    if [[ -n "${CMD_PID:-}" ]] && kill -0 "$CMD_PID" 2>/dev/null; then
        kill -TERM "$CMD_PID" 2>/dev/null
        wait "$CMD_PID" 2>/dev/null
    fi
    if [[ -f "$PGDATA_DIR/postmaster.pid" ]]; then
        (cd "$PGTMP" && as_pg "$PGBIN/pg_ctl" -D "$PGDATA_DIR" -m fast -w -t 30 stop) >/dev/null 2>&1
        if [[ -f "$PGDATA_DIR/postmaster.pid" ]]; then
            local pid
            pid=$(head -n1 "$PGDATA_DIR/postmaster.pid" 2>/dev/null)
            if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
                log "postmaster $pid did not stop cleanly; killing it"
                (cd "$PGTMP" && as_pg "$PGBIN/pg_ctl" -D "$PGDATA_DIR" -m immediate -w -t 10 stop) >/dev/null 2>&1
                kill -KILL "$pid" 2>/dev/null
            fi
        fi
    fi
    if [[ -n "${PG_CHILD:-}" ]]; then
        wait "$PG_CHILD" 2>/dev/null
    fi
    if [[ "${WITH_POSTGRES_KEEP:-0}" == "1" ]]; then
        log "keeping $PGTMP (WITH_POSTGRES_KEEP=1)"
    else
        rm -rf "$PGTMP"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

chmod 700 "$PGTMP"
if [[ "$(id -u)" -eq 0 ]]; then
    chown "$PG_OS_USER": "$PGTMP"
fi

# Run pg tools from inside the temp dir so the postgres user never needs
# access to the caller's working directory.
pg() { (cd "$PGTMP" && as_pg "$@"); }

# --------------------------------------------------------------------------
# initdb
# --------------------------------------------------------------------------
initdb_common=(-D "$PGDATA_DIR" -U postgres --auth=trust -E UTF8 --no-sync)
if ! pg "$PGBIN/initdb" "${initdb_common[@]}" --locale=C.UTF-8 >"$PGTMP/initdb.log" 2>&1; then
    rm -rf "$PGDATA_DIR"
    if ! pg "$PGBIN/initdb" "${initdb_common[@]}" --no-locale >"$PGTMP/initdb.log" 2>&1; then
        cat "$PGTMP/initdb.log" >&2
        die 1 "initdb failed"
    fi
fi

cat >>"$PGDATA_DIR/postgresql.conf" <<EOF

# --- with_postgres.sh: throwaway test cluster ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$PGTMP'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
shared_buffers = 128MB
logging_collector = off
EOF

# --------------------------------------------------------------------------
# Start on a free port (retry a few times in case of a port race).
# --------------------------------------------------------------------------
free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# The postmaster is started directly (not via "pg_ctl start") as a child of
# this script, in its own session so a terminal Ctrl-C reaches only CMD; on
# exit we stop it with pg_ctl and reap it with "wait", leaving no zombies.
PG_CHILD=
PGPORT_CHOSEN=
for attempt in 1 2 3 4 5; do
    port=$(free_port) || die 1 "could not pick a free port (python3 missing?)"
    (cd "$PGTMP" && exec "${SETSID[@]}" "${AS_PG[@]}" "$PGBIN/postgres" -D "$PGDATA_DIR" -p "$port") \
        >>"$PGLOG" 2>&1 </dev/null &
    PG_CHILD=$!
    for _ in $(seq 1 600); do
        if ! kill -0 "$PG_CHILD" 2>/dev/null; then
            break
        fi
        if "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres; then
            PGPORT_CHOSEN=$port
            break
        fi
        sleep 0.1
    done
    [[ -n "$PGPORT_CHOSEN" ]] && break
    if kill -0 "$PG_CHILD" 2>/dev/null; then
        tail -n 30 "$PGLOG" >&2 2>/dev/null || true
        die 1 "PostgreSQL did not become ready on port $port within 60s"
    fi
    wait "$PG_CHILD" 2>/dev/null || true
    PG_CHILD=
    log "start on port $port failed (attempt $attempt)"
done
if [[ -z "$PGPORT_CHOSEN" ]]; then
    tail -n 30 "$PGLOG" >&2 2>/dev/null || true
    die 1 "could not start PostgreSQL (log above)"
fi

DBNAME=${WITH_POSTGRES_DB:-codex}
"$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT_CHOSEN" -U postgres -O postgres "$DBNAME" \
    || die 1 "createdb $DBNAME failed"

export DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT_CHOSEN/$DBNAME"
export PGHOST=127.0.0.1 PGPORT=$PGPORT_CHOSEN PGUSER=postgres PGDATABASE=$DBNAME
log "$("$PGBIN/pg_ctl" --version | sed "s/^pg_ctl //") ready: $DATABASE_URL"

# --------------------------------------------------------------------------
# Run the command; its exit status becomes ours (cleanup runs via EXIT trap).
# --------------------------------------------------------------------------
# CMD runs as a background job we "wait" on, so a SIGTERM/SIGINT sent to this
# script is handled immediately (forwarded to CMD, then cleanup) instead of
# after CMD finishes. "<&0" keeps CMD's stdin (bash would use /dev/null) and
# "trap -" restores SIGINT/SIGQUIT, which bash ignores in background jobs, so
# Ctrl-C still reaches CMD (KeyboardInterrupt, pdb, ...).
set +e
( trap - INT QUIT; exec "$@" ) <&0 &
CMD_PID=$!
wait "$CMD_PID"
rc=$?
CMD_PID=
set -e
exit "$rc"
