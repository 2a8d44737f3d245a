//! `tern bench`: prefill and decode throughput, measured the way llama-bench does (pp N / tg M).
//!
//! Prefill runs N token ids with a single generated token; decode generates M tokens with
//! end-of-generation ignored; decode at depth D generates M tokens after D prompt tokens are in
//! the cache (attention then reads D keys per step, as in a long conversation). Each repetition starts from an empty context, and the reported
//! speed is the median over the repetitions after one untimed warm-up (which pages the mapped
//! weights in and sizes the scratch buffers).

use std::io::IsTerminal;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use tern::tokenizer::Tokenizer;
use tern::KvPrecision;
use tern::{EngineOptions, Event, Session, SessionOptions, SpeculationOptions, Stats};

use crate::args::{load_with, ModelArgs};
use crate::error::{CliError, Result};
use crate::output::{self, mib, Stdout};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Prompt length for the prefill test
    #[arg(long, short = 'p', default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..))]
    pub prompt_tokens: u64,
    /// Tokens to generate for the decode test (at least 2: the first comes from the prompt's
    /// pass, and decode is timed over the rest)
    #[arg(long, short = 'n', default_value_t = 128, value_parser = clap::value_parser!(u64).range(2..))]
    pub gen_tokens: u64,
    /// Worker threads [default: chosen by the engine]
    #[arg(long, short = 't', value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub threads: Option<u64>,
    /// Context depth for the long-context decode test (0 skips it)
    #[arg(long, short = 'd', default_value_t = 1536)]
    pub depth: u64,
    /// Timed repetitions of each test
    #[arg(long, short = 'r', default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    pub repetitions: u64,
    /// Print one JSON object instead of a table
    #[arg(long)]
    pub json: bool,
    /// Keep the weights in the file's layout (no repacking at load)
    #[arg(long)]
    pub no_repack: bool,
    /// Force a kernel set (reference, avx2, avxvnni, avx512, neon, dotprod, i8mm) [default: the best this CPU runs]
    #[arg(long)]
    pub kernels: Option<String>,
    /// KV cache precision
    #[arg(long, value_enum, default_value_t = KvArg::F16)]
    pub kv: KvArg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KvArg {
    /// f16 keys and values
    F16,
    /// int8 keys and fp8 (e4m3) values
    Int8Fp8,
}

#[derive(Serialize)]
struct Report {
    model: String,
    architecture: String,
    kernels: String,
    kv_cache: &'static str,
    threads: usize,
    prompt_tokens: usize,
    gen_tokens: usize,
    repetitions: usize,
    prefill_tps: f64,
    decode_tps: f64,
    /// Context depth of the long-context decode test (absent when skipped).
    depth: Option<usize>,
    decode_at_depth_tps: Option<f64>,
    load_ms: f64,
    /// Weight bytes repacked at load, and the time it took (within `load_ms`).
    repacked_bytes: usize,
    repack_ms: f64,
    /// Weight bytes one decode step reads (bandwidth = this × decode_tps).
    decode_bytes_per_token: usize,
    peak_rss_bytes: Option<u64>,
    prefill_tps_runs: Vec<f64>,
    decode_tps_runs: Vec<f64>,
    decode_at_depth_tps_runs: Vec<f64>,
}

