#!/usr/bin/env bash
# Build the OCI image of Agent Codex (Containerfile) with podman, on a machine without a registry.
#
#   bash scripts/build_image.sh [--refresh-base]
#
# 1. The base, FROM debian:bookworm-slim. Where the local store has that image (pulled from a
#    registry, or made by an earlier run less than a week ago) it is used as it is. Otherwise it
#    is made here from the Debian mirror with mmdebstrap (minbase, without the documentation,
#    manual pages and translations that Debian's slim image leaves out too, with bookworm-updates
#    and bookworm-security), kept in var/image-base/ for a week, imported and tagged
#    docker.io/library/debian:bookworm-slim: the name a registry-connected machine's FROM
#    resolves to, so the same Containerfile builds there. --refresh-base makes it again.
# 2. podman build --pull=never --format docker (HEALTHCHECK is a Docker-format field), tagged
#    $CODEX_IMAGE:latest and $CODEX_IMAGE:<commit>. The tags of earlier commits' builds are
#    removed, and untagged images once a week old, so that a machine that builds every commit
#    keeps a week of cache, not every build.
#
# Prints the image's size and the build's duration. Installs podman, buildah, runc, uidmap,
# catatonit, slirp4netns and mmdebstrap with apt-get when they are missing (as root). podman's
# settings for this kind of machine: deploy/podman/env.sh. Environment:
#   CODEX_IMAGE                  the image's name (default localhost/agent-codex)
#   CODEX_REGISTRY_NAME          the image's MCP Registry name, its io.modelcontextprotocol.server.name
#                                label (default the Containerfile's; docs/deploy.md, "Publishing")
#   CODEX_DEBIAN_MIRROR          (default http://deb.debian.org/debian; the security suite from
#                                CODEX_DEBIAN_SECURITY_MIRROR, default http://deb.debian.org/debian-security)
#   CODEX_BUILD_CA_BUNDLE        the CA certificates pip trusts in the build (default the host's,
#                                /etc/ssl/certs/ca-certificates.crt; a build secret, in no layer)
#   CODEX_PODMAN_STORAGE_DRIVER, CONTAINERS_CONF   as deploy/podman/env.sh says
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=deploy/podman/env.sh
source "$ROOT/deploy/podman/env.sh"
IMAGE=${CODEX_IMAGE:-localhost/agent-codex}
BASE=docker.io/library/debian:bookworm-slim
BASE_LABEL=org.agent-codex.base.made
BASE_MAX_AGE_SECONDS=$((7 * 24 * 3600))
CACHE="$ROOT/var/image-base"
TARBALL="$CACHE/debian-bookworm-slim.tar"
MIRROR=${CODEX_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${CODEX_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
CA_BUNDLE=${CODEX_BUILD_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
log() { printf 'build_image: %s\n' "$*" >&2; }

refresh=0
case "${1:-}" in
    "") ;;
    --refresh-base) refresh=1 ;;
    *)
        sed -n '2,4p' "${BASH_SOURCE[0]}" >&2
        exit 2
        ;;
esac

install_podman
T0=$(date +%s)
now=$T0

# ------------------------------------------------------------------- base ---
base_is_usable() {
    local made
    "${PODMAN[@]}" image exists "$BASE" || return 1
    made=$("${PODMAN[@]}" image inspect --format "{{index .Labels \"$BASE_LABEL\"}}" "$BASE")
    # No label: pulled from a registry, the real thing. A label: made here, good for a week.
    [[ -z "$made" || "$made" == "<no value>" ]] && return 0
    ((now - made < BASE_MAX_AGE_SECONDS))
}

make_tarball() {
    mkdir -p "$CACHE"
    log "making the base with mmdebstrap from $MIRROR (bookworm, minbase, slim)"
    # The exclusions of Debian's own slim images (debuerreotype --slimify); dpkg keeps them in
    # the image, so later packages leave their documentation out too.
    # merged-usr: /usr merged by the hook, without the usrmerge package (and the perl it pulls in).
    mmdebstrap --variant=minbase --format=tar --quiet \
        --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/groff/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/lintian/*' \
        --dpkgopt='path-exclude=/usr/share/linda/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --aptopt='Acquire::Languages "none"' \
        bookworm "$TARBALL.tmp" \
        "deb $MIRROR bookworm main" \
        "deb $MIRROR bookworm-updates main" \
        "deb $SECURITY_MIRROR bookworm-security main"
    mv "$TARBALL.tmp" "$TARBALL"
}

if ((refresh == 0)) && base_is_usable; then
    log "base: $BASE from the local store"
else
    if ((refresh == 1)) || [[ ! -s "$TARBALL" ]] || ((now - $(stat -c %Y "$TARBALL") >= BASE_MAX_AGE_SECONDS)); then
        make_tarball
    else
        log "base: $TARBALL (cached, made $(date -u -d "@$(stat -c %Y "$TARBALL")" +%FT%TZ))"
    fi
    "${PODMAN[@]}" import --quiet --change 'CMD ["bash"]' \
        --change "LABEL $BASE_LABEL=$(stat -c %Y "$TARBALL")" "$TARBALL" "$BASE" >/dev/null
    log "base: imported as $BASE"
fi
T_BASE=$(date +%s)

# ------------------------------------------------------------------ image ---
revision=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
tag=$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo dev)
if [[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    tag="$tag-dirty"
fi
# The host's CA certificates, for pip in the build (Containerfile): a proxy that inspects HTTPS
# is trusted by the host, not by the base image. A build secret: in no layer of the image.
secrets=()
if [[ -s "$CA_BUNDLE" ]]; then
    secrets=(--secret "id=ca-bundle,src=$CA_BUNDLE")
fi
build_args=()
if [[ -n "${CODEX_REGISTRY_NAME:-}" ]]; then
    build_args=(--build-arg "CODEX_REGISTRY_NAME=$CODEX_REGISTRY_NAME")
fi
"${PODMAN[@]}" build --pull=never --format docker --label org.opencontainers.image.revision="$revision" "${secrets[@]}" \
    "${build_args[@]}" -t "$IMAGE:latest" -t "$IMAGE:$tag" -f "$ROOT/Containerfile" "$ROOT"
T_IMAGE=$(date +%s)
registry_name=$("${PODMAN[@]}" image inspect --format '{{index .Labels "io.modelcontextprotocol.server.name"}}' "$IMAGE:$tag")
if [[ -z "$registry_name" || "$registry_name" == "<no value>" ]]; then
    log "the image has no io.modelcontextprotocol.server.name label"
    exit 1
fi
log "MCP Registry name (io.modelcontextprotocol.server.name): $registry_name"

# Earlier commits' tags, then the untagged images older than a week: the build stages' steps
# are untagged too, and they are the cache of the next build (a week: as long as the base lives).
while read -r name; do
    [[ "$name" == "$IMAGE:latest" || "$name" == "$IMAGE:$tag" ]] || "${PODMAN[@]}" untag "$name" "$name" >/dev/null
done < <("${PODMAN[@]}" images --format '{{.Repository}}:{{.Tag}}' --filter reference="$IMAGE")
"${PODMAN[@]}" image prune --force --filter until=168h >/dev/null

size=$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$IMAGE:$tag")
log "built $IMAGE:$tag (and :latest): $((size / 1000000)) MB; base $((T_BASE - T0)) s, build $((T_IMAGE - T_BASE)) s"
