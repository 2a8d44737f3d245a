//! Options shared by several commands, and model loading.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use tern::{Engine, EngineOptions, SamplingOptions};

use crate::error::{CliError, Result};

/// The model `cargo xtask models` fetches by default.
const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// GGUF model file [default: $TERN_MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf,
    /// $TERN_MODEL_DIR defaulting to ~/.cache/tern/models]
    #[arg(long, short = 'm', value_name = "PATH")]
    pub model: Option<PathBuf>,
}

impl ModelArgs {
    /// The given path, or the default model in the cache (which must then exist).
    pub fn path(&self) -> Result<PathBuf> {
        if let Some(p) = &self.model {
            return Ok(p.clone());
        }
        let dir = model_dir()?;
        let path = dir.join(DEFAULT_MODEL_FILE);
        if !path.is_file() {
            return Err(CliError::Other(format!(
                "the default model {} is missing: run `cargo xtask models` to fetch it, or pass --model PATH",
                path.display()
            )));
        }
        Ok(path)
    }
}

/// Where models are kept: $TERN_MODEL_DIR, else ~/.cache/tern/models (`cargo xtask models`
/// and `tern pull` put them there).
pub fn model_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("TERN_MODEL_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".cache/tern/models")),
        None => Err(CliError::Usage("no --model given and neither TERN_MODEL_DIR nor HOME is set".into())),
    }
}

#[derive(Args, Debug, Clone, Default)]
pub struct RuntimeArgs {
    /// Worker threads [default: chosen by the engine]
    #[arg(long, short = 't', value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub threads: Option<u64>,
    /// Context length in tokens [default: the model's, at most 4096]
    #[arg(long, short = 'c', visible_alias = "ctx-size", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub ctx: Option<u64>,
}

impl RuntimeArgs {
    pub fn threads(&self) -> Option<usize> {
        self.threads.map(|n| n as usize)
    }
    pub fn ctx(&self) -> Option<usize> {
        self.ctx.map(|n| n as usize)
    }
}

/// Sampling flags over the model's recommended sampling (`tern info` shows it); `--greedy`
/// always takes the most likely token.
#[derive(Args, Debug, Clone, Default)]
pub struct SamplingArgs {
    /// Always the most likely token (reproducible answers, benchmarks)
    #[arg(long, conflicts_with_all = ["temperature", "top_k", "top_p", "min_p"])]
    pub greedy: bool,
    /// Sampling temperature; 0 is greedy
    #[arg(long, visible_alias = "temp", value_name = "T")]
    pub temperature: Option<f32>,
    /// Keep only the K most likely tokens (0 = off)
    #[arg(long, value_name = "K")]
    pub top_k: Option<usize>,
    /// Nucleus sampling: keep the smallest set with this total probability
    #[arg(long, value_name = "P")]
    pub top_p: Option<f32>,
    /// Drop tokens below this fraction of the top token's probability
    #[arg(long, value_name = "P")]
    pub min_p: Option<f32>,
    /// Penalty for tokens seen in the last --repeat-last-n tokens (1 = off)
    #[arg(long, value_name = "X")]
    pub repeat_penalty: Option<f32>,
    /// How many recent tokens the repeat penalty looks at
    #[arg(long, value_name = "N")]
    pub repeat_last_n: Option<usize>,
    /// Random seed, for reproducible sampling
    #[arg(long, short = 's', value_name = "S")]
    pub seed: Option<u64>,
}

impl SamplingArgs {
    /// The options these flags give over the model's recommendation.
    pub fn options(&self, recommended: &SamplingOptions) -> SamplingOptions {
        let mut s = if self.greedy { SamplingOptions::greedy() } else { recommended.clone() };
        let set = |dst: &mut f32, v: Option<f32>| v.into_iter().for_each(|v| *dst = v);
        set(&mut s.temperature, self.temperature);
        set(&mut s.top_p, self.top_p);
        set(&mut s.min_p, self.min_p);
        set(&mut s.repetition_penalty, self.repeat_penalty);
        s.top_k = self.top_k.unwrap_or(s.top_k);
        s.repeat_last_n = self.repeat_last_n.unwrap_or(s.repeat_last_n);
        s.seed = self.seed.or(s.seed);
        s
    }
}

pub struct Loaded {
    pub engine: Arc<Engine>,
    pub path: PathBuf,
    pub load_time: Duration,
}

pub fn load(model: &ModelArgs, threads: Option<usize>, context_length: Option<usize>) -> Result<Loaded> {
    load_with(model, EngineOptions { threads, context_length, ..Default::default() })
}

/// As [`load`], with every engine option given.
pub fn load_with(model: &ModelArgs, opts: EngineOptions) -> Result<Loaded> {
    let path = model.path()?;
    let start = Instant::now();
    // A spinner on a terminal (indicatif draws nothing when stderr is not one).
    let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    let spinner = indicatif::ProgressBar::new_spinner().with_message(format!("loading {name}"));
    spinner.enable_steady_tick(Duration::from_millis(100));
    let engine = Engine::load(&path, opts);
    spinner.finish_and_clear();
    Ok(Loaded { engine: engine?, path, load_time: start.elapsed() })
}
