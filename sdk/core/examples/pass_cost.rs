//! Times forward passes over chains of tokens after a context of `depth` tokens (the passes a
//! speculative step verifies), wall clock and the calling thread's CPU time, over `iters`
//! iterations. `SIZES` is one chain length or several, comma-separated: each iteration runs
//! them in that order and every position of the sequence is timed on its own, so that the
//! cost of a pass can be seen as it depends on the passes before it (`1,1,1,1,8`: single-token
//! passes one to four passes after an eight-token one). For A/B comparisons of the multi-token
//! path at depth:
//!
//! `cargo run --release -p tern --example pass_cost -- MODEL DEPTH SIZES ITERS THREADS`

use std::time::Instant;

use tern::model::{Logits, Scratch};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, depth, sizes, iters, threads] = args.as_slice() else {
        return Err("usage: pass_cost MODEL DEPTH SIZES ITERS THREADS (SIZES: N or N1,N2,...)".into());
    };
    let (depth, iters, threads): (usize, usize, usize) = (depth.parse()?, iters.parse()?, threads.parse()?);
    let sizes = sizes.split(',').map(str::parse).collect::<Result<Vec<usize>, _>>()?;
    if sizes.contains(&0) || depth == 0 {
        return Err("the depth and every size must be at least 1 (the chain repeats the context's tokens)".into());
    }
    let longest = sizes.iter().copied().max().unwrap_or(1);
    let engine = tern::Engine::load(model, tern::EngineOptions { threads: Some(threads), ..Default::default() })?;
    let model = engine.model();
    // Any tokens do: the cost depends on the counts, not the text.
    let context: Vec<u32> = (0..depth as u32).map(|i| 100 + (i * 7919) % 20000).collect();
    let mut kv = model.new_kv_cache(depth + longest + 1);
    let mut scratch = Scratch::default();
    model.forward(engine.pool(), &mut kv, &mut scratch, &context, Logits::None)?;
    let base = kv.len();
    let chain: Vec<u32> = context.iter().copied().cycle().take(longest).collect();
    let parents: Vec<Option<usize>> = (0..longest).map(|i| i.checked_sub(1)).collect();
    // Per position of the sequence: wall-clock milliseconds of each pass, and CPU milliseconds.
    let mut wall = vec![Vec::with_capacity(iters); sizes.len()];
    let mut cpu = vec![0.0; sizes.len()];
    for _ in 0..iters.max(1) {
        for (slot, &n) in sizes.iter().enumerate() {
            let (cpu0, t0) = (thread_cpu_ms(), Instant::now());
            model.forward_tree(engine.pool(), &mut kv, &mut scratch, &chain[..n], &parents[..n], Logits::All)?;
            wall[slot].push(t0.elapsed().as_secs_f64() * 1e3);
            cpu[slot] += thread_cpu_ms() - cpu0;
            kv.truncate(base);
        }
    }
    for (slot, (&n, times)) in sizes.iter().zip(&mut wall).enumerate() {
        times.sort_by(f64::total_cmp);
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        let place = if sizes.len() > 1 { format!("#{slot} ") } else { String::new() };
        println!(
            "{place}n={n} depth={depth}: {mean:.3} ms/pass (min {:.3}, median {:.3}), {:.3} ms cpu/pass",
            times[0],
            times[times.len() / 2],
            cpu[slot] / times.len() as f64
        );
    }
    Ok(())
}

/// CPU time of the calling thread, in milliseconds.
fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 * 1e-6
}
