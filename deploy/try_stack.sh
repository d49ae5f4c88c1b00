#!/usr/bin/env bash
# Run the production stack on this machine, on 127.0.0.1 only, and print figures:
#   nginx (TLS, timeouts, body limit, proxy headers) -> 2 uvicorn workers
#   (python -m codex_site.serve) -> a throwaway PostgreSQL (scripts/with_postgres.sh).
#
#   bash deploy/try_stack.sh            # about a minute; bounded load, loopback only
#
# It shows that a slow-client flood no longer reaches the workers, that normal clients
# keep their latency meanwhile, and that the two workers share rate limits and
# revocation. Installs what is missing (apt: nginx, openssl, postgresql; the project's
# .venv). Everything it starts, it stops (by process id) on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
NGINX="${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}"

if [[ "${1:-}" != "--inside" ]]; then
    need=()
    [[ -x "$NGINX" ]] || need+=(nginx)
    command -v openssl >/dev/null 2>&1 || need+=(openssl)
    bash "$ROOT/scripts/with_postgres.sh" --check >/dev/null 2>&1 || need+=(postgresql)
    if ((${#need[@]})); then
        [[ $(id -u) == 0 ]] || { echo "try_stack: needs ${need[*]}; run as root to install them" >&2; exit 3; }
        echo "try_stack: apt-get install ${need[*]}"
        # The packages would start a default nginx site and PostgreSQL cluster; this run uses its own.
        mkdir -p /etc/postgresql-common/createcluster.d
        echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/99-codex-stack.conf
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" </dev/null >/dev/null
        if [[ " ${need[*]} " == *" nginx "* ]] && command -v systemctl >/dev/null 2>&1; then
            systemctl disable --now nginx >/dev/null 2>&1 || true
        fi
        NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
    fi
    bash "$ROOT/scripts/bootstrap.sh"
    exec bash "$ROOT/scripts/with_postgres.sh" bash "$0" --inside
fi

: "${DATABASE_URL:?run through scripts/with_postgres.sh}"
WORK="$(mktemp -d /tmp/codex-stack.XXXXXX)"
chmod 755 "$WORK"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PROXY_PORT=$(free_port); W1=$(free_port); W2=$(free_port)
while [[ "$W2" == "$W1" || "$W1" == "$PROXY_PORT" || "$W2" == "$PROXY_PORT" ]]; do W2=$(free_port); W1=$(free_port); done

export SECRET_KEY="try-stack-$(head -c 24 /dev/urandom | base64 | tr -dc A-Za-z0-9)"
export CODEX_PUBLIC_URL="https://127.0.0.1:$PROXY_PORT"
export CODEX_VAR_DIR="$WORK/var"
export CODEX_TRUSTED_PROXIES=127.0.0.1
export CODEX_TOOL_CALLS_PER_MINUTE=20   # low, so that sharing is visible
export CODEX_LOG_LEVEL=WARNING
export DJANGO_DEBUG=0
mkdir -p "$CODEX_VAR_DIR"

cd "$ROOT"
echo "try_stack: migrating the throwaway PostgreSQL"
"$PY" manage.py migrate --noinput >/dev/null

echo "try_stack: 2 uvicorn workers on 127.0.0.1:$W1 and :$W2"
for port in "$W1" "$W2"; do
    "$PY" -m codex_site.serve --host 127.0.0.1 --port "$port" >"$WORK/worker-$port.log" 2>&1 &
    PIDS+=($!)
done

echo "try_stack: nginx with TLS on https://127.0.0.1:$PROXY_PORT"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=127.0.0.1" \
    -keyout "$WORK/key.pem" -out "$WORK/cert.pem" >/dev/null 2>&1
mkdir -p "$WORK/nginx/logs" "$WORK/nginx/tmp"
USER_LINE=""
[[ $(id -u) == 0 ]] && USER_LINE="user root;"
# The production file's server block, with this run's ports, certificate and paths.
sed -e "s#server 127.0.0.1:8001 #server 127.0.0.1:$W1 #" \
    -e "s#server 127.0.0.1:8002 #server 127.0.0.1:$W2 #" \
    -e "s#/etc/letsencrypt/live/codex.example.com/fullchain.pem#$WORK/cert.pem#" \
    -e "s#/etc/letsencrypt/live/codex.example.com/privkey.pem#$WORK/key.pem#" \
    -e "s#server_name codex.example.com;#server_name 127.0.0.1;#" \
    -e "s#listen 443 ssl http2; .*#listen 127.0.0.1:$PROXY_PORT ssl http2;#" \
    -e "/listen \[::\]/d" -e "/listen 80;/d" \
    -e "s#return 308 .*#return 404;#" \
    -e "s#/srv/agent-codex/var/static/#$CODEX_VAR_DIR/static/#" \
    "$ROOT/deploy/nginx/agent-codex.conf" > "$WORK/nginx/site.conf"
# The plain-HTTP redirect server is dropped (its listen lines are gone): keep only :PROXY_PORT.
"$PY" - "$WORK/nginx/site.conf" <<'PYEOF'
import re, sys
path = sys.argv[1]
text = open(path).read()
# Remove the first server block (the port-80 redirect).
text = re.sub(r"server \{\s*server_name 127\.0\.0\.1;\s*return 404;\s*\}\n", "", text, count=1)
open(path, "w").write(text)
PYEOF
cat > "$WORK/nginx/nginx.conf" <<NGINXEOF
$USER_LINE
worker_processes 1;
worker_rlimit_nofile 8192;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx/tmp/body;
    proxy_temp_path $WORK/nginx/tmp/proxy;
    fastcgi_temp_path $WORK/nginx/tmp/fastcgi;
    uwsgi_temp_path $WORK/nginx/tmp/uwsgi;
    scgi_temp_path $WORK/nginx/tmp/scgi;
    include $WORK/nginx/site.conf;
}
NGINXEOF
"$NGINX" -t -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" 2>"$WORK/nginx-t.log" || { cat "$WORK/nginx-t.log"; exit 1; }
"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g "daemon off;" 2>"$WORK/nginx/logs/stderr.log" &
PIDS+=($!)

"$PY" "$ROOT/deploy/stack_probe.py" \
    --proxy "https://127.0.0.1:$PROXY_PORT" \
    --worker "http://127.0.0.1:$W1" --worker "http://127.0.0.1:$W2" \
    --worker-pids "${PIDS[0]},${PIDS[1]}"
