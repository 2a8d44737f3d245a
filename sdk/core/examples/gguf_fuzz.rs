//! The long run of the GGUF mutation fuzzer (the same cases as `tests/gguf_fuzz.rs`, more of
//! them): `cargo run --release -p tern --example gguf_fuzz -- [--cases N] [--seed S]
//! [--start I] [MODEL.gguf ...]` (default: the three test models in $TERN_MODEL_DIR, 100,000
//! cases each). Prints progress every 1,000 cases and a tally per model; exits 1 on a crash.
//! A hang or an over-large allocation aborts the process, naming the case
//! (`--seed S --start I --cases 1` replays it).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/fuzz/mod.rs"]
mod fuzz;

use std::path::PathBuf;

#[global_allocator]
static ALLOC: fuzz::CountingAlloc = fuzz::CountingAlloc;

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut cases, mut seed, mut start, mut models) = (100_000u64, 1u64, 0u64, Vec::<PathBuf>::new());
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> u64 {
            args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                eprintln!("{name} needs a number");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--cases" => cases = num("--cases"),
            "--seed" => seed = num("--seed"),
            "--start" => start = num("--start"),
            path => models.push(PathBuf::from(path)),
        }
    }
    if models.is_empty() {
        models = [common::SMOLLM2, common::QWEN2, common::GEMMA3].iter().map(|f| common::model_path(f)).collect();
    }
    let mut crashed = false;
    for path in &models {
        let mut target = fuzz::Target::read(path);
        let t0 = std::time::Instant::now();
        let tally = target.run(seed, start, cases, |t| {
            eprintln!(
                "  {}: {} cases, {} typed errors, {} loaded, {} crashes",
                target_name(path),
                t.cases,
                t.typed_errors,
                t.loaded,
                t.crashes
            )
        });
        println!(
            "{}: seed {seed}, cases {start}..{}: {} typed errors, {} ok, {} crashes; peak heap {} MiB over the start, slowest case {:.2} s, {:.0} s in all",
            target_name(path),
            start + cases,
            tally.typed_errors,
            tally.loaded,
            tally.crashes,
            tally.peak_heap >> 20,
            tally.slowest.as_secs_f64(),
            t0.elapsed().as_secs_f64()
        );
        crashed |= tally.crashes > 0;
    }
    std::process::exit(i32::from(crashed));
}

fn target_name(path: &std::path::Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}
