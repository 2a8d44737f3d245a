# Shared by tests/kotlin/run.sh and tests/swift/run.sh (sourced, not run): paths, the host build
# of tern-ffi, binding generation and the Rust reference answers.
#
# Env: TERN_MODEL_DIR (default ~/.cache/tern/models), TERN_CACHE_DIR (default ~/.cache/tern),
#      CARGO_TARGET_DIR (default target/).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${TERN_CACHE_DIR:-$HOME/.cache/tern}
TOOLS=$CACHE/tools
MODEL_DIR=${TERN_MODEL_DIR:-$CACHE/models}
MODEL=$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
PROMPTS=$ROOT/tests/bindings/prompts.tsv
# The test profile (optimised, no LTO) shares its build with `cargo test`; it lands in debug/.
FFI_OUT=$TARGET/debug
FFI_LIB=$FFI_OUT/libtern_ffi.so

step() { echo "== $*"; }
die() {
    echo "error: $*" >&2
    exit 1
}

require_model() {
    [[ -f $MODEL ]] || die "model not found: $MODEL (run \`cargo xtask models\` or set TERN_MODEL_DIR)"
}

# Builds the shared library, the binding generator and the reference-answer program.
build_ffi() {
    step "building tern-ffi"
    (cd "$ROOT" && cargo build -q -p tern-ffi --profile test --lib --bin uniffi-bindgen --example reference_answers)
    [[ -f $FFI_LIB ]] || die "missing $FFI_LIB"
}

# generate LANGUAGE CONFIG OUT_DIR: bindings from the built library (library mode).
generate() {
    rm -rf "$3" && mkdir -p "$3"
    "$FFI_OUT/uniffi-bindgen" generate --library "$FFI_LIB" --language "$1" --config "$2" --out-dir "$3" --no-format >/dev/null
}

# reference_answers OUT_DIR: the Rust session's greedy answer to each prompt, OUT_DIR/<n>.txt.
reference_answers() {
    step "computing the Rust session's answers"
    rm -rf "$1"
    "$FFI_OUT/examples/reference_answers" "$MODEL" "$PROMPTS" "$1"
}
