//! The GGUF mutation fuzzer (tests/fuzz) over the three models, 150 cases each per
//! run: every mutated file loads or gives a typed error, never a panic, an abort, an
//! allocation past the file's size + 1 GiB or a case over 10 s. The long job is the example:
//! `cargo run --release -p tern --example gguf_fuzz -- --cases 100000`.

mod common;
mod fuzz;

use common::*;

#[global_allocator]
static ALLOC: fuzz::CountingAlloc = fuzz::CountingAlloc;

/// Cases per model per run; `TERN_FUZZ_CASES` raises it.
fn cases() -> u64 {
    std::env::var("TERN_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(150)
}

fn fuzz(file: &str, seed: u64) {
    let mut target = fuzz::Target::read(&model_path(file));
    let tally = target.run(seed, 0, cases(), |_| {});
    eprintln!("{file}: {tally:?}");
    assert_eq!(tally.crashes, 0, "{file}: cases panicked (printed above)");
    assert!(tally.typed_errors > 0 && tally.loaded > 0, "{file}: the mutations reach both outcomes: {tally:?}");
}

// One test, so that the models run one after another under the one allocator count.
#[test]
fn mutated_models_load_or_give_typed_errors() {
    fuzz(SMOLLM2, 0x5eed_0001);
    fuzz(QWEN2, 0x5eed_0002);
    fuzz(GEMMA3, 0x5eed_0003);
}
