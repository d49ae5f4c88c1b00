#!/usr/bin/env bash
# The OCI image as an operator runs it, and the Kubernetes manifests played with podman:
#
#   bash deploy/try_image.sh            # a few minutes; exits non-zero if a check fails
#
# Builds the image (scripts/build_image.sh: the base from the Debian mirror the first time, kept
# in var/image-base/ for a week), then runs deploy/image_probe.py against a throwaway PostgreSQL
# (scripts/with_postgres.sh): SQLite on a named volume with a read-only root, PostgreSQL through
# DATABASE_URL, and `podman kube play` of deploy/kubernetes/ against PostgreSQL, each reached
# from outside through a published port on 127.0.0.1 with the SDK client. Prints the image's
# size, the time to healthy and a table of the checks. Installs what it needs (apt: podman and
# its helpers, mmdebstrap, postgresql; the project's .venv). Everything it starts, it removes by
# name. CODEX_IMAGE_BUILT=1 skips the build (the image must exist).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=deploy/podman/env.sh
source "$ROOT/deploy/podman/env.sh"
IMAGE=${CODEX_IMAGE:-localhost/agent-codex}
log() { printf 'try_image: %s\n' "$*" >&2; }

install_podman
if ! bash "$ROOT/scripts/with_postgres.sh" --check >/dev/null 2>&1; then
    [[ $(id -u) == 0 ]] || { log "needs postgresql; run as root to install it"; exit 3; }
    log "apt-get install postgresql"
    # The package would start a default cluster; this run uses its own.
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/99-codex-image.conf
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql </dev/null >/dev/null
fi
bash "$ROOT/scripts/bootstrap.sh"
if [[ "${CODEX_IMAGE_BUILT:-0}" != 1 ]]; then
    bash "$ROOT/scripts/build_image.sh"
fi
exec bash "$ROOT/scripts/with_postgres.sh" "$ROOT/.venv/bin/python" "$ROOT/deploy/image_probe.py" \
    --image "$IMAGE:latest" --podman "${PODMAN[*]}"
