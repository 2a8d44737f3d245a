#!/usr/bin/env bash
# The Kotlin package on a Linux JVM: builds tern-ffi, generates the Kotlin bindings (JVM flavour),
# compiles them with the hand-written layer (bindings/kotlin) and the tests with kotlinc, and
# runs them with JNA against the host library and the real SmolLM2 model. The Android flavour
# (what the AAR compiles) is compiled too, against stubs of the Android API (nothing of it runs).
#
# Tools are installed once: the Kotlin compiler from npm into ~/.cache/tern/tools, JNA from apt.
# Needs cargo, a JDK 17+ (java, javac, jar), npm, apt-get (when JNA is absent). Env: see
# tests/bindings/common.sh.
# The last line printed is "N passed, M failed"; the exit status is non-zero on any failure.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../bindings/common.sh"
source "$ROOT/tests/bindings/kotlin-tools.sh"

WORK=$TARGET/bindings-tests/kotlin

require_model
kotlin_tools

build_ffi
mkdir -p "$WORK/lib"
generate_kotlin_jvm "$WORK/generated"
cp "$FFI_LIB" "$WORK/lib/"
reference_answers "$WORK/answers"

step "compiling with kotlinc"
CP=$JNA_JAR:$COROUTINES_JAR
mapfile -t SOURCES < <(find "$WORK/generated" "$ROOT/bindings/kotlin/src/main/kotlin" "$ROOT/tests/kotlin" -name '*.kt' | sort)
"$KOTLINC" -nowarn -d "$WORK/tests.jar" -classpath "$CP" "${SOURCES[@]}"

# The AAR's Kotlin (Android flavour, src/android/kotlin) compiles; it is not run here.
compile_android_flavour "$WORK/android"

step "running the Kotlin suite"
# JNA finds libtern_ffi.so on the classpath ($WORK/lib).
java -cp "$WORK/tests.jar:$CP:$STDLIB_JAR:$WORK/lib" BindingsTestKt \
    "$MODEL" "$PROMPTS" "$WORK/answers"
