# The Debian trixie chroot shared by tests/swift/run.sh and tests/aarch64/run.sh (sourced).
#
#   chroot_ready            builds the chroot once (tests/chroot/setup.sh), cached
#   chroot_mount SRC DEST   bind-mounts a host directory read-only at DEST inside the chroot
#   in_chroot SCRIPT        runs a bash script inside, with a clean environment plus $CHROOT_ENV
#
# /proc is mounted on the first call; every mount is undone when the calling script exits.
# A lock file beside the chroot makes concurrent runs take turns.
# Inside, /work is the chroot's own (cached) working area.

CHROOT=${TERN_CHROOT:-${TERN_CACHE_DIR:-$HOME/.cache/tern}/chroot/trixie}
CHROOT_SETUP=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/setup.sh
CHROOT_MOUNTS=()
CHROOT_ENV=()

chroot_ready() {
    [[ $(id -u) -eq 0 ]] || die "the chroot needs root (chroot, mount)"
    # One user of the chroot at a time (its /proc mount and /work are shared); held until exit.
    mkdir -p "$(dirname "$CHROOT")"
    exec {CHROOT_LOCK}>"$CHROOT.lock"
    flock "$CHROOT_LOCK"
    "$CHROOT_SETUP" "$CHROOT"
    trap chroot_unmount EXIT
    if ! mountpoint -q "$CHROOT/proc"; then
        mount --bind /proc "$CHROOT/proc"
        CHROOT_MOUNTS+=("$CHROOT/proc")
    fi
    # Name resolution and the host's certificate authorities (the host may sit behind a TLS
    # proxy whose root only its own bundle holds) for cargo's downloads inside.
    cp -L /etc/resolv.conf "$CHROOT/etc/resolv.conf" 2>/dev/null || true
    if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
        cp -L /etc/ssl/certs/ca-certificates.crt "$CHROOT/etc/ssl/host-ca-certificates.crt"
    else
        cp -L "$CHROOT/etc/ssl/certs/ca-certificates.crt" "$CHROOT/etc/ssl/host-ca-certificates.crt"
    fi
    mkdir -p "$CHROOT/work"
}

chroot_mount() {
    local dest=$CHROOT$2
    mkdir -p "$dest"
    if mountpoint -q "$dest"; then umount "$dest"; fi
    mount --bind "$1" "$dest"
    CHROOT_MOUNTS+=("$dest")
    mount -o remount,bind,ro "$dest"
}

chroot_unmount() {
    local i
    for ((i = ${#CHROOT_MOUNTS[@]} - 1; i >= 0; i--)); do
        umount "${CHROOT_MOUNTS[i]}" 2>/dev/null || umount -l "${CHROOT_MOUNTS[i]}" 2>/dev/null || true
    done
    CHROOT_MOUNTS=()
}

in_chroot() {
    chroot "$CHROOT" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        LANG=C.UTF-8 CARGO_HTTP_CAINFO=/etc/ssl/host-ca-certificates.crt "${CHROOT_ENV[@]}" \
        /bin/bash -euo pipefail -c "$1"
}
