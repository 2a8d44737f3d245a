#!/usr/bin/env bash
# Kotlin bindings smoke test on a Linux JVM: builds tern-ffi, generates the Kotlin package with
# UniFFI (library mode), compiles it with tests/kotlin/SmokeTest.kt and runs it against the real
# SmolLM2 model. Tools it lacks are installed once and cached under ~/.cache/tern/tools.
#
# Needs: cargo, java (17+), npm (for the Kotlin compiler), apt-get (for JNA, if absent).
# Env: TERN_MODEL_DIR (default ~/.cache/tern/models), TERN_TOOLS_DIR (default
#      ~/.cache/tern/tools), CARGO_TARGET_DIR (default target/).
# The last line printed is "N passed, M failed"; the exit status is non-zero on any failure.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TOOLS=${TERN_TOOLS_DIR:-$HOME/.cache/tern/tools}
KOTLIN_VERSION=2.4.20
MODEL_DIR=${TERN_MODEL_DIR:-$HOME/.cache/tern/models}
MODEL=$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$TARGET/kotlin-smoke

fail() { echo "error: $*" >&2; echo "0 passed, 1 failed"; exit 1; }
step() { echo "== $*"; }
# Any failing step before the test itself still ends with the summary line.
trap 'echo "0 passed, 1 failed"' ERR

[[ -f $MODEL ]] || fail "model not found: $MODEL (run \`cargo xtask models\` or set TERN_MODEL_DIR)"
command -v java >/dev/null || fail "java is not installed"

# --- tools -------------------------------------------------------------------------------------
KOTLIN_HOME=$TOOLS/kotlin-compiler-$KOTLIN_VERSION
if [[ ! -x $KOTLIN_HOME/bin/kotlinc ]]; then
    step "installing kotlin-compiler@$KOTLIN_VERSION (npm) into $KOTLIN_HOME"
    command -v npm >/dev/null || fail "npm is needed to fetch the Kotlin compiler"
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "kotlin-compiler@$KOTLIN_VERSION" >/dev/null && tar xzf "kotlin-compiler-$KOTLIN_VERSION.tgz")
    mkdir -p "$TOOLS"
    rm -rf "$KOTLIN_HOME"
    mv "$tmp/package" "$KOTLIN_HOME"
    rm -rf "$tmp"
    chmod +x "$KOTLIN_HOME"/bin/*
fi
COROUTINES_JAR=$KOTLIN_HOME/lib/kotlinx-coroutines-core-jvm.jar
[[ -f $COROUTINES_JAR ]] || fail "no kotlinx-coroutines jar in $KOTLIN_HOME/lib"

JNA_JAR=/usr/share/java/jna.jar
if [[ ! -f $JNA_JAR ]]; then
    step "installing libjna-java (apt-get)"
    SUDO=; [[ $(id -u) -eq 0 ]] || SUDO=sudo
    $SUDO apt-get install -y -q libjna-java >/dev/null 2>&1 \
        || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q libjna-java >/dev/null; } \
        || fail "cannot install libjna-java"
fi

# --- build and generate ------------------------------------------------------------------------
cd "$ROOT"
step "building tern-ffi (release)"
cargo build -q -p tern-ffi --release --lib --bin uniffi-bindgen
LIB=$TARGET/release/libtern_ffi.so
[[ -f $LIB ]] || fail "missing $LIB"

rm -rf "$WORK" && mkdir -p "$WORK/gen" "$WORK/lib"
step "generating Kotlin bindings"
"$TARGET/release/uniffi-bindgen" generate "$LIB" --language kotlin \
    --config "$ROOT/uniffi.toml" --out-dir "$WORK/gen" --no-format
cp "$LIB" "$WORK/lib/"

step "compiling with kotlinc"
CP=$JNA_JAR:$COROUTINES_JAR
"$KOTLIN_HOME/bin/kotlinc" -nowarn -d "$WORK/smoke.jar" -classpath "$CP" \
    $(find "$WORK/gen" -name '*.kt') "$ROOT/tests/kotlin/SmokeTest.kt"

step "running SmokeTest"
# JNA finds libtern_ffi.so on the classpath ($WORK/lib).
java -cp "$WORK/smoke.jar:$CP:$KOTLIN_HOME/lib/kotlin-stdlib.jar:$WORK/lib" SmokeTestKt "$MODEL" || exit $?
