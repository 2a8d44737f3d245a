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
cp -r "$WORK/answers" "$PROMPTS" "$ROOT"/tests/bindings/*.json "$CHROOT$INSIDE/"
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

# The root Package.swift (what apps add by URL) as SwiftPM reads it: the local XCFramework until
# a release writes the published one, which release.sh's edit then selects.
step "reading the root Package.swift (swift package dump-package)"
PKG=$INSIDE/package
rm -rf "$CHROOT$PKG" && mkdir -p "$CHROOT$PKG/bindings/swift/Sources/Tern"
cp "$ROOT/Package.swift" "$CHROOT$PKG/"
cp "$ROOT/bindings/swift/Sources/Tern/PrivacyInfo.xcprivacy" "$CHROOT$PKG/bindings/swift/Sources/Tern/"
dump() { in_chroot "cd $PKG && HOME=$INSIDE swift package dump-package"; }
dump | grep -q '"path" : "bindings/swift/TernFFI.xcframework"' || { echo "error: the root package does not use the local XCFramework" >&2; exit 1; }
sed -i -E 's|^let published: \(url: String, checksum: String\)\? = .*|let published: (url: String, checksum: String)? = (url: "https://example.invalid/TernFFI.xcframework.zip", checksum: "0000")|' "$CHROOT$PKG/Package.swift"
dump | grep -q '"url" : "https://example.invalid/TernFFI.xcframework.zip"' || { echo "error: a released root package does not use the published XCFramework" >&2; exit 1; }
echo "the root Package.swift reads both ways"
