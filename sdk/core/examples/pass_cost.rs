//! Times one forward pass over a chain of `n` tokens after a context of `depth` tokens (the
//! pass a speculative step verifies), wall clock and the calling thread's CPU time, averaged
//! over `iters` passes. For A/B comparisons of the multi-token path at depth:
//!
//! `cargo run --release -p tern --example pass_cost -- MODEL DEPTH N ITERS THREADS`

use std::time::Instant;

use tern::model::{Logits, Scratch};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, depth, n, iters, threads] = args.as_slice() else {
        return Err("usage: pass_cost MODEL DEPTH N ITERS THREADS".into());
    };
    let (depth, n, iters, threads): (usize, usize, usize, usize) =
        (depth.parse()?, n.parse()?, iters.parse()?, threads.parse()?);
    let engine = tern::Engine::load(model, tern::EngineOptions { threads: Some(threads), ..Default::default() })?;
    let model = engine.model();
    // Any tokens do: the cost depends on the counts, not the text.
    let context: Vec<u32> = (0..depth as u32).map(|i| 100 + (i * 7919) % 20000).collect();
    let mut kv = model.new_kv_cache(depth + n + 1);
    let mut scratch = Scratch::default();
    model.forward(engine.pool(), &mut kv, &mut scratch, &context, Logits::None)?;
    let base = kv.len();
    let chain: Vec<u32> = context.iter().copied().take(n).collect();
    let parents: Vec<Option<usize>> = (0..n).map(|i| i.checked_sub(1)).collect();
    let (cpu0, t0) = (thread_cpu_ms(), Instant::now());
    for _ in 0..iters.max(1) {
        model.forward_tree(engine.pool(), &mut kv, &mut scratch, &chain, &parents, Logits::All)?;
        kv.truncate(base);
    }
    let per = |total: f64| total / iters.max(1) as f64;
    println!(
        "n={n} depth={depth}: {:.3} ms/pass, {:.3} ms cpu/pass",
        per(t0.elapsed().as_secs_f64() * 1e3),
        per(thread_cpu_ms() - cpu0)
    );
    Ok(())
}

/// CPU time of the calling thread, in milliseconds.
fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 * 1e-6
}
