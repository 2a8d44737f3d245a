//! The engine against llama.cpp's reference outputs (tests/golden/): teacher-forced top-1
//! identical wherever the reference is decisive (margin ≥ 0.5), and the reference's top-10
//! logits within 0.5 at a minimum share of positions, for every chat and completion case of the
//! three models.
//!
//! The share is 95% for Qwen2.5-0.5B. SmolLM2-135M and Gemma-3-270M are so sensitive to
//! rounding (a change as small as rounding attention inputs to f16 moves their logits by ~0.1)
//! that llama.cpp itself, the same version built for this machine's CPU, lands only 87–91%
//! (SmolLM2) and 72–87% (Gemma 3) of positions within 0.5 of the reference file, depending on
//! batch size and flash attention; even a change of summation order in our attention moves
//! Gemma's share by ±4 points. Their floors sit below that range, where a real defect (which
//! drops the share far lower and breaks top-1) still fails.

mod common;

use common::*;
use tern::{Engine, EngineOptions};

const MARGIN: f64 = 0.5;
const LOGIT_TOLERANCE: f64 = 0.5;

/// Minimum share of positions whose reference top-10 logits are all within the tolerance.
fn min_close_fraction(file: &str) -> f64 {
    match file {
        QWEN2 => 0.95,
        SMOLLM2 => 0.82,
        GEMMA3 => 0.65,
        _ => 0.95,
    }
}

struct Report {
    positions: usize,
    decisive: usize,
    top1_mismatch: Vec<String>,
    close: usize,
    /// Positions within tolerance once the common offset of the ten logits is removed (a shift
    /// of all logits changes no probability).
    close_centered: usize,
    max_dev: f64,
}

fn check_model(file: &str, kernels: Option<&str>) -> Report {
    check_with(file, EngineOptions { kernels: kernels.map(String::from), ..Default::default() })
}

fn check_with(file: &str, opts: EngineOptions) -> Report {
    let engine = Engine::load(model_path(file), opts).expect("model loads");
    let g = golden(file);
    let mut r =
        Report { positions: 0, decisive: 0, top1_mismatch: Vec::new(), close: 0, close_centered: 0, max_dev: 0.0 };
    let cases = ["chat", "completions"]
        .iter()
        .flat_map(|k| g[*k].as_array().cloned().unwrap_or_default().into_iter().map(move |c| (*k, c)));
    for (kind, case) in cases {
        let prompt = ids(&case["prompt_ids"]);
        let greedy = ids(&case["greedy"]);
        let steps = case["steps"].as_array().expect("steps");
        let mut input = prompt.clone();
        input.extend_from_slice(&greedy[..greedy.len().saturating_sub(1)]);
        let first = prompt.len() - 1;
        engine
            .for_each_logits(&input, |pos, logits| {
                if pos < first || pos - first >= steps.len() {
                    return;
                }
                let j = pos - first;
                let step = &steps[j];
                let top10 = step["top10"].as_array().expect("top10");
                let margin = step["margin"].as_f64().unwrap_or(0.0);
                r.positions += 1;
                let ref_top1 = top10[0][0].as_u64().expect("id") as usize;
                let ours_top1 = tern::sampling::argmax(logits) as usize;
                if margin >= MARGIN {
                    r.decisive += 1;
                    if ours_top1 != ref_top1 {
                        r.top1_mismatch
                            .push(format!("{kind} step {j}: ours {ours_top1} ref {ref_top1} (margin {margin})"));
                    }
                }
                let devs: Vec<f64> = top10
                    .iter()
                    .map(|pair| {
                        logits[pair[0].as_u64().expect("id") as usize] as f64 - pair[1].as_f64().expect("logit")
                    })
                    .collect();
                let worst = devs.iter().fold(0.0f64, |m, d| m.max(d.abs()));
                let mean = devs.iter().sum::<f64>() / devs.len() as f64;
                let worst_centered = devs.iter().fold(0.0f64, |m, d| m.max((d - mean).abs()));
                r.max_dev = r.max_dev.max(worst);
                r.close += (worst <= LOGIT_TOLERANCE) as usize;
                r.close_centered += (worst_centered <= LOGIT_TOLERANCE) as usize;
            })
            .expect("forward pass");
    }
    r
}

fn assert_model(file: &str) {
    let r = check_model(file, None);
    let frac = r.close as f64 / r.positions as f64;
    let frac_centered = r.close_centered as f64 / r.positions as f64;
    eprintln!(
        "{file}: {} positions, {} decisive, {} top-1 mismatches, {:.1}% within {LOGIT_TOLERANCE} (max deviation {:.3}), {:.1}% within it after removing the common offset",
        r.positions,
        r.decisive,
        r.top1_mismatch.len(),
        frac * 100.0,
        r.max_dev,
        frac_centered * 100.0
    );
    assert!(r.positions > 0);
    assert!(r.top1_mismatch.is_empty(), "{file}: top-1 differs at {:?}", r.top1_mismatch);
    let floor = min_close_fraction(file);
    assert!(
        frac >= floor,
        "{file}: only {:.1}% of positions within tolerance (floor {:.0}%)",
        frac * 100.0,
        floor * 100.0
    );
}

#[test]
fn smollm2_matches_reference() {
    assert_model(SMOLLM2);
}

#[test]
fn qwen2_matches_reference() {
    assert_model(QWEN2);
}

#[test]
fn gemma3_matches_reference() {
    assert_model(GEMMA3);
}

/// The scalar reference kernels give the same verdicts (they are what the fast paths are held to).
#[test]
fn smollm2_matches_reference_with_scalar_kernels() {
    let r = check_model(SMOLLM2, Some("reference"));
    let frac = r.close as f64 / r.positions as f64;
    eprintln!(
        "scalar kernels: {} top-1 mismatches, {:.1}% within {LOGIT_TOLERANCE}",
        r.top1_mismatch.len(),
        frac * 100.0
    );
    assert!(r.top1_mismatch.is_empty(), "{:?}", r.top1_mismatch);
    assert!(frac >= min_close_fraction(SMOLLM2));
}

/// The opt-in int8-key / fp8-value cache: its effect on agreement, printed for
/// docs/benchmarks.md. It must stay usable (top-1 agrees at nearly every decisive position) but
/// is not held to the f16 floors.
#[test]
fn int8_fp8_kv_cache_stays_close() {
    for file in [SMOLLM2, QWEN2, GEMMA3] {
        let opts = EngineOptions { kv_precision: tern::model::KvPrecision::Int8Fp8, ..Default::default() };
        let r = check_with(file, opts);
        let frac = r.close as f64 / r.positions as f64;
        let centered = r.close_centered as f64 / r.positions as f64;
        eprintln!(
            "{file} [int8/fp8 KV]: {} top-1 mismatches of {} decisive, {:.1}% within {LOGIT_TOLERANCE} (max deviation {:.3}), {:.1}% after removing the common offset",
            r.top1_mismatch.len(),
            r.decisive,
            frac * 100.0,
            r.max_dev,
            centered * 100.0
        );
        assert!(r.top1_mismatch.len() * 20 <= r.decisive, "{file}: {:?}", r.top1_mismatch);
    }
}
