#!/usr/bin/env bash
# The iOS sample's logic (ios-sample/Sources/TernSampleLogic: chat view model, reply suggester,
# in-app UI agent) on Linux: in the Debian trixie chroot (Swift 6, see tests/chroot/setup.sh),
# compiles the `Tern` module (generated code + bindings/swift/Sources/Tern), the
# `TernSampleLogic` module and its checks (ios-sample/Tests/SampleLogicChecks) in Swift 6
# language mode, and runs them against the host library and the real SmolLM2 model on the dev
# workloads' `ui` and `reply` cases.
#
# Needs root (chroot) and python3 for the workload cases. Env: see tests/bindings/common.sh.
# The last line printed is "N passed, M failed"; the exit status is non-zero on any failure.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../bindings/common.sh"
source "$ROOT/tests/chroot/lib.sh"

WORK=$TARGET/bindings-tests/ios-sample
SAMPLE=$ROOT/ios-sample

require_model
chroot_ready
build_ffi
step "generating the Swift bindings"
generate swift "$ROOT/uniffi.toml" "$WORK/generated"
step "extracting the workload cases"
rm -rf "$WORK/cases"
python3 "$ROOT/tests/samples/cases.py" "$ROOT/sdk/core/tests/workloads/dev.jsonl" "$WORK/cases"

# Everything the build needs, laid out inside the chroot (its own /work, not a mount).
INSIDE=/work/ios-sample
rm -rf "$CHROOT$INSIDE" && mkdir -p "$CHROOT$INSIDE"/{ffi,tern,logic,checks}
cp "$FFI_LIB" "$WORK/generated/TernFFI.h" "$CHROOT$INSIDE/ffi/"
cp "$WORK/generated/TernFFI.modulemap" "$CHROOT$INSIDE/ffi/module.modulemap"
cp "$WORK/generated/Tern.swift" "$ROOT"/bindings/swift/Sources/Tern/*.swift "$CHROOT$INSIDE/tern/"
cp "$SAMPLE"/Sources/TernSampleLogic/*.swift "$CHROOT$INSIDE/logic/"
cp "$SAMPLE"/Tests/SampleLogicChecks/*.swift "$CHROOT$INSIDE/checks/"
cp -r "$WORK/cases" "$CHROOT$INSIDE/"
chroot_mount "$MODEL_DIR" /mnt/tern/models

# Debian's libswiftObservation.so leaves one runtime symbol (swift::threading::fatal, the
# threading error path) undefined; it is bound lazily and only on that path, so the links that use
# Observation accept it.
step "compiling Tern, TernSampleLogic and the checks"
in_chroot "
    cd $INSIDE
    FLAGS='-swift-version 6 -module-cache-path $INSIDE/cache -I $INSIDE/ffi -L $INSIDE/ffi -Xcc -fmodule-map-file=$INSIDE/ffi/module.modulemap'
    OBSERVATION='-Xlinker --allow-shlib-undefined'
    swiftc \$FLAGS -O -emit-module -emit-library -module-name Tern -o libTern.so -ltern_ffi tern/*.swift
    swiftc \$FLAGS \$OBSERVATION -O -I . -L . -emit-module -emit-library -module-name TernSampleLogic -o libTernSampleLogic.so -lTern -ltern_ffi logic/*.swift
    swiftc \$FLAGS \$OBSERVATION -O -I . -L . -lTernSampleLogic -lTern -ltern_ffi checks/*.swift -o sample-checks
"

# The model picker's check downloads the model from an HTTP server on loopback (the chroot shares
# the host's network).
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server --bind 127.0.0.1 --directory "$MODEL_DIR" "$PORT" >/dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; chroot_unmount' EXIT

step "running the sample-logic checks"
in_chroot "cd $INSIDE && LD_LIBRARY_PATH=$INSIDE:$INSIDE/ffi ./sample-checks /mnt/tern/models/$(basename "$MODEL") cases http://127.0.0.1:$PORT/"
