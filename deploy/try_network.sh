#!/usr/bin/env bash
# The production topology on one machine, each host in a network namespace of its own, joined
# through a bridge, with a delay on every path; then faults under load, a checker over the
# history, and what the network costs (docs/deploy.md, "Measured on a network").
#
#   client 198.18.36.10 ──> lb 198.18.36.11 (nginx, TLS) ──> app1 198.18.36.21, app2 198.18.36.22
#                                                            (2 uvicorn workers each)
#        ──> db1 198.18.36.31, db2 .32, db3 .33 (each: PostgreSQL 15 under Patroni, an etcd member)
#
#   bash deploy/try_network.sh             # faults, checker and network cost (11 to 13 minutes)
#   bash deploy/try_network.sh --faults    # only the faults and the checker
#   bash deploy/try_network.sh --cost      # only the network cost
#   bash deploy/try_network.sh --clean     # remove what a killed run left (its namespaces)
#
# NETWORK_DELAY_MS (default 0.25) sets the delay; NETWORK_POOL_SIZE=N runs the workers on
# Django's connection pool (CODEX_DB_POOL_SIZE) instead of persistent connections.
#
# Root only (network namespaces). Addresses are 198.18.36.0/24, from the range RFC 2544
# reserves for benchmarks: the bridge has no address in the machine's own namespace and IP
# forwarding is not touched, so nothing reaches or leaves the machine. Every service listens
# on its host's loopback; the host's address is served by a relay (deploy/netrelay.py) that
# holds each chunk of data NETWORK_DELAY_MS (default 0.25) each way before passing it on. The
# faults are the kernel's own: `ip route add blackhole` (a partition) and `ip link set down`
# (a host cut off) inside a namespace. deploy/network_probe.py drives the load and the faults
# from the client host and deploy/history_check.py checks what it recorded.
#
# It installs what it needs (apt: etcd-server, etcd-client, postgresql-15, nginx, wrk, openssl,
# iproute2; the project's .venv; Patroni, pinned, into var/patroni: deploy/patroni/install.sh), and stops everything it started by process id (also
# on Ctrl-C), then removes its namespaces and bridge. Logs stay in the work directory when a
# check failed (or with NETWORK_KEEP=1).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
PGBIN=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
DELAY_MS=${NETWORK_DELAY_MS:-0.25}
PREFIX=cdx36
NET=198.18.36
BRIDGE=$PREFIX-br
HOSTS=(client lb app1 app2 db1 db2 db3)
declare -A ADDR=([client]=$NET.10 [lb]=$NET.11 [app1]=$NET.21 [app2]=$NET.22 [db1]=$NET.31 [db2]=$NET.32 [db3]=$NET.33)
log() { printf 'try_network: %s\n' "$*" >&2; }

ns() { echo "$PREFIX-$1"; }
our_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$PREFIX-" || true; }

# stop_pids SECONDS PID...: TERM, up to SECONDS for them to end, then KILL what is left.
stop_pids() {
    local seconds=$1 pid alive
    shift
    (($#)) || return 0
    kill -TERM "$@" 2>/dev/null || true
    for _ in $(seq 1 $((seconds * 10))); do
        alive=0
        for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        ((alive)) || break
        sleep 0.1
    done
    kill -KILL "$@" 2>/dev/null || true
}

# Processes still inside our namespaces are ours: stop them by id, then the namespaces.
remove_namespaces() {
    local name pid pids=()
    for name in $(our_namespaces); do
        for pid in $(ip netns pids "$name" 2>/dev/null); do pids+=("$pid"); done
    done
    stop_pids 10 "${pids[@]}"
    for name in $(our_namespaces); do ip netns del "$name" 2>/dev/null || true; done
    ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE" 2>/dev/null || true
}

MODE=all
case "${1:-}" in
    "") ;;
    --faults) MODE=faults ;;
    --cost) MODE=cost ;;
    --clean)
        [[ $(id -u) == 0 ]] || { log "--clean needs root"; exit 3; }
        remove_namespaces
        log "removed namespaces $PREFIX-* and bridge $BRIDGE"
        exit 0
        ;;
    *) log "unknown argument $1 (use --faults, --cost or --clean)"; exit 2 ;;
esac