pub fn run(a: BenchArgs) -> Result<()> {
    let (n_prompt, n_gen, reps) = (a.prompt_tokens as usize, a.gen_tokens as usize, a.repetitions as usize);
    let depth = a.depth as usize;
    let threads = a.threads.map(|t| t as usize);
    // Like llama-bench: a context just large enough for the tests, so KV memory is comparable.
    let ctx = n_prompt.max(n_gen + 1).max(if depth > 0 { depth + n_gen } else { 0 }) + 1;
    let opts = EngineOptions {
        threads,
        context_length: Some(ctx),
        kernels: a.kernels.clone(),
        repack_weights: Some(!a.no_repack),
        kv_precision: match a.kv {
            KvArg::F16 => KvPrecision::F16,
            KvArg::Int8Fp8 => KvPrecision::Int8Fp8,
        },
        ..Default::default()
    };
    let loaded = load_with(&a.model, opts)?;
    let engine = loaded.engine.clone();
    let info = engine.info();
    if ctx > info.context_length {
        return Err(CliError::Usage(format!(
            "the test needs {ctx} tokens of context, the model has {}",
            info.context_length
        )));
    }
    let prompt = bench_prompt(engine.tokenizer(), info.vocab_size, n_prompt.max(depth))?;
    let (prompt, depth_prompt) = (&prompt[..n_prompt], &prompt[..depth]);
    // Decode starts from the prompt's first token (BOS where the model uses one), as tg in llama-bench.
    let decode_prompt = &prompt[..1];

    let session = |max_tokens: usize| {
        Session::new(
            engine.clone(),
            SessionOptions {
                sampling: Some(tern::SamplingOptions::greedy()),
                max_tokens,
                ignore_eos: true,
                context_length: Some(ctx),
                // Plain decoding is what this measures.
                speculation: SpeculationOptions::off(),
                ..Default::default()
            },
        )
    };
    // A session per test and repetition, dropped after it: one KV cache and one set of batch
    // buffers at a time, as a single llama.cpp context holds (the peak RSS compares the two).

    let bar = if a.json || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let tests = if depth > 0 { 3 } else { 2 };
        let bar = ProgressBar::new(tests * (reps as u64 + 1));
        if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}") {
            bar.set_style(style);
        }
        bar
    };

    let mut prefill_runs = Vec::with_capacity(reps);
    let mut decode_runs = Vec::with_capacity(reps);
    let mut deep_runs = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let label = if rep == 0 { "warm-up".to_owned() } else { format!("rep {rep}/{reps}") };
        bar.set_message(format!("{label}: pp{n_prompt}"));
        let s = drain(session(1)?.complete_ids(prompt)?)?;
        check(&s, n_prompt, 1, "prefill")?;
        bar.inc(1);

        bar.set_message(format!("{label}: tg{n_gen}"));
        let d = drain(session(n_gen)?.complete_ids(decode_prompt)?)?;
        check(&d, 1, n_gen, "decode")?;
        bar.inc(1);

        if depth > 0 {
            bar.set_message(format!("{label}: tg{n_gen} @ d{depth}"));
            let dd = drain(session(n_gen)?.complete_ids(depth_prompt)?)?;
            check(&dd, depth, n_gen, "decode at depth")?;
            bar.inc(1);
            if rep > 0 {
                deep_runs.push(dd.decode_tokens_per_s);
            }
        }

        if rep > 0 {
            prefill_runs.push(s.prefill_tokens_per_s);
            decode_runs.push(d.decode_tokens_per_s);
        }
    }
    bar.finish_and_clear();

    let report = Report {
        model: loaded
            .path
            .file_name()
            .map_or_else(|| loaded.path.display().to_string(), |n| n.to_string_lossy().into_owned()),
        architecture: info.architecture.clone(),
        kernels: info.kernels.to_owned(),
        kv_cache: match a.kv {
            KvArg::F16 => "f16",
            KvArg::Int8Fp8 => "int8-fp8",
        },
        threads: info.threads,
        prompt_tokens: n_prompt,
        gen_tokens: n_gen,
        repetitions: reps,
        prefill_tps: median(&prefill_runs),
        decode_tps: median(&decode_runs),
        depth: (depth > 0).then_some(depth),
        decode_at_depth_tps: (depth > 0).then(|| median(&deep_runs)),
        load_ms: loaded.load_time.as_secs_f64() * 1e3,
        repacked_bytes: info.repacked_bytes as usize,
        repack_ms: info.repack_ms,
        decode_bytes_per_token: info.decode_weight_bytes as usize,
        peak_rss_bytes: tern::peak_rss_bytes(),
        prefill_tps_runs: prefill_runs,
        decode_tps_runs: decode_runs,
        decode_at_depth_tps_runs: deep_runs,
    };
    print_report(&report, a.json)
}

