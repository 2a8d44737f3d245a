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
#   older CPUs:  the kernel unit tests again on emulated CPUs without i8mm (cortex-a55) and
#                without dotprod (cortex-a53), each checked to list only the sets it runs: the
#                one binary falls back at run time
#   per set:     every set is forced once with TERN_KERNELS and checked to be the one selected;
#                the model golden runs for the base SIMD set (neon: phones without extensions)
#                and the best one (about a minute each here). Sets in between are covered by
#                the unit tests and by the best: i8mm's one-token kernels are dotprod's own
#                functions; the model repacks its weights (on by default), so the best set's
#                golden runs its tile kernels (dotprod's are held to the reference and to
#                batch invariance by the unit tests). TERN_QEMU_ALL_SETS=1 runs the golden for every set. The scalar
#                reference is skipped: the same Rust code runs natively, where it is
#                golden-tested, and the unit tests hold every set to it here.
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

KERNEL_SETS="qemu-aarch64 -L /usr/aarch64-linux-gnu /work/aarch64-target/aarch64-unknown-linux-gnu/debug/examples/kernel_sets"
mapfile -t SETS < <(in_chroot "$KERNEL_SETS" | grep -v '^selected ')
[[ ${#SETS[@]} -gt 0 ]] || die "no kernel sets listed"
step "kernel sets under qemu: ${SETS[*]}"

step "unit tests and kernel-independent goldens"
in_chroot "cd /mnt/tern/src && $CARGO test $T $ONCE -- --skip byte_flips_never_panic --skip load_time"

for cpu_best in cortex-a55:dotprod cortex-a53:neon; do
    cpu=${cpu_best%%:*} best=${cpu_best#*:}
    step "QEMU_CPU=$cpu: kernel sets fall back to $best"
    listed=$(in_chroot "QEMU_CPU=$cpu $KERNEL_SETS" | grep -v '^selected ' | tail -n 1)
    [[ $listed == "$best" ]] || die "QEMU_CPU=$cpu: best set \`$listed\`, expected \`$best\`"
    in_chroot "cd /mnt/tern/src && QEMU_CPU=$cpu $CARGO test -q $T --lib quant::"
done

BASE_SET=${SETS[1]:-${SETS[0]}}
BEST_SET=${SETS[${#SETS[@]} - 1]}
for isa in "${SETS[@]}"; do
    [[ $isa == reference && ${#SETS[@]} -gt 1 ]] && continue
    selected=$(in_chroot "TERN_KERNELS=$isa $KERNEL_SETS" | sed -n 's/^selected //p')
    [[ $selected == "$isa" ]] || die "TERN_KERNELS=$isa selected \`$selected\`"
    if [[ $isa != "$BASE_SET" && $isa != "$BEST_SET" && ${TERN_QEMU_ALL_SETS:-0} != 1 ]]; then
        step "TERN_KERNELS=$isa: selected (golden covered by the unit tests and $BEST_SET)"
        continue
    fi
    step "TERN_KERNELS=$isa: SmolLM2 against llama.cpp"
    in_chroot "cd /mnt/tern/src && TERN_KERNELS=$isa TERN_TEST_THREADS=1 TERN_GOLDEN_CASES=$GOLDEN_CASES \
        $CARGO test $T $PER_SET"
done
