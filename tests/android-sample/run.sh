#!/usr/bin/env bash
# The Android sample's logic (android-sample/app-logic: chat view model, reply suggester, UI
# agent) on a Linux JVM: compiled with kotlinc together with the Kotlin package (generated
# bindings, JVM flavour, + bindings/kotlin) and its tests, then run with JNA against the host
# library and the real SmolLM2 model on the dev workloads' `ui` and `reply` cases.
#
# Tools as for tests/kotlin/run.sh (kotlinc from npm, JNA from apt, cached). Needs python3 for the
# workload cases. Env: see tests/bindings/common.sh.
# The last line printed is "N passed, M failed"; the exit status is non-zero on any failure.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../bindings/common.sh"
source "$ROOT/tests/bindings/kotlin-tools.sh"

WORK=$TARGET/bindings-tests/android-sample
LOGIC=$ROOT/android-sample/app-logic

require_model
kotlin_tools
build_ffi
mkdir -p "$WORK/lib"
generate_kotlin_jvm "$WORK/generated"
cp "$FFI_LIB" "$WORK/lib/"
step "extracting the workload cases"
rm -rf "$WORK/cases"
python3 "$ROOT/tests/samples/cases.py" "$ROOT/sdk/core/tests/workloads/dev.jsonl" "$WORK/cases"

step "compiling app-logic and its tests with kotlinc"
CP=$JNA_JAR:$COROUTINES_JAR
mapfile -t SOURCES < <(find "$WORK/generated" "$ROOT/bindings/kotlin/src/main/kotlin" "$LOGIC/src" -name '*.kt' | sort)
"$KOTLINC" -nowarn -d "$WORK/app-logic-tests.jar" -classpath "$CP" "${SOURCES[@]}"

step "running the app-logic suite"
# JNA finds libtern_ffi.so on the classpath ($WORK/lib).
java -cp "$WORK/app-logic-tests.jar:$CP:$STDLIB_JAR:$WORK/lib" dev.tern.sample.AppLogicTestKt "$MODEL" "$WORK/cases"
