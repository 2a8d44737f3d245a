# The Kotlin compiler and JNA for the JVM suites (tests/kotlin, tests/android-sample); sourced
# after common.sh. `kotlin_tools` installs what is missing (kotlinc from npm into
# ~/.cache/tern/tools, JNA from apt) and sets KOTLIN_HOME, KOTLINC, JNA_JAR, COROUTINES_JAR and
# STDLIB_JAR.

KOTLIN_VERSION=2.4.20
KOTLIN_HOME=$TOOLS/kotlin-compiler-$KOTLIN_VERSION
KOTLINC=$KOTLIN_HOME/bin/kotlinc
JNA_JAR=/usr/share/java/jna.jar
COROUTINES_JAR=$KOTLIN_HOME/lib/kotlinx-coroutines-core-jvm.jar
STDLIB_JAR=$KOTLIN_HOME/lib/kotlin-stdlib.jar

kotlin_tools() {
    command -v java >/dev/null || die "java is not installed"
    if [[ ! -x $KOTLINC ]]; then
        step "installing kotlin-compiler@$KOTLIN_VERSION (npm) into $KOTLIN_HOME"
        command -v npm >/dev/null || die "npm is needed to fetch the Kotlin compiler"
        local tmp
        tmp=$(mktemp -d)
        (cd "$tmp" && npm pack --silent "kotlin-compiler@$KOTLIN_VERSION" >/dev/null && tar xzf "kotlin-compiler-$KOTLIN_VERSION.tgz")
        chmod +x "$tmp"/package/bin/*
        mkdir -p "$TOOLS" && rm -rf "$KOTLIN_HOME" && mv "$tmp/package" "$KOTLIN_HOME" && rm -rf "$tmp"
    fi
    [[ -f $COROUTINES_JAR ]] || die "no kotlinx-coroutines jar in $KOTLIN_HOME/lib"
    if [[ ! -f $JNA_JAR ]]; then
        step "installing libjna-java (apt-get)"
        local sudo=
        [[ $(id -u) -eq 0 ]] || sudo=sudo
        { $sudo apt-get install -y -qq libjna-java || { $sudo apt-get update -qq && $sudo apt-get install -y -qq libjna-java; }; } >/dev/null \
            || die "cannot install libjna-java"
    fi
}

# generate_kotlin_jvm OUT_DIR: the Kotlin bindings in their JVM flavour (uniffi.toml is set up for
# the Android package; the JVM flavour differs in one setting).
generate_kotlin_jvm() {
    local config=$1.uniffi-jvm.toml
    mkdir -p "$(dirname "$1")"
    sed 's/^android = true$/android = false/' "$ROOT/uniffi.toml" >"$config"
    grep -q '^android = false$' "$config" || die "uniffi.toml has no \`android = true\` line to switch"
    step "generating the Kotlin bindings (JVM flavour)"
    generate kotlin "$config" "$1"
}
