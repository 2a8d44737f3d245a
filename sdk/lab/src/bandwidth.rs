//! `tern-lab bandwidth`: what this machine's memory gives a plain read right now, with the same
//! threads as a benchmark. Decode of a bandwidth-bound model is judged against it: bytes a token
//! reads × tokens/s over this figure. The buffer is far larger than the caches, each thread reads a
//! contiguous share, and the figure is the median over passes (the fastest is reported beside it).

use std::hint::black_box;
use std::time::Instant;

use clap::Args;
use serde::Serialize;
use tern_cli::error::{CliError, Result};

#[derive(Args, Debug)]
pub struct BandwidthArgs {
    /// Reading threads
    #[arg(long, short = 't', default_value_t = 2)]
    pub threads: usize,
    /// Buffer size in MiB (well past the last-level cache)
    #[arg(long, default_value_t = 1024)]
    pub mib: usize,
    /// Timed passes over the whole buffer
    #[arg(long, default_value_t = 10)]
    pub passes: usize,
    /// Print JSON instead of a line
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Report {
    threads: usize,
    bytes: usize,
    passes: usize,
    median_gbs: f64,
    max_gbs: f64,
}

pub fn run(a: BandwidthArgs) -> Result<()> {
    if a.threads == 0 || a.mib == 0 || a.passes == 0 {
        return Err(CliError::Usage("--threads, --mib and --passes must be at least 1".into()));
    }
    let words = a.mib * (1 << 20) / 8;
    // Written once so that every page is faulted in before timing (and is not the zero page).
    let buffer: Vec<u64> = (0..words as u64).collect();
    let share = words.div_ceil(a.threads);
    read_all(&buffer, share); // one untimed pass: TLB and page tables warm
    let mut gbs: Vec<f64> = (0..a.passes)
        .map(|_| {
            let t = Instant::now();
            read_all(&buffer, share);
            (words * 8) as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    gbs.sort_by(f64::total_cmp);
    let report = Report {
        threads: a.threads,
        bytes: words * 8,
        passes: a.passes,
        median_gbs: gbs[gbs.len() / 2],
        max_gbs: gbs[gbs.len() - 1],
    };
    if a.json {
        println!("{}", serde_json::to_string(&report).map_err(|e| CliError::Other(e.to_string()))?);
    } else {
        println!(
            "read bandwidth, {} threads over {} MiB: {:.1} GB/s median, {:.1} GB/s fastest of {} passes",
            report.threads, a.mib, report.median_gbs, report.max_gbs, report.passes
        );
    }
    Ok(())
}

/// Every thread sums its share; the sums go to `black_box` so that the reads stay.
fn read_all(buffer: &[u64], share: usize) {
    std::thread::scope(|s| {
        for part in buffer.chunks(share) {
            s.spawn(move || black_box(sum(part)));
        }
    });
}

/// Eight independent lanes, so the loop is bound by loads, not by one add chain.
fn sum(words: &[u64]) -> u64 {
    let mut lanes = [0u64; 8];
    let mut chunks = words.chunks_exact(8);
    for c in &mut chunks {
        for (l, w) in lanes.iter_mut().zip(c) {
            *l = l.wrapping_add(*w);
        }
    }
    let tail: u64 = chunks.remainder().iter().fold(0, |a, w| a.wrapping_add(*w));
    lanes.iter().fold(tail, |a, l| a.wrapping_add(*l))
}

#[cfg(test)]
mod tests {
    use super::sum;

    #[test]
    fn the_sum_counts_every_word_once() {
        let words: Vec<u64> = (1..=1003).collect();
        assert_eq!(sum(&words), 1003 * 1004 / 2);
    }
}
