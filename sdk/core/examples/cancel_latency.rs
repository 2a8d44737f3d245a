//! How long a cancel takes to end a request, in prefill and in decode:
//! `cargo run --release -p tern --example cancel_latency -- MODEL.gguf [ROUNDS] [THREADS]`.
//!
//! Each round starts a request, cancels it from another thread at a random moment of the
//! phase measured, and times from the cancel to the `Done` event. Prefill rounds use a prompt
//! of about 1,500 tokens (a fresh cache each round) and count only cancels that landed while
//! prefilling; decode rounds cancel after the first answer token. Prints p50, p99 and the
//! maximum of each phase.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tern::{Engine, EngineOptions, Event, FinishReason, Session, SessionOptions};

/// splitmix64, for the cancel moments.
struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Runs `gen` to its end; the time from the cancel (set by the canceller) to `Done`, when the
/// request ended cancelled in the phase wanted.
fn run(
    gen: impl Iterator<Item = tern::Result<Event>>,
    cancelled_at: &Mutex<Option<Instant>>,
    in_prefill: bool,
) -> tern::Result<Option<Duration>> {
    let mut tokens = 0;
    for ev in gen {
        match ev? {
            Event::Token { .. } => tokens += 1,
            Event::Done(stats) => {
                let end = Instant::now();
                let Some(at) = *cancelled_at.lock().unwrap_or_else(|e| e.into_inner()) else {
                    return Ok(None);
                };
                let right_phase = if in_prefill { stats.generated_tokens == 0 } else { tokens > 0 };
                return Ok((stats.finish_reason == FinishReason::Cancelled && right_phase).then(|| end - at));
            }
        }
    }
    Ok(None)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn report(phase: &str, mut v: Vec<Duration>, rounds: usize) {
    v.sort();
    if v.is_empty() {
        println!("{phase}: no round ended cancelled in this phase");
        return;
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{phase}: {} of {rounds} rounds cancelled in the phase, latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        v.len(),
        ms(percentile(&v, 0.5)),
        ms(percentile(&v, 0.99)),
        ms(v[v.len() - 1])
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: cancel_latency MODEL.gguf [ROUNDS] [THREADS]");
        std::process::exit(2);
    };
    let rounds: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(100);
    let threads: Option<usize> = args.next().and_then(|v| v.parse().ok());
    let engine = Engine::load(&path, EngineOptions { threads, ..Default::default() })?;
    let info = engine.info();
    println!("{} ({}), {} threads, {} kernels", info.name, info.architecture, info.threads, info.kernels);
    let prompt =
        "The keeper of the lighthouse wrote in his log every night about the ships, the storms and the birds. "
            .repeat(70);
    let opts = SessionOptions {
        sampling: Some(tern::SamplingOptions::greedy()),
        max_tokens: 4096,
        ignore_eos: true,
        context_length: Some(4096),
        ..Default::default()
    };
    let mut rng = Rng(7);

    // How long one whole prefill takes: cancels land uniformly inside it.
    let prefill_time = {
        let mut s = Session::new(Arc::clone(&engine), SessionOptions { max_tokens: 1, ..opts.clone() })?;
        let t0 = Instant::now();
        for ev in s.send(&prompt)? {
            ev?;
        }
        t0.elapsed()
    };
    println!("one prefill: {:.0} ms", prefill_time.as_secs_f64() * 1e3);

    let mut prefill = Vec::new();
    for _ in 0..rounds {
        let mut s = Session::new(Arc::clone(&engine), opts.clone())?;
        let handle = s.cancel_handle();
        let at = Arc::new(Mutex::new(None));
        let delay = prefill_time.mul_f64(0.9 * rng.unit());
        let a = Arc::clone(&at);
        let gen = s.send(&prompt)?;
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(delay);
            *a.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            handle.cancel();
        });
        let latency = run(gen, &at, true)?;
        canceller.join().map_err(|_| "the canceller thread panicked")?;
        prefill.extend(latency);
    }
    report("prefill", prefill, rounds);

    let mut decode = Vec::new();
    let mut s = Session::new(Arc::clone(&engine), opts.clone())?;
    for _ in 0..rounds {
        s.reset();
        let handle = s.cancel_handle();
        let at = Arc::new(Mutex::new(None));
        let mut gen = s.send("Tell me a long story about the sea.")?;
        // The first token: decode has begun.
        match gen.next().transpose()? {
            Some(Event::Token { .. }) => {}
            Some(Event::Done(_)) | None => continue,
        }
        let delay = Duration::from_millis(200).mul_f64(rng.unit());
        let a = Arc::clone(&at);
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(delay);
            *a.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            handle.cancel();
        });
        let latency =
            run(std::iter::once(Ok(Event::Token { text: String::new(), ids: Vec::new() })).chain(gen), &at, false)?;
        canceller.join().map_err(|_| "the canceller thread panicked")?;
        decode.extend(latency);
    }
    report("decode", decode, rounds);
    Ok(())
}
