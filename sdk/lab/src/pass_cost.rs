//! `tern-lab pass-cost`: times forward passes over chains of tokens after a context of `depth`
//! tokens (the passes a speculative step verifies), wall clock and the calling thread's CPU
//! time, over `iters` iterations. `--sizes` is one chain length or several, comma-separated:
//! each iteration runs them in that order and every position of the sequence is timed on its
//! own, so that the cost of a pass can be seen as it depends on the passes before it
//! (`1,1,1,1,8`: single-token passes one to four passes after an eight-token one). For A/B
//! comparisons of the multi-token path at depth:
//!
//! `tern-lab pass-cost --model MODEL --depth 1400 --sizes 8 --iters 40 --threads 2`
//!
//! (the former `cargo run --release -p tern --example pass_cost -- MODEL DEPTH SIZES ITERS
//! THREADS`, same figures).

use clap::Args;
use tern::speculative::cost::PassTimer;
use tern::EngineOptions;
use tern_cli::args::{load_with, ModelArgs};
use tern_cli::error::{CliError, Result};
use tern_cli::output::Stdout;

#[derive(Args, Debug)]
pub struct PassCostArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Context tokens before each chain
    #[arg(long, default_value_t = 1400, value_parser = clap::value_parser!(u64).range(1..))]
    pub depth: u64,
    /// Chain lengths, timed in this order each iteration (comma-separated)
    #[arg(long, value_delimiter = ',', default_value = "8", value_parser = clap::value_parser!(u64).range(1..))]
    pub sizes: Vec<u64>,
    /// Iterations
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(1..))]
    pub iters: u64,
    /// Worker threads [default: chosen by the engine]
    #[arg(long, short = 't', value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub threads: Option<u64>,
}

pub fn run(a: PassCostArgs) -> Result<()> {
    let sizes: Vec<usize> = a.sizes.iter().map(|&n| n as usize).collect();
    let (depth, iters) = (a.depth as usize, a.iters as usize);
    let longest = sizes.iter().copied().max().ok_or_else(|| CliError::Usage("no --sizes".into()))?;
    let loaded = load_with(&a.model, EngineOptions { threads: a.threads.map(|t| t as usize), ..Default::default() })?;
    // Any tokens do: the cost depends on the counts, not the text.
    let context: Vec<u32> = (0..depth as u32).map(|i| 100 + (i * 7919) % 20000).collect();
    let mut timer = PassTimer::new(&loaded.engine, &context, longest)?;
    // Per position of the sequence: wall-clock milliseconds of each pass, and CPU milliseconds.
    let mut wall = vec![Vec::with_capacity(iters); sizes.len()];
    let mut cpu = vec![0.0; sizes.len()];
    for _ in 0..iters {
        for (slot, &n) in sizes.iter().enumerate() {
            let cpu0 = thread_cpu_ms();
            wall[slot].push(timer.time(n)?.as_secs_f64() * 1e3);
            cpu[slot] += thread_cpu_ms() - cpu0;
        }
    }
    let mut out = Stdout::new();
    for (slot, (&n, times)) in sizes.iter().zip(&mut wall).enumerate() {
        times.sort_by(f64::total_cmp);
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        let place = if sizes.len() > 1 { format!("#{slot} ") } else { String::new() };
        out.line(&format!(
            "{place}n={n} depth={depth}: {mean:.3} ms/pass (min {:.3}, median {:.3}), {:.3} ms cpu/pass",
            times[0],
            times[times.len() / 2],
            cpu[slot] / times.len() as f64
        ))?;
    }
    Ok(())
}

/// CPU time of the calling thread, in milliseconds (0 where the clock is not available).
fn thread_cpu_ms() -> f64 {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes the timespec it is given.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 * 1e-6
    }
    #[cfg(not(unix))]
    {
        0.0
    }
}
