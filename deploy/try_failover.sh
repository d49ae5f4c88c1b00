#!/usr/bin/env bash
# Replicated PostgreSQL with automatic failover, tried on this machine (127.0.0.1 only):
#
#   etcd (one member) <- 3 Patroni nodes, each a PostgreSQL 15 (synchronous_mode_strict)
#   2 uvicorn workers (python -m codex_site.serve), DATABASE_URL listing the 3 nodes
#   with target_session_attrs=read-write
#
#   bash deploy/try_failover.sh         # a few minutes; exits non-zero if a check fails
#
# deploy/failover_probe.py drives saves, updates and gets through both workers over MCP,
# kill -9s the primary's postmaster three times (each time the new primary), waits for the
# old primary to rejoin as a replica (Patroni, pg_rewind), then loses a whole node (its
# Patroni and postmaster killed; started again once a new primary is up), then does one
# planned switchover (patronictl), and checks: no acknowledged write lost, no duplicate from a
# retried save, only success / unavailable / 503 as answers, /healthz 503 during each gap
# and 200 after, the workers never restarted. It installs what it needs (apt: etcd-server,
# postgresql-15; the project's .venv; Patroni, pinned, into var/patroni: deploy/patroni/install.sh) and stops everything it started, by
# process id. Ports: FAILOVER_PORT_BASE (default 21000) + 101..103 PostgreSQL,
# + 201..203 Patroni REST, + 301/302 etcd, + 401/402 workers.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
BASE=${FAILOVER_PORT_BASE:-21000}
PGBIN=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
PG_OS_USER=postgres
log() { printf 'try_failover: %s\n' "$*" >&2; }

