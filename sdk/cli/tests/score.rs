//! `tern score --json` on tiny models of every architecture (sdk/core/tests/archs): the logits
//! it prints are llama.cpp's, within the bounds sdk/core/tests/archs.rs justifies.

use std::path::PathBuf;
use std::process::Command;

/// (file, largest |Δlogit| allowed): an F16 and a Q4_K_M file of each architecture.
const FILES: &[(&str, f32)] = &[
    ("llama-ropefreqs-f16", 0.035),
    ("llama-ropefreqs-q4_k_m", 0.5),
    ("qwen3-f16", 0.035),
    ("qwen3-q4_k_m", 0.5),
    ("smollm3-f16", 0.035),
    ("smollm3-q4_k_m", 0.5),
    ("phi3-f16", 0.035),
    ("phi3-q4_k_m", 0.5),
    ("granite-f16", 0.035),
    ("granite-q4_k_m", 0.5),
];

fn archs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../core/tests/archs")
}

#[test]
fn score_prints_llama_cpp_logits() {
    for &(name, bound) in FILES {
        let text = std::fs::read_to_string(archs().join(format!("refs/{name}.json"))).expect("reference");
        let reference: serde_json::Value = serde_json::from_str(&text).expect("reference parses");
        let ids = reference["tokens"].to_string();
        let model = archs().join(format!("models/{name}.gguf"));
        let out = Command::new(env!("CARGO_BIN_EXE_tern"))
            .args(["score", "--ids", &ids, "--top", "1024", "--json", "--model"])
            .arg(&model)
            .output()
            .expect("tern runs");
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let rows: Vec<Vec<(u32, f32)>> = serde_json::from_slice(&out.stdout).expect("JSON rows");
        let want = reference["logits"].as_array().expect("logits");
        assert_eq!(rows.len(), want.len(), "{name}: one row per position");
        let mut max = 0f32;
        for (row, want) in rows.iter().zip(want) {
            let want = want.as_array().expect("row");
            // The vocabulary (512) is under the 1024 asked for: every logit is printed.
            assert_eq!(row.len(), want.len(), "{name}: the whole vocabulary");
            for &(id, logit) in row {
                let w = want[id as usize].as_f64().expect("logit") as f32;
                max = max.max((logit - w).abs());
            }
        }
        eprintln!("{name}: max |Δ| {max:.4}");
        assert!(max <= bound, "{name}: max |Δ| {max} over {bound}");
    }
}
