#!/usr/bin/env bash
# Builds the Swift package's generated parts on a Mac (Xcode 15+, rustup):
#   bindings/swift/TernFFI.xcframework          libtern_ffi.a for iOS devices (arm64), the
#                                               iOS simulator (arm64 + x86_64) and macOS
#                                               (arm64 + x86_64), with the C header and module map
#   bindings/swift/Sources/Tern/Generated/Tern.swift   the UniFFI-generated Swift
# and, with --zip, TernFFI.xcframework.zip and its checksum for a remote `binaryTarget(url:checksum:)`.
#
# usage: bindings/swift/build-xcframework.sh [--zip] [--profile PROFILE]   (default profile: release)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PROFILE=release
ZIP=0
while [[ $# -gt 0 ]]; do
    case $1 in
        --zip) ZIP=1 ;;
        --profile) PROFILE=$2; shift ;;
        *) echo "usage: $0 [--zip] [--profile PROFILE]" >&2; exit 2 ;;
    esac
    shift
done
[[ $(uname -s) == Darwin ]] || { echo "error: the XCFramework is built on macOS (xcodebuild, lipo)" >&2; exit 1; }

IOS=aarch64-apple-ios
IOS_SIM=(aarch64-apple-ios-sim x86_64-apple-ios)
MACOS=(aarch64-apple-darwin x86_64-apple-darwin)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=$TARGET_DIR/xcframework
# The same minimums as Package.swift.
export IPHONEOS_DEPLOYMENT_TARGET=15.0 MACOSX_DEPLOYMENT_TARGET=12.0

rustup target add "$IOS" "${IOS_SIM[@]}" "${MACOS[@]}" >/dev/null
cd "$ROOT"
for target in "$IOS" "${IOS_SIM[@]}" "${MACOS[@]}"; do
    echo "== cargo build $target ($PROFILE)"
    # No default features: the binding generator is not part of the library.
    cargo build -q -p tern-ffi --lib --no-default-features --profile "$PROFILE" --target "$target"
done
lib() { echo "$TARGET_DIR/$1/$PROFILE/libtern_ffi.a"; }

echo "== generating the Swift bindings"
rm -rf "$OUT" && mkdir -p "$OUT/generated" "$OUT/sim" "$OUT/macos"
# Library mode reads the interface from the built library (any target's has the same).
cargo run -q -p tern-ffi --bin uniffi-bindgen -- generate --library "$(lib aarch64-apple-darwin)" \
    --language swift --config "$ROOT/uniffi.toml" --out-dir "$OUT/generated"
mkdir -p "$HERE/Sources/Tern/Generated"
cp "$OUT/generated/Tern.swift" "$HERE/Sources/Tern/Generated/Tern.swift"

# Headers in a directory of their own: Xcode copies every XCFramework's Headers/ into one
# include directory, where a bare module.modulemap would collide with other packages'.
HEADERS=$OUT/headers/TernFFI
mkdir -p "$HEADERS"
cp "$OUT/generated/TernFFI.h" "$HEADERS/"
cp "$OUT/generated/TernFFI.modulemap" "$HEADERS/module.modulemap"

echo "== fat libraries (simulator, macOS)"
lipo -create "$(lib "${IOS_SIM[0]}")" "$(lib "${IOS_SIM[1]}")" -output "$OUT/sim/libtern_ffi.a"
lipo -create "$(lib "${MACOS[0]}")" "$(lib "${MACOS[1]}")" -output "$OUT/macos/libtern_ffi.a"

echo "== TernFFI.xcframework"
rm -rf "$HERE/TernFFI.xcframework"
xcodebuild -create-xcframework \
    -library "$(lib "$IOS")" -headers "$OUT/headers" \
    -library "$OUT/sim/libtern_ffi.a" -headers "$OUT/headers" \
    -library "$OUT/macos/libtern_ffi.a" -headers "$OUT/headers" \
    -output "$HERE/TernFFI.xcframework" >/dev/null

if [[ $ZIP == 1 ]]; then
    (cd "$HERE" && rm -f TernFFI.xcframework.zip && ditto -c -k --sequesterRsrc --keepParent TernFFI.xcframework TernFFI.xcframework.zip)
    echo "== $HERE/TernFFI.xcframework.zip"
    echo "checksum: $(cd "$HERE" && swift package compute-checksum TernFFI.xcframework.zip)"
    echo "For a remote package, replace the binaryTarget's path with url: and checksum:."
fi
echo "done: open bindings/swift/Package.swift in Xcode, or add the package to an app"