# ------------------------------------------------------------------ install ---
need=()
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
[[ -x "$PGBIN/postgres" ]] || need+=(postgresql-15)
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv) # Patroni's (install.sh)
if ((${#need[@]})); then
    [[ $(id -u) == 0 ]] || { log "need root to apt-get install ${need[*]}"; exit 3; }
    # The Debian packages would start a default cluster and etcd of their own; this run
    # uses its own, on its own ports.
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/99-codex-failover.conf
    log "apt-get install ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" </dev/null >/dev/null
    # Debian starts the etcd service it installs; this run does not need it.
    for unit in etcd; do
        command -v systemctl >/dev/null 2>&1 && systemctl disable --now "$unit" >/dev/null 2>&1 || true
    done
fi
bash "$ROOT/scripts/bootstrap.sh"
PATRONI_DIR="$ROOT/var/patroni"
bash "$ROOT/deploy/patroni/install.sh" "$PATRONI_DIR"

if [[ $(id -u) == 0 ]]; then
    id -u "$PG_OS_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_OS_USER"
    AS_PG=(runuser -u "$PG_OS_USER" --)
else
    PG_OS_USER=$(id -un)
    AS_PG=()
fi

for port in $((BASE + 101)) $((BASE + 102)) $((BASE + 103)) $((BASE + 201)) $((BASE + 202)) $((BASE + 203)) \
    $((BASE + 301)) $((BASE + 302)) $((BASE + 401)) $((BASE + 402)); do
    if "$PY" -c 'import socket, sys; s = socket.socket(); s.connect(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null; then
        log "port $port is in use; set FAILOVER_PORT_BASE to another range"
        exit 3
    fi
done

# ------------------------------------------------------------- processes ---
WORK="$(mktemp -d /tmp/codex-failover.XXXXXX)"
chmod 755 "$WORK"
WORKER_PIDS=()
NODE_PIDS=()   # Patroni, one per node
ETCD_PID=
stop_all() { # pids...: TERM all, wait up to 20 s, then KILL what is left
    local pid
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null; done
    for pid in "$@"; do
        for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
}
cleanup() {
    local rc=$? pidfile pid
    set +e
    trap - EXIT INT TERM
    # Workers first, then the Patroni nodes (each stops its PostgreSQL), then etcd.
    stop_all "${WORKER_PIDS[@]}"
    # The probe starts a lost node's Patroni again, and leaves its pid beside the node.
    for pidfile in "$WORK"/node*/patroni-restarted.pid; do
        [[ -f "$pidfile" ]] && NODE_PIDS+=("$(cat "$pidfile")")
    done
    stop_all "${NODE_PIDS[@]}"
    # A postmaster whose Patroni did not stop it is stopped by the pid in its postmaster.pid.
    for pidfile in "$WORK"/node*/data/postmaster.pid; do
        [[ -f "$pidfile" ]] || continue
        pid=$(head -n1 "$pidfile")
        [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && kill -QUIT "$pid" 2>/dev/null
    done
    [[ -n "$ETCD_PID" ]] && stop_all "$ETCD_PID"
    if [[ "${FAILOVER_KEEP:-0}" == 1 || $rc -ne 0 ]]; then
        log "logs kept in $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

http_ok() { "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" >/dev/null 2>&1; }
start_as_pg() { # name, command...: background, in its own session, log in $WORK/name.log
    local name=$1
    shift
    (cd "$WORK" && exec setsid "${AS_PG[@]}" "$@") >"$WORK/$name.log" 2>&1 </dev/null &
}

SUPERUSER_PASSWORD="su-$(head -c 18 /dev/urandom | base64 | tr -dc A-Za-z0-9)"
REPLICATION_PASSWORD="repl-$(head -c 18 /dev/urandom | base64 | tr -dc A-Za-z0-9)"
REWIND_PASSWORD="rewind-$(head -c 18 /dev/urandom | base64 | tr -dc A-Za-z0-9)"
APP_PASSWORD="app-$(head -c 18 /dev/urandom | base64 | tr -dc A-Za-z0-9)"
ETCD="127.0.0.1:$((BASE + 301))"
# etcd 3.4 refuses to start on architectures other than amd64 and arm64 unless told to.
case "$(uname -m)" in
    x86_64 | aarch64) ;;
    *) export ETCD_UNSUPPORTED_ARCH="$(dpkg --print-architecture 2>/dev/null || uname -m)" ;;
esac

log "etcd on $ETCD (work directory $WORK)"
mkdir -p "$WORK/etcd"
chown "$PG_OS_USER": "$WORK" "$WORK/etcd"
chmod 700 "$WORK/etcd"
# One member is enough to show PostgreSQL failing over; production runs three (docs/deploy.md).
start_as_pg etcd etcd --name codex-etcd --data-dir "$WORK/etcd" \
    --listen-client-urls "http://$ETCD" --advertise-client-urls "http://$ETCD" \
    --listen-peer-urls "http://127.0.0.1:$((BASE + 302))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((BASE + 302))" \
    --initial-cluster "codex-etcd=http://127.0.0.1:$((BASE + 302))" --initial-cluster-state new
ETCD_PID=$!

for i in 1 2 3; do
    node="$WORK/node$i"
    mkdir -p "$node"
    sed -e "s#@NAME@#node$i#g" -e "s#@NODE_DIR@#$node#g" -e "s#@PGBIN@#$PGBIN#g" \
        -e "s#@LISTEN_HOST@#127.0.0.1#g" -e "s#@CONNECT_HOST@#127.0.0.1#g" \
        -e "s#@PG_PORT@#$((BASE + 100 + i))#g" -e "s#@API_PORT@#$((BASE + 200 + i))#g" -e "s#@ETCD@#$ETCD#g" \
        -e "s#@SUPERUSER_PASSWORD@#$SUPERUSER_PASSWORD#g" -e "s#@REPLICATION_PASSWORD@#$REPLICATION_PASSWORD#g" \
        -e "s#@REWIND_PASSWORD@#$REWIND_PASSWORD#g" \
        "$ROOT/deploy/patroni/patroni.yml.in" >"$node/patroni.yml"
    cp "$ROOT/deploy/patroni/pg_service.conf" "$node/pg_service.conf"
    chown -R "$PG_OS_USER": "$node"
    chmod 700 "$node"
done
for _ in $(seq 1 100); do
    http_ok "http://$ETCD/health" && break
    kill -0 "$ETCD_PID" 2>/dev/null || { cat "$WORK/etcd.log" >&2; exit 1; }
    sleep 0.2
done

log "3 Patroni nodes: PostgreSQL on 127.0.0.1:$((BASE + 101))-$((BASE + 103)), REST on :$((BASE + 201))-$((BASE + 203))"
for i in 1 2 3; do
    start_as_pg "node$i/patroni" env PGSERVICEFILE="$WORK/node$i/pg_service.conf" PGSERVICE=agent-codex-node \
        "$PATRONI_DIR/bin/patroni" "$WORK/node$i/patroni.yml"
    NODE_PIDS+=($!)
    # The first node bootstraps the cluster; the others copy it, so start them after.
    if [[ $i == 1 ]]; then
        for _ in $(seq 1 300); do
            http_ok "http://127.0.0.1:$((BASE + 201))/primary" && break
            kill -0 "${NODE_PIDS[0]}" 2>/dev/null || { tail -n 40 "$WORK/node1/patroni.log" >&2; exit 1; }
            sleep 0.2
        done
    fi
done

PATRONICTL=("$PATRONI_DIR/bin/patronictl" -c "$WORK/node1/patroni.yml")
log "waiting for a leader and two streaming replicas, one of them synchronous"
for attempt in $(seq 1 300); do
    if "$PY" "$ROOT/deploy/failover_probe.py" --cluster-ready \
        --patroni "http://127.0.0.1:$((BASE + 201))" >/dev/null 2>&1; then
        break
    fi
    [[ $attempt == 300 ]] && { "${PATRONICTL[@]}" list >&2; exit 1; }
    sleep 0.5
done
"${PATRONICTL[@]}" list

export PGPASSWORD="$SUPERUSER_PASSWORD"
LEADER_PORT=$("$PY" "$ROOT/deploy/failover_probe.py" --leader-port --patroni "http://127.0.0.1:$((BASE + 201))")
"$PGBIN/psql" -q -h 127.0.0.1 -p "$LEADER_PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 \
    -c "CREATE ROLE codex LOGIN PASSWORD '$APP_PASSWORD'" -c "CREATE DATABASE codex OWNER codex"
unset PGPASSWORD

HOSTS="127.0.0.1:$((BASE + 101)),127.0.0.1:$((BASE + 102)),127.0.0.1:$((BASE + 103))"
export DATABASE_URL="postgresql://codex:$APP_PASSWORD@$HOSTS/codex?target_session_attrs=read-write&connect_timeout=2"
export SECRET_KEY="try-failover-$(head -c 24 /dev/urandom | base64 | tr -dc A-Za-z0-9)"
W1=$((BASE + 401))
W2=$((BASE + 402))
export CODEX_PUBLIC_URL="http://127.0.0.1:$W1"
export ALLOWED_HOSTS=127.0.0.1
export CODEX_VAR_DIR="$WORK/var"
export CODEX_TOOL_CALLS_PER_MINUTE=1000000 # the probe's load is not what is measured here
export CODEX_LOG_LEVEL=WARNING
export DJANGO_DEBUG=0
mkdir -p "$CODEX_VAR_DIR"
cd "$ROOT"
"$PY" manage.py migrate --noinput >/dev/null
"$PY" manage.py shell -c "from django.contrib.auth import get_user_model; get_user_model().objects.create_user('failover-probe')" >/dev/null
TOKEN=$("$PY" manage.py mint_token failover-probe --scopes "notes:read notes:write" --lifetime 3600 2>/dev/null)

log "2 uvicorn workers on 127.0.0.1:$W1 and :$W2"
for port in "$W1" "$W2"; do
    "$PY" -m codex_site.serve --host 127.0.0.1 --port "$port" >"$WORK/worker-$port.log" 2>&1 </dev/null &
    WORKER_PIDS+=($!)
done

nodes=()
for i in 1 2 3; do
    nodes+=(--node "node$i=http://127.0.0.1:$((BASE + 200 + i)),$WORK/node$i/data,${NODE_PIDS[$((i - 1))]}")
done
rc=0
FAILOVER_TOKEN="$TOKEN" "$PY" "$ROOT/deploy/failover_probe.py" \
    --worker "http://127.0.0.1:$W1" --worker "http://127.0.0.1:$W2" \
    --worker-pids "${WORKER_PIDS[0]},${WORKER_PIDS[1]}" \
    --patronictl "${PATRONICTL[*]}" \
    --restart-node "${AS_PG[*]} env PGSERVICEFILE=$WORK/{name}/pg_service.conf PGSERVICE=agent-codex-node $PATRONI_DIR/bin/patroni $WORK/{name}/patroni.yml" \
    "${nodes[@]}" || rc=$?
if ((rc)); then
    grep -h -E "ERROR|Traceback" "$WORK"/worker-*.log | sort | uniq -c | sort -rn | head -20 >&2 || true
fi
exit "$rc"