fn print_report(r: &Report, json: bool) -> Result<()> {
    let mut out = Stdout::new();
    if json {
        let s = serde_json::to_string(r).map_err(|e| CliError::Other(e.to_string()))?;
        return Ok(out.line(&s)?);
    }
    let spread = |runs: &[f64]| {
        let (lo, hi) = runs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| (l.min(x), h.max(x)));
        format!("{lo:.2} .. {hi:.2}")
    };
    out.line(&format!(
        "| {:<36} | {:>7} | {:>13} | {:>10} | {:>20} |",
        "model", "threads", "test", "t/s", "min .. max"
    ))?;
    out.line(&format!("| {:-<36} | {:->7} | {:->13} | {:->10} | {:->20} |", "", "", "", "", ""))?;
    let mut tests = vec![
        (format!("pp{}", r.prompt_tokens), r.prefill_tps, &r.prefill_tps_runs),
        (format!("tg{}", r.gen_tokens), r.decode_tps, &r.decode_tps_runs),
    ];
    if let (Some(depth), Some(tps)) = (r.depth, r.decode_at_depth_tps) {
        tests.push((format!("tg{} @ d{depth}", r.gen_tokens), tps, &r.decode_at_depth_tps_runs));
    }
    for (test, tps, runs) in tests {
        out.line(&format!("| {:<36} | {:>7} | {test:>13} | {tps:>10.2} | {:>20} |", r.model, r.threads, spread(runs)))?;
    }
    let rss = r.peak_rss_bytes.map_or_else(|| "unknown".to_owned(), mib);
    let repack = if r.repacked_bytes > 0 {
        format!(" (repacking {} in {:.0} ms)", mib(r.repacked_bytes as u64), r.repack_ms)
    } else {
        String::new()
    };
    out.line(&format!(
        "{} kernels, load {:.0} ms{repack}, peak RSS {rss}, median of {} repetitions",
        r.kernels, r.load_ms, r.repetitions
    ))?;
    Ok(())
}

/// Runs a generation to its end and returns its stats.
fn drain(generation: impl Iterator<Item = tern::Result<Event>>) -> Result<Stats> {
    for event in generation {
        if let Event::Done(stats) = event? {
            return Ok(stats);
        }
    }
    Err(CliError::Other("generation ended without stats".into()))
}

/// A run that reused cache or stopped early measures something else than it claims.
fn check(s: &Stats, prompt: usize, generated: usize, what: &str) -> Result<()> {
    if s.cached_tokens != 0 || s.prompt_tokens != prompt || s.generated_tokens != generated {
        return Err(CliError::Other(format!(
            "{what} run: {} prompt tokens ({} cached), {} generated, finish: {}; expected {prompt} and {generated}",
            s.prompt_tokens,
            s.cached_tokens,
            s.generated_tokens,
            output::finish_reason(&s.finish_reason)
        )));
    }
    Ok(())
}

/// N deterministic pseudo-random ids that decode to visible text: control and unused tokens
/// would exercise paths real prompts never take. Starts with BOS where the model adds one.
fn bench_prompt(tok: &Tokenizer, vocab: usize, n: usize) -> Result<Vec<u32>> {
    let mut ids = tok.encode("", tok.add_bos_default(), false)?;
    ids.truncate(n);
    let mut rng = SplitMix64(0x7e57_5eed);
    let mut tries = 0usize;
    while ids.len() < n {
        tries += 1;
        if tries > 100 * n + 10_000 {
            return Err(CliError::Other("could not find enough ordinary tokens in the vocabulary".into()));
        }
        let id = (rng.next() % vocab as u64) as u32;
        if tok.is_control(id) || tok.is_eog(id) {
            continue;
        }
        // Byte-fallback pieces and whitespace-only tokens are rare in real text.
        let text = tok.decode(&[id], true);
        if !text.trim().is_empty() && !text.contains('\u{fffd}') {
            ids.push(id);
        }
    }
    Ok(ids)
}

struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn splitmix_is_deterministic() {
        let (mut a, mut b) = (SplitMix64(1), SplitMix64(1));
        assert_eq!((a.next(), a.next()), (b.next(), b.next()));
    }
}