[[ $(id -u) == 0 ]] || { log "needs root: network namespaces, veth pairs and a bridge"; exit 3; }
if [[ -n "$(our_namespaces)" ]] || ip link show "$BRIDGE" >/dev/null 2>&1; then
    log "namespaces $PREFIX-* (or bridge $BRIDGE) exist: another run is going on, or one was killed;"
    log "if none is running: bash deploy/try_network.sh --clean"
    exit 3
fi

# ------------------------------------------------------------------ install ---
need=()
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || need+=(etcd-client)
[[ -x "$PGBIN/postgres" ]] || need+=(postgresql-15)
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv) # Patroni's (install.sh)
command -v nginx >/dev/null 2>&1 || need+=(nginx)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
if ((${#need[@]})); then
    # The packages would start a default cluster, etcd, Patroni and nginx of their own.
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/99-codex-network.conf
    log "apt-get install ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" </dev/null >/dev/null
    for unit in etcd nginx; do
        command -v systemctl >/dev/null 2>&1 && systemctl disable --now "$unit" >/dev/null 2>&1 || true
    done
fi
bash "$ROOT/scripts/bootstrap.sh"
PATRONI_DIR="$ROOT/var/patroni"
bash "$ROOT/deploy/patroni/install.sh" "$PATRONI_DIR"
id -u postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
ip netns add "$PREFIX-check" && ip netns del "$PREFIX-check" || { log "ip netns add does not work here"; exit 3; }
# etcd 3.4 refuses to start on architectures other than amd64 and arm64 unless told to.
case "$(uname -m)" in
    x86_64 | aarch64) ;;
    *) export ETCD_UNSUPPORTED_ARCH="$(dpkg --print-architecture 2>/dev/null || uname -m)" ;;
esac

# ------------------------------------------------------------- clean-up ---
WORK="$(mktemp -d /tmp/codex-network.XXXXXX)"
chmod 755 "$WORK"
PIDS="$WORK/pids" # "pid name" lines: everything started here, and by the probe
: >"$PIDS"
cleanup() {
    local rc=$? pid name pidfile
    set +e
    trap - EXIT INT TERM
    log "stopping everything (exit $rc, ${SECONDS} s after the start)"
    # Workers and nginx first, then Patroni (each stops its PostgreSQL), then etcd, then relays.
    for kind in probe worker nginx patroni etcd relay; do
        local group=()
        while read -r pid name; do
            [[ "$name" == "$kind"* ]] && kill -0 "$pid" 2>/dev/null && group+=("$pid")
        done <"$PIDS"
        stop_pids 20 "${group[@]}"
    done
    # A postmaster whose Patroni did not stop it is stopped by the pid in its postmaster.pid.
    for pidfile in "$WORK"/db*/data/postmaster.pid; do
        [[ -f "$pidfile" ]] || continue
        pid=$(head -n1 "$pidfile")
        [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && kill -QUIT "$pid" 2>/dev/null
    done
    sleep 0.5
    remove_namespaces
    if [[ "${NETWORK_KEEP:-0}" == 1 || $rc -ne 0 ]]; then
        log "logs kept in $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start NAME HOST [--as-postgres] COMMAND...: in HOST's namespace, in a session of its own,
# output to $WORK/NAME.log; its pid (the command's own: `ip netns exec` and setpriv exec it)
# is recorded for the clean-up.
start() {
    local name=$1 host=$2
    shift 2
    local as=()
    if [[ "$1" == --as-postgres ]]; then
        as=(setpriv --reuid=postgres --regid=postgres --init-groups --)
        shift
    fi
    mkdir -p "$(dirname "$WORK/$name.log")"
    setsid ip netns exec "$(ns "$host")" "${as[@]}" "$@" >"$WORK/$name.log" 2>&1 </dev/null &
    echo "$! $name" >>"$PIDS"
    disown "$!" # stopped by the clean-up, by pid; bash need not report it
}
in_ns() { local host=$1; shift; ip netns exec "$(ns "$host")" "$@"; }
wait_for() { # what, seconds, command...: until the command succeeds
    local what=$1 seconds=$2
    shift 2
    for _ in $(seq 1 $((seconds * 5))); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    log "timed out waiting for $what"
    return 1
}

# ---------------------------------------------------------------- network ---
log "network: bridge $BRIDGE, hosts ${HOSTS[*]} on $NET.0/24 (work directory $WORK)"
ip link add "$BRIDGE" type bridge
ip link set "$BRIDGE" up
for host in "${HOSTS[@]}"; do
    ip netns add "$(ns "$host")"
    ip link add "$PREFIX-$host" type veth peer name eth0 netns "$(ns "$host")"
    ip link set "$PREFIX-$host" master "$BRIDGE" up
    in_ns "$host" ip link set lo up
    in_ns "$host" ip addr add "${ADDR[$host]}/24" dev eth0
    in_ns "$host" ip link set eth0 up
    mkdir -p "$WORK/$host"
done

# One relay per host, in front of each service it offers (same port, on the host's address).
relay() { # host, ports...
    local host=$1 port listens=()
    shift
    for port in "$@"; do listens+=(--listen "${ADDR[$host]}:$port=127.0.0.1:$port"); done
    start "relay-$host" "$host" "$PY" "$ROOT/deploy/netrelay.py" "${listens[@]}" \
        --delay-ms "$DELAY_MS" --control "$WORK/$host/relay.sock"
}
relay lb 443 444
relay app1 8001 8002
relay app2 8001 8002
for db in db1 db2 db3; do relay "$db" 5432 8008 2379 2380; done
for host in lb app1 app2 db1 db2 db3; do
    wait_for "the relay on $host" 20 test -S "$WORK/$host/relay.sock"
done

# ------------------------------------------------------------------- etcd ---
INITIAL_CLUSTER="db1=http://$NET.31:2380,db2=http://$NET.32:2380,db3=http://$NET.33:2380"
ETCD_HOSTS="$NET.31:2379,$NET.32:2379,$NET.33:2379"
for db in db1 db2 db3; do
    mkdir -p "$WORK/$db/etcd"
    chown postgres: "$WORK/$db" "$WORK/$db/etcd"
    chmod 700 "$WORK/$db/etcd"
    # The command is kept beside it: the probe starts a killed member again with it.
    # --pre-vote: a member cut off by a partition keeps asking for votes; without a pre-vote
    # each try raises its term, and when the partition heals that higher term makes the
    # majority's leader step down: a few seconds with no etcd leader, in which the new
    # primary's Patroni cannot renew its lock and demotes it (a second failover, seen here).
    printf '%s\n' etcd --name "$db" --data-dir "$WORK/$db/etcd" --pre-vote \
        --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls "http://${ADDR[$db]}:2379" \
        --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls "http://${ADDR[$db]}:2380" \
        --initial-cluster "$INITIAL_CLUSTER" --initial-cluster-state new --initial-cluster-token agent-codex-36 \
        >"$WORK/$db/etcd.argv"
    mapfile -t argv <"$WORK/$db/etcd.argv"
    start "etcd-$db" "$db" --as-postgres "${argv[@]}"
done
log "etcd: three members, db1-db3:2379"
wait_for "etcd's three members" 60 in_ns client etcdctl --endpoints "$ETCD_HOSTS" endpoint health --cluster

# ---------------------------------------------------------------- Patroni ---
SUPERUSER_PASSWORD="su-$(head -c 18 /dev/urandom | base64 | tr -dc A-Za-z0-9)"
REPLICATION_PASSWORD="repl-$(head -c 18 /dev/urandom | base64 | tr -dc A-Za-z0-9)"
REWIND_PASSWORD="rewind-$(head -c 18 /dev/urandom | base64 | tr -dc A-Za-z0-9)"
APP_PASSWORD="app-$(head -c 18 /dev/urandom | base64 | tr -dc A-Za-z0-9)"
for db in db1 db2 db3; do
    node="$WORK/$db"
    sed -e "s#@NAME@#$db#g" -e "s#@NODE_DIR@#$node#g" -e "s#@PGBIN@#$PGBIN#g" \
        -e "s#@LISTEN_HOST@#127.0.0.1#g" -e "s#@CONNECT_HOST@#${ADDR[$db]}#g" \
        -e "s#@PG_PORT@#5432#g" -e "s#@API_PORT@#8008#g" -e "s#@ETCD@#$ETCD_HOSTS#g" \
        -e "s#@SUPERUSER_PASSWORD@#$SUPERUSER_PASSWORD#g" -e "s#@REPLICATION_PASSWORD@#$REPLICATION_PASSWORD#g" \
        -e "s#@REWIND_PASSWORD@#$REWIND_PASSWORD#g" \
        "$ROOT/deploy/patroni/patroni.yml.in" >"$node/patroni.yml"
    cp "$ROOT/deploy/patroni/pg_service.conf" "$node/pg_service.conf"
    chown -R postgres: "$node"
    chmod 700 "$node"
done
patroni_api() { in_ns client "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1"; }
log "Patroni: db1 bootstraps, then db2 and db3 copy it"
for db in db1 db2 db3; do
    start "patroni-$db" "$db" --as-postgres env HOME="$WORK/$db" PGSERVICEFILE="$WORK/$db/pg_service.conf" \
        PGSERVICE=agent-codex-node "$PATRONI_DIR/bin/patroni" "$WORK/$db/patroni.yml"
    if [[ $db == db1 ]]; then
        wait_for "db1 to bootstrap" 120 patroni_api "http://$NET.31:8008/primary"
    fi
done
wait_for "a leader and two streaming replicas, one synchronous" 180 \
    in_ns client "$PY" "$ROOT/deploy/failover_probe.py" --cluster-ready \
    --patroni "http://$NET.31:8008" --patroni "http://$NET.32:8008" --patroni "http://$NET.33:8008"
in_ns client "$PATRONI_DIR/bin/patronictl" -c "$WORK/db1/patroni.yml" list

LEADER=$(in_ns client "$PY" -c '
import json, sys, urllib.request
state = json.load(urllib.request.urlopen(sys.argv[1] + "/cluster", timeout=5))
print(next(m["host"] for m in state["members"] if m["role"] in ("leader", "master", "primary")))' "http://$NET.31:8008")
PGPASSWORD="$SUPERUSER_PASSWORD" in_ns client "$PGBIN/psql" -q -h "$LEADER" -U postgres -d postgres -v ON_ERROR_STOP=1 \
    -c "CREATE ROLE codex LOGIN PASSWORD '$APP_PASSWORD'" -c "CREATE DATABASE codex OWNER codex" \
    -c "CREATE TABLE partition_probe (id bigserial PRIMARY KEY, note text NOT NULL)"

# ------------------------------------------------------------ application ---
SECRET_KEY="try-network-$(head -c 24 /dev/urandom | base64 | tr -dc A-Za-z0-9)"
DB_HOSTS="$NET.31:5432,$NET.32:5432,$NET.33:5432"
for app in app1 app2; do
    mkdir -p "$WORK/$app/var"
    # What /etc/agent-codex/env holds on that host (deploy/agent-codex.env.example).
    cat >"$WORK/$app/env" <<ENVEOF
DATABASE_URL=postgresql://codex:$APP_PASSWORD@$DB_HOSTS/codex?target_session_attrs=read-write
SECRET_KEY=$SECRET_KEY
CODEX_PUBLIC_URL=https://$NET.11
ALLOWED_HOSTS=$NET.11,${ADDR[$app]}
CODEX_TRUSTED_PROXIES=127.0.0.1
CODEX_VAR_DIR=$WORK/$app/var
CODEX_TOOL_CALLS_PER_MINUTE=1000000000
CODEX_LOG_LEVEL=WARNING
DJANGO_DEBUG=0
CODEX_DB_POOL_SIZE=${NETWORK_POOL_SIZE:-0}
ENVEOF
    # An operator's manage.py on that host, as agent-codex-migrate.service runs it.
    cat >"$WORK/$app/manage.sh" <<MANAGEEOF
#!/usr/bin/env bash
set -a
. "$WORK/$app/env"
set +a
cd "$ROOT"
exec "$PY" manage.py "\$@"
MANAGEEOF
done
log "application: migrate, collectstatic on each host, users and tokens"
in_ns app1 bash "$WORK/app1/manage.sh" migrate --noinput >"$WORK/migrate.log"
for app in app1 app2; do in_ns "$app" bash "$WORK/$app/manage.sh" collectstatic --noinput -v 0; done
in_ns app1 bash "$WORK/app1/manage.sh" shell -c "
from django.contrib.auth import get_user_model
for name in ('network-probe', 'network-victim', 'network-bench'):
    get_user_model().objects.create_user(name)
" >/dev/null
# An hour: the run takes about ten minutes, and the operator's policy (CODEX_MAX_ACCESS_TOKEN_SECONDS,
# by default the access tokens' 3600 s) refuses a longer one. Its error (stderr carries the audit
# line too, so it is kept in a file) is printed before the run stops.
mint() {
    in_ns app1 bash "$WORK/app1/manage.sh" mint_token "$1" --scopes "notes:read notes:write" --lifetime 3600 \
        2>"$WORK/mint.log" || {
        log "mint_token $1 failed:"
        cat "$WORK/mint.log" >&2
        return 1
    }
}
TOKEN=$(mint network-probe)
VICTIM_TOKEN=$(mint network-victim)
BENCH_TOKEN=$(mint network-bench)

for app in app1 app2; do
    for port in 8001 8002; do
        start "worker-$app-$port" "$app" env -i PATH="$PATH" HOME=/root bash -c \
            "set -a; . '$WORK/$app/env'; set +a; cd '$ROOT'; exec '$PY' -m codex_site.serve --host 127.0.0.1 --port $port"
    done
done

# --------------------------------------------------------------- the LB ---
log "load balancer: nginx with TLS on $NET.11:443 (both application hosts) and :444 (app1 only)"
mkdir -p "$WORK/lb/nginx/logs" "$WORK/lb/nginx/tmp"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=$NET.11" -addext "subjectAltName=IP:$NET.11" \
    -keyout "$WORK/lb/key.pem" -out "$WORK/lb/cert.pem" >/dev/null 2>&1
# The production server block (deploy/nginx/agent-codex.conf) with this topology's upstreams,
# certificate and paths; and the same block again on :444 with app1 alone.
"$PY" - "$ROOT/deploy/nginx/agent-codex.conf" "$WORK/lb/nginx/site.conf" "$WORK" "$NET" <<'PYEOF'
import re, sys
source, target, work, net = sys.argv[1:]
text = open(source).read()
text = re.sub(r"server \{\s*listen 80;.*?\n\}\n", "", text, count=1, flags=re.S)
upstreams = "".join(f"    server {net}.{h}:{p} max_fails=3 fail_timeout=10s;\n" for h in (21, 22) for p in (8001, 8002))
text = re.sub(r"(upstream agent_codex \{\n)(?:    #.*\n)?(?:    server .*\n)+", lambda m: m.group(1) + upstreams, text)
text = text.replace("/etc/letsencrypt/live/codex.example.com/fullchain.pem", f"{work}/lb/cert.pem")
text = text.replace("/etc/letsencrypt/live/codex.example.com/privkey.pem", f"{work}/lb/key.pem")
text = text.replace("server_name codex.example.com;", f"server_name {net}.11;")
text = re.sub(r"    listen 443 ssl http2;.*\n    listen \[::\]:443 ssl http2;\n", "    listen 127.0.0.1:443 ssl http2;\n", text)
text = text.replace("/srv/agent-codex/var/static/", f"{work}/app1/var/static/")
server = text[text.index("server {"):]
one = server.replace("listen 127.0.0.1:443 ssl http2;", "listen 127.0.0.1:444 ssl http2;")
one = one.replace("proxy_pass http://agent_codex;", "proxy_pass http://agent_codex_one;")
one_upstream = "upstream agent_codex_one {\n" + "".join(
    f"    server {net}.21:{p} max_fails=3 fail_timeout=10s;\n" for p in (8001, 8002)
) + "    keepalive 32;\n    keepalive_timeout 4s;\n}\n\n"
open(target, "w").write(text + "\n" + one_upstream + one)
PYEOF
cat >"$WORK/lb/nginx/nginx.conf" <<NGINXEOF
user root;
worker_processes 1;
worker_rlimit_nofile 8192;
pid $WORK/lb/nginx/nginx.pid;
error_log $WORK/lb/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $WORK/lb/nginx/tmp/body;
    proxy_temp_path $WORK/lb/nginx/tmp/proxy;
    fastcgi_temp_path $WORK/lb/nginx/tmp/fastcgi;
    uwsgi_temp_path $WORK/lb/nginx/tmp/uwsgi;
    scgi_temp_path $WORK/lb/nginx/tmp/scgi;
    include $WORK/lb/nginx/site.conf;
}
NGINXEOF
in_ns lb nginx -t -p "$WORK/lb/nginx" -c "$WORK/lb/nginx/nginx.conf" 2>"$WORK/nginx-t.log" || { cat "$WORK/nginx-t.log" >&2; exit 1; }
start nginx lb nginx -p "$WORK/lb/nginx" -c "$WORK/lb/nginx/nginx.conf" -g "daemon off;"

lb_healthy() {
    in_ns client "$PY" -c '
import ssl, sys, urllib.request
context = ssl.create_default_context(cafile=sys.argv[2])
urllib.request.urlopen(sys.argv[1], timeout=5, context=context)' "$1" "$WORK/lb/cert.pem"
}
for app in app1 app2; do
    for port in 8001 8002; do
        wait_for "the worker $app:$port" 90 in_ns client "$PY" -c \
            'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' "http://${ADDR[$app]}:$port/healthz"
    done
done
wait_for "the load balancer" 30 lb_healthy "https://$NET.11/healthz"

# ------------------------------------------------------------- the probe ---
"$PY" - "$WORK/topology.json" <<PYEOF
import json, sys
net, work = "$NET", "$WORK"
hosts = {h: {"namespace": "$PREFIX-" + h, "address": a} for h, a in {
    "client": net + ".10", "lb": net + ".11", "app1": net + ".21", "app2": net + ".22",
    "db1": net + ".31", "db2": net + ".32", "db3": net + ".33"}.items()}
for name, host in hosts.items():
    if name != "client":
        host["relay"] = f"{work}/{name}/relay.sock"
databases = {}
for db in ("db1", "db2", "db3"):
    databases[db] = {
        "data_dir": f"{work}/{db}/data",
        "patroni": f"http://{hosts[db]['address']}:8008",
        "patroni_argv": ["env", f"HOME={work}/{db}", f"PGSERVICEFILE={work}/{db}/pg_service.conf",
                         "PGSERVICE=agent-codex-node", "$PATRONI_DIR/bin/patroni", f"{work}/{db}/patroni.yml"],
        "etcd_argv": open(f"{work}/{db}/etcd.argv").read().split("\n")[:-1],
    }
json.dump({
    "work": work, "root": "$ROOT", "python": "$PY", "delay_ms": float("$DELAY_MS"),
    "hosts": hosts, "databases": databases,
    "lb": f"https://{net}.11", "lb_one_host": f"https://{net}.11:444", "cert": f"{work}/lb/cert.pem",
    "workers": [f"http://{hosts[a]['address']}:{p}" for a in ("app1", "app2") for p in (8001, 8002)],
    "superuser_password": "$SUPERUSER_PASSWORD",
    "patronictl": ["$PATRONI_DIR/bin/patronictl", "-c", f"{work}/db1/patroni.yml"],
    "manage": {app: ["ip", "netns", "exec", hosts[app]["namespace"], "bash", f"{work}/{app}/manage.sh"] for app in ("app1", "app2")},
    "pids": f"{work}/pids",
    "lua": "$ROOT/scripts/bench_mcp.lua",
}, open(sys.argv[1], "w"), indent=1)
PYEOF
chmod 600 "$WORK/topology.json"

# In the background, waited for: a signal interrupts `wait` (it would not interrupt a
# foreground command), and the clean-up stops the probe by its pid like everything else.
rc=0
in_ns client env NETWORK_TOKEN="$TOKEN" NETWORK_VICTIM_TOKEN="$VICTIM_TOKEN" NETWORK_BENCH_TOKEN="$BENCH_TOKEN" \
    "$PY" "$ROOT/deploy/network_probe.py" --topology "$WORK/topology.json" --mode "$MODE" &
echo "$! probe" >>"$PIDS"
wait $! || rc=$?
if ((rc)); then
    grep -h -E "ERROR|Traceback" "$WORK"/worker-*.log | sort | uniq -c | sort -rn | head -20 >&2 || true
fi
exit "$rc"
