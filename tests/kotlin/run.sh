#!/usr/bin/env bash
# The Kotlin package on a Linux JVM: builds tern-ffi, generates the Kotlin bindings (JVM flavour),
# compiles them with the hand-written layer (bindings/kotlin) and the tests with kotlinc, and
# runs them with JNA against the host library and the real SmolLM2 model.
#
# Tools are installed once: the Kotlin compiler from npm into ~/.cache/tern/tools, JNA from apt.
# Needs cargo, java 17+, npm, apt-get (when JNA is absent). Env: see tests/bindings/common.sh.
# The last line printed is "N passed, M failed"; the exit status is non-zero on any failure.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../bindings/common.sh"

KOTLIN_VERSION=2.4.20
KOTLIN_HOME=$TOOLS/kotlin-compiler-$KOTLIN_VERSION
JNA_JAR=/usr/share/java/jna.jar
WORK=$TARGET/bindings-tests/kotlin

require_model
command -v java >/dev/null || die "java is not installed"

if [[ ! -x $KOTLIN_HOME/bin/kotlinc ]]; then
    step "installing kotlin-compiler@$KOTLIN_VERSION (npm) into $KOTLIN_HOME"
    command -v npm >/dev/null || die "npm is needed to fetch the Kotlin compiler"
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "kotlin-compiler@$KOTLIN_VERSION" >/dev/null && tar xzf "kotlin-compiler-$KOTLIN_VERSION.tgz")
    chmod +x "$tmp"/package/bin/*
    mkdir -p "$TOOLS" && rm -rf "$KOTLIN_HOME" && mv "$tmp/package" "$KOTLIN_HOME" && rm -rf "$tmp"
fi
COROUTINES_JAR=$KOTLIN_HOME/lib/kotlinx-coroutines-core-jvm.jar
[[ -f $COROUTINES_JAR ]] || die "no kotlinx-coroutines jar in $KOTLIN_HOME/lib"

if [[ ! -f $JNA_JAR ]]; then
    step "installing libjna-java (apt-get)"
    SUDO=
    [[ $(id -u) -eq 0 ]] || SUDO=sudo
    { $SUDO apt-get install -y -qq libjna-java || { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq libjna-java; }; } >/dev/null \
        || die "cannot install libjna-java"
fi

build_ffi
mkdir -p "$WORK/lib"
# uniffi.toml is set up for the Android package; the JVM flavour differs in one setting.
sed 's/^android = true$/android = false/' "$ROOT/uniffi.toml" >"$WORK/uniffi-jvm.toml"
grep -q '^android = false$' "$WORK/uniffi-jvm.toml" || die "uniffi.toml has no \`android = true\` line to switch"
step "generating the Kotlin bindings (JVM flavour)"
generate kotlin "$WORK/uniffi-jvm.toml" "$WORK/generated"
cp "$FFI_LIB" "$WORK/lib/"
reference_answers "$WORK/answers"

step "compiling with kotlinc"
CP=$JNA_JAR:$COROUTINES_JAR
mapfile -t SOURCES < <(find "$WORK/generated" "$ROOT/bindings/kotlin/src/main/kotlin" "$ROOT/tests/kotlin" -name '*.kt' | sort)
"$KOTLIN_HOME/bin/kotlinc" -nowarn -d "$WORK/tests.jar" -classpath "$CP" "${SOURCES[@]}"

step "running the Kotlin suite"
# JNA finds libtern_ffi.so on the classpath ($WORK/lib).
java -cp "$WORK/tests.jar:$CP:$KOTLIN_HOME/lib/kotlin-stdlib.jar:$WORK/lib" BindingsTestKt \
    "$MODEL" "$PROMPTS" "$WORK/answers"
