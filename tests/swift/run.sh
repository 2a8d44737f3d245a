#!/usr/bin/env bash
# The Swift package on Linux: builds tern-ffi on the host, generates the Swift bindings, then in
# the Debian trixie chroot (Swift 6, see tests/chroot/setup.sh) compiles the `Tern` module
# (generated code + bindings/swift/Sources/Tern) and the tests, and runs them against the host
# library and the real SmolLM2 model.
#
# Needs root (chroot). Env: see tests/bindings/common.sh.
# The last line printed is "N passed, M failed"; the exit status is non-zero on any failure.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../bindings/common.sh"
source "$ROOT/tests/chroot/lib.sh"

WORK=$TARGET/bindings-tests/swift

require_model
chroot_ready
build_ffi
step "generating the Swift bindings"
generate swift "$ROOT/uniffi.toml" "$WORK/generated"
reference_answers "$WORK/answers"

# Everything the build needs, laid out inside the chroot (its own /work, not a mount).
INSIDE=/work/swift
rm -rf "$CHROOT$INSIDE" && mkdir -p "$CHROOT$INSIDE"/{ffi,module,tests}
cp "$FFI_LIB" "$WORK/generated/TernFFI.h" "$CHROOT$INSIDE/ffi/"
cp "$WORK/generated/TernFFI.modulemap" "$CHROOT$INSIDE/ffi/module.modulemap"
cp "$WORK/generated/Tern.swift" "$ROOT"/bindings/swift/Sources/Tern/*.swift "$CHROOT$INSIDE/module/"
cp "$ROOT"/tests/swift/*.swift "$CHROOT$INSIDE/tests/"
cp -r "$WORK/answers" "$PROMPTS" "$CHROOT$INSIDE/"
chroot_mount "$MODEL_DIR" /mnt/tern/models

step "compiling the Tern module and the tests (swiftc $(in_chroot 'swiftc --version 2>&1' | sed -n 's/.*Swift version \([^ ]*\).*/\1/p'))"
in_chroot "
    cd $INSIDE
    FLAGS='-swift-version 6 -module-cache-path $INSIDE/cache -I $INSIDE/ffi -L $INSIDE/ffi -Xcc -fmodule-map-file=$INSIDE/ffi/module.modulemap'
    swiftc \$FLAGS -O -emit-module -emit-library -module-name Tern -o libTern.so -ltern_ffi module/*.swift
    swiftc \$FLAGS -O -I . -L . -lTern -ltern_ffi tests/*.swift -o tern-tests
"

step "running the Swift suite"
in_chroot "cd $INSIDE && LD_LIBRARY_PATH=$INSIDE:$INSIDE/ffi ./tern-tests /mnt/tern/models/$(basename "$MODEL") prompts.tsv answers"
