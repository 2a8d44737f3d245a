#!/usr/bin/env bash
# The SDK's phone code paths: sdk/core's tests cross-built for aarch64-unknown-linux-gnu with the
# trixie chroot's Rust 1.85 and run under qemu-aarch64, once per kernel set the (emulated) CPU
# runs, each forced in turn with TERN_KERNELS. The sets are discovered, not listed here: the
# `kernel_sets` example prints what `tern::quant::available_kernels()` returns under qemu.
#
# What runs (every instruction is emulated, so the heavy model tests are chosen):
#   once:        every unit test (`--lib`: the kernel tests hold every set to the scalar
#                reference), tokenizer and chat-template goldens, GGUF robustness; not the
#                160 loads of mutated model files (parsing, not the CPU) nor the tokenizer's
#                load-time bound (a native-speed figure)
#   per set:     (every set but the scalar reference: the same Rust code runs natively, where it
#                is golden-tested, and the unit tests hold every set to it here)
#                kernel_set_golden.rs: teacher-forced top-1 equals llama.cpp's on SmolLM2 at
#                every decisive position of the first $GOLDEN_CASES chat and completion cases,
#                with that set forced and one compute thread (emulated workers would spin on
#                each other). golden_logits.rs (logit tolerances over all cases) and the greedy
#                decoding tests take tens of minutes per set here: they run natively only.
#
# Needs root (chroot). Env: TERN_MODEL_DIR, TERN_CACHE_DIR (see tests/bindings/common.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../bindings/common.sh"
source "$ROOT/tests/chroot/lib.sh"

require_model
chroot_ready
chroot_mount "$ROOT" /mnt/tern/src
chroot_mount "$MODEL_DIR" /mnt/tern/models

CHROOT_ENV=(
    CARGO_TARGET_DIR=/work/aarch64-target
    CARGO_TERM_COLOR=never
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
    "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=qemu-aarch64 -L /usr/aarch64-linux-gnu"
    TERN_MODEL_DIR=/mnt/tern/models
)
GOLDEN_CASES=${TERN_QEMU_GOLDEN_CASES:-1}
# Rust 1.85 inside; --locked: the lock file must already hold versions that build with it.
CARGO="cargo --locked"
# Default features off: structured output (llguidance) needs Rust 1.87.
T="-p tern --no-default-features --target aarch64-unknown-linux-gnu"

step "building sdk/core's tests for aarch64 (rustc $(in_chroot 'rustc --version' | cut -d' ' -f2))"
# Test binaries run once, and the one run per kernel set. Only these are built: each links the
# whole crate, and the others would cost minutes.
ONCE="--lib --test tokenizer_golden --test chat_golden --test gguf_robustness"
PER_SET="--test kernel_set_golden"
in_chroot "cd /mnt/tern/src && $CARGO test -q $T $ONCE $PER_SET --no-run && $CARGO build -q $T --profile test --example kernel_sets"

mapfile -t SETS < <(in_chroot "qemu-aarch64 -L /usr/aarch64-linux-gnu /work/aarch64-target/aarch64-unknown-linux-gnu/debug/examples/kernel_sets" | grep -v '^selected ')
[[ ${#SETS[@]} -gt 0 ]] || die "no kernel sets listed"
step "kernel sets under qemu: ${SETS[*]}"

step "unit tests and kernel-independent goldens"
in_chroot "cd /mnt/tern/src && $CARGO test $T $ONCE -- --skip byte_flips_never_panic --skip load_time"

for isa in "${SETS[@]}"; do
    [[ $isa == reference && ${#SETS[@]} -gt 1 ]] && continue
    step "TERN_KERNELS=$isa: SmolLM2 against llama.cpp"
    selected=$(in_chroot "TERN_KERNELS=$isa qemu-aarch64 -L /usr/aarch64-linux-gnu /work/aarch64-target/aarch64-unknown-linux-gnu/debug/examples/kernel_sets" | sed -n 's/^selected //p')
    [[ $selected == "$isa" ]] || die "TERN_KERNELS=$isa selected \`$selected\`"
    in_chroot "cd /mnt/tern/src && TERN_KERNELS=$isa TERN_TEST_THREADS=1 TERN_GOLDEN_CASES=$GOLDEN_CASES \
        $CARGO test $T $PER_SET"
done
