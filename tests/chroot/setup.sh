#!/usr/bin/env bash
# Builds the Debian trixie chroot the Swift and aarch64 tests run in, once, into $1
# (default ~/.cache/tern/chroot/trixie). Later runs find the ready marker and return at once.
#
# Inside: Swift 6 (`swiftlang`), Rust 1.85 with the arm64 standard library, the aarch64 cross
# linker and qemu-user. trixie is used because its swiftlang needs a newer libc than the host's.
# The chroot is built under a temporary name and renamed when complete, so an interrupted run
# never leaves a half-built chroot that looks ready.
set -euo pipefail

ROOT=${1:-${TERN_CACHE_DIR:-$HOME/.cache/tern}/chroot/trixie}
MIRROR=${TERN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# Bump when the package list changes: an older chroot is then rebuilt.
VERSION=1
MARKER="$ROOT/.tern-chroot-v$VERSION"
PACKAGES=swiftlang,libc6-dev,ca-certificates,rustc,cargo,gcc-aarch64-linux-gnu,libc6-dev-arm64-cross,qemu-user

if [ -e "$MARKER" ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "tests/chroot/setup.sh: building the chroot needs root (debootstrap, chroot)" >&2
    exit 1
fi
if ! command -v debootstrap >/dev/null; then
    echo "chroot: installing debootstrap (apt-get)" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; } >/dev/null
fi

BUILD="$ROOT.partial"
# Never delete through a mount (a test run that died may have left the model cache mounted).
for dir in "$ROOT" "$BUILD"; do
    for m in $(awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r); do
        umount "$m" || umount -l "$m"
    done
    if awk -v d="$dir/" 'index($2, d) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
        echo "tests/chroot/setup.sh: $dir still has mounts; not deleting it" >&2
        exit 1
    fi
done
rm -rf "$BUILD" "$ROOT"
mkdir -p "$BUILD"

echo "chroot: debootstrap trixie into $BUILD (a few minutes, about 3 GB)" >&2
debootstrap --variant=minbase --include="$PACKAGES" trixie "$BUILD" "$MIRROR" >"$BUILD.log" 2>&1 || {
    tail -30 "$BUILD.log" >&2
    exit 1
}

echo "chroot: adding arm64 (Rust standard library for aarch64-unknown-linux-gnu)" >&2
mount --bind /proc "$BUILD/proc"
trap 'umount "$BUILD/proc" 2>/dev/null || true' EXIT
chroot "$BUILD" /bin/sh -ec '
    dpkg --add-architecture arm64
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libstd-rust-dev:arm64
    apt-get clean
' >>"$BUILD.log" 2>&1 || {
    tail -30 "$BUILD.log" >&2
    exit 1
}
umount "$BUILD/proc"
trap - EXIT

touch "$BUILD/.tern-chroot-v$VERSION"
mv "$BUILD" "$ROOT"
rm -f "$BUILD.log"
echo "chroot: ready at $ROOT" >&2
