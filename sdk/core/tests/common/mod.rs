//! Shared by the integration tests: where the models and the reference data are.
#![allow(dead_code)]

use std::path::PathBuf;

pub const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const QWEN2: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
pub const GEMMA3: &str = "gemma-3-270m-q4_k_m.gguf";

pub fn model_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("TERN_MODEL_DIR") {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache/tern/models")
}

/// Path of a model file; the test command fetches the models first (`cargo xtask models --all`).
pub fn model_path(file: &str) -> PathBuf {
    let p = model_dir().join(file);
    assert!(p.exists(), "{} is missing: run `cargo xtask models --all` first", p.display());
    p
}

/// The reference file (llama.cpp's outputs) of a model file.
pub fn golden(file: &str) -> serde_json::Value {
    let name = match file {
        SMOLLM2 => "smollm2-135m-instruct-q4_1",
        QWEN2 => "qwen2.5-coder-0.5b-instruct-q4_k_m",
        GEMMA3 => "gemma-3-270m-q4_k_m",
        other => panic!("no reference data for {other}"),
    };
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("golden JSON parses")
}

pub fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().expect("array of ids").iter().map(|x| x.as_u64().expect("id") as u32).collect()
}

/// How many reference cases of each kind the per-kernel-set checks use: all of them, or the first
/// `TERN_GOLDEN_CASES` (the aarch64 run under qemu, where every instruction is emulated and each
/// kernel set is checked in turn, takes a few).
pub fn golden_cases() -> usize {
    std::env::var("TERN_GOLDEN_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(usize::MAX)
}

/// Engine options of the per-kernel-set checks: the default, or `TERN_TEST_THREADS` compute threads (the
/// qemu run uses one: its emulated workers would spin waiting for each other).
pub fn test_engine_options() -> tern::EngineOptions {
    let threads = std::env::var("TERN_TEST_THREADS").ok().and_then(|v| v.parse().ok());
    tern::EngineOptions { threads, ..Default::default() }
}
