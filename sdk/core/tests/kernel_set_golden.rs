//! The kernel set in use (the best one, or the one `TERN_KERNELS` forces) against llama.cpp on
//! SmolLM2: teacher-forced top-1 identical wherever the reference is decisive (margin ≥ 0.5).
//! Small enough to run under qemu once per aarch64 kernel set (tests/aarch64/run.sh, which
//! takes the first `TERN_GOLDEN_CASES` cases of each kind); golden_logits.rs adds the logit
//! tolerances over all cases natively.

mod common;

use common::*;
use tern::Engine;

#[test]
fn forced_kernel_set_agrees_with_reference() {
    let engine = Engine::load(model_path(SMOLLM2), test_engine_options()).expect("model loads");
    if let Ok(forced) = std::env::var("TERN_KERNELS") {
        assert_eq!(engine.info().kernels, forced.trim(), "TERN_KERNELS={forced} is not the set in use");
    }
    let g = golden(SMOLLM2);
    let (mut decisive, mut mismatches) = (0, Vec::new());
    for kind in ["chat", "completions"] {
        for (n, case) in g[kind].as_array().expect("cases").iter().take(golden_cases()).enumerate() {
            let prompt = ids(&case["prompt_ids"]);
            let greedy = ids(&case["greedy"]);
            let mut input = prompt.clone();
            input.extend_from_slice(&greedy[..greedy.len().saturating_sub(1)]);
            let top = engine.score(&input, 1).expect("forward pass");
            for (j, step) in case["steps"].as_array().expect("steps").iter().enumerate() {
                let want = step["top10"][0][0].as_u64().expect("id") as u32;
                if step["margin"].as_f64().unwrap_or(0.0) < 0.5 {
                    continue;
                }
                decisive += 1;
                let got = top[prompt.len() - 1 + j][0].0;
                if got != want {
                    mismatches.push(format!("{kind} {n} step {j}: {got} instead of {want}"));
                }
            }
        }
    }
    eprintln!(
        "{} kernels: {decisive} decisive positions, {} top-1 mismatches",
        engine.info().kernels,
        mismatches.len()
    );
    assert!(decisive > 0);
    assert!(mismatches.is_empty(), "{mismatches:?}");
}
