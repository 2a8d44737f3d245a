# The Kotlin compiler and JNA for the JVM suites (tests/kotlin, tests/android-sample); sourced
# after common.sh. `kotlin_tools` installs what is missing (kotlinc from npm into
# ~/.cache/tern/tools, JNA from apt) and sets KOTLIN_HOME, KOTLINC, JNA_JAR, COROUTINES_JAR and
# STDLIB_JAR. `compile_android_flavour` checks that the AAR's Kotlin compiles.

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

# compile_android_flavour OUT_DIR: compiles what the AAR compiles (the bindings generated with
# uniffi.toml as it is, Android flavour, + bindings/kotlin/src/main/kotlin and src/android/kotlin)
# with kotlinc, against stubs of the Android API it uses (tests/bindings/android-api, built
# with javac), JNA and coroutines; nothing is run. Fails when that code stops compiling. OUT_DIR
# is emptied first; needs build_ffi.
compile_android_flavour() {
    local out=$1 api=$ROOT/tests/bindings/android-api
    local -a stubs sources
    rm -rf "$out" && mkdir -p "$out/android-api"
    step "compiling the Android flavour (generated + bindings/kotlin) against Android API stubs"
    mapfile -t stubs < <(find "$api" -name '*.java' | sort)
    javac -nowarn -d "$out/android-api" "${stubs[@]}"
    jar cf "$out/android-api.jar" -C "$out/android-api" .
    generate kotlin "$ROOT/uniffi.toml" "$out/generated"
    # Without the Android cleaner the stubs would check nothing of the generated code.
    grep -q 'android\.system\.SystemCleaner' "$out/generated/dev/tern/tern_ffi.kt" \
        || die "the bindings generated with uniffi.toml are not the Android flavour"
    mapfile -t sources < <(find "$out/generated" "$ROOT/bindings/kotlin/src/main/kotlin" \
        "$ROOT/bindings/kotlin/src/android/kotlin" -name '*.kt' | sort)
    "$KOTLINC" -nowarn -d "$out/classes" -classpath "$out/android-api.jar:$JNA_JAR:$COROUTINES_JAR" "${sources[@]}"
}
