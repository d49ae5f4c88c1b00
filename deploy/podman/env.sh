# podman as scripts/build_image.sh and deploy/try_image.sh run it; sourced by both, after ROOT is set.
#
# - CONTAINERS_CONF: deploy/podman/containers.conf (runc, open-files and process limits within
#   conmon's) unless the caller names another file.
# - CODEX_PODMAN_STORAGE_DRIVER: a storage driver to insist on; unset, podman's own choice, which
#   is overlay where the kernel allows it and vfs otherwise (or whatever the store was made with).
#   vfs copies an image's whole file system for every build step and every container: on this
#   project's CI machine it made a cold build take twice as long as overlay and a container
#   four times as long to start. podman refuses a driver other than the one its store was made
#   with ("database configuration mismatch").
# - install_podman: apt-get installs what is missing (root): podman, buildah, runc, uidmap,
#   catatonit (the pause process of `podman kube play`'s pods), slirp4netns, and mmdebstrap.

export CONTAINERS_CONF=${CONTAINERS_CONF:-$ROOT/deploy/podman/containers.conf}
PODMAN=(podman)
if [[ -n "${CODEX_PODMAN_STORAGE_DRIVER:-}" ]]; then
    PODMAN+=(--storage-driver="$CODEX_PODMAN_STORAGE_DRIVER")
fi

install_podman() {
    local need=() tool
    for tool in podman buildah runc newuidmap catatonit slirp4netns mmdebstrap; do
        command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
    done
    ((${#need[@]})) || return 0
    need=("${need[@]/newuidmap/uidmap}")
    if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        printf 'podman: need %s (apt-get as root installs them)\n' "${need[*]}" >&2
        return 3
    fi
    printf 'podman: apt-get install %s\n' "${need[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" </dev/null >/dev/null
}
