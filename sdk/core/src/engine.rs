//! The engine: a model loaded once (weights mapped, tokenizer and chat template built) and
//! shared by any number of sessions through an `Arc`.
//!
//! Concurrency: sessions on one engine may generate at the same time from different threads.
//! Each has its own KV cache; their forward passes share the engine's thread pool, which runs
//! one matrix product at a time, so concurrent sessions interleave and each runs slower.

pub(crate) mod tuning;

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use crate::chat::ChatTemplate;
use crate::constrain::{self, CompiledGrammar, Grammar, Vocabulary};
use crate::energy::control::EnergyControl;
use crate::energy::{DeviceState, EnergyMode, EnergyOptions, EnergyStatus, Tuning};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::model::{KvPrecision, LoadOptions, Logits, Model};
use crate::quant::{self, Kernels};
use crate::runtime::{self, ThreadPool};
use crate::sampling::SamplingOptions;
use crate::speculative::cost::CostModel;
use crate::speculative::features::AcceptanceModel;
use crate::tokenizer::Tokenizer;

/// Context length used when neither the app nor the model asks for less: the KV cache is
/// allocated for it up front.
pub(crate) const DEFAULT_CONTEXT_CAP: usize = 4096;

#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// Compute threads (default: one per available core, at most 8).
    pub threads: Option<usize>,
    /// Default context length of sessions (default: the model's, capped at 4096).
    pub context_length: Option<usize>,
    /// Force a kernel set by name (`reference`, `avx2`, `avx512`, ...); default: the best this
    /// CPU supports.
    pub kernels: Option<String>,
    /// Repack weights at load into the kernel set's tiled layout (default: on where the set has
    /// one). Faster matrix products for a copy of the weights made at load; the mapped pages of
    /// repacked weights are released, so memory stays about the file's size.
    pub repack_weights: Option<bool>,
    /// How session KV caches store keys and values: f16 (default), or int8 keys and fp8
    /// values (half the memory and long-context bandwidth, slightly different logits).
    pub kv_precision: KvPrecision,
    /// Energy mode, where tuning results are kept, and the device name they are keyed by.
    pub energy: EnergyOptions,
}

/// Names of the kernel sets this CPU runs, best last: the values `EngineOptions::kernels` takes.
pub fn kernel_sets() -> Vec<&'static str> {
    crate::quant::available_kernels().iter().map(|k| k.isa).collect()
}

#[derive(Debug, Clone)]
pub struct ModelInfo {
    pub architecture: String,
    pub name: String,
    pub n_params: u64,
    /// Context length sessions get by default.
    pub context_length: usize,
    /// Context length the model was trained for.
    pub train_context_length: usize,
    pub vocab_size: usize,
    pub file_size: u64,
    /// Name of the kernel set in use.
    pub kernels: &'static str,
    pub threads: usize,
    /// Milliseconds `Engine::load` took.
    pub load_ms: f64,
    /// Bytes of the weight copies repacked at load for the kernel set (0 when none were).
    pub repacked_bytes: u64,
    /// Milliseconds of `load_ms` spent repacking.
    pub repack_ms: f64,
    /// Bytes of weights one decode step reads: what bounds decode speed on memory bandwidth.
    pub decode_weight_bytes: u64,
    /// How the model's makers recommend sampling it (`general.sampling.*` in the file), or
    /// [`SamplingOptions::general_purpose`]: what sessions given no sampling options use.
    pub sampling: SamplingOptions,
}

pub struct Engine {
    model: Model,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    pool: ThreadPool,
    energy: EnergyControl,
    info: ModelInfo,
    /// Measured cost of decode passes by batch size (speculative decoding plans with it).
    verify_costs: CostModel,
    /// What speculative decoding's acceptance model has learned about this model: a session
    /// starts from it and leaves here what it learns from each verified draft.
    acceptance: Mutex<AcceptanceModel>,
    /// The vocabulary indexed for grammars, built at the first constrained request.
    grammar_vocab: OnceLock<std::result::Result<Arc<Vocabulary>, String>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("info", &self.info).finish()
    }
}

impl Engine {
    /// Maps the model file and prepares it: weights stay in the file, nothing is copied.
    pub fn load(path: impl AsRef<Path>, opts: EngineOptions) -> Result<Arc<Engine>> {
        let start = Instant::now();
        let file = GgufFile::open(path.as_ref())?;
        Self::from_gguf(file, opts, start)
    }

    /// Prepares an already parsed file (e.g. one held in memory).
    pub fn from_file(file: GgufFile, opts: EngineOptions) -> Result<Arc<Engine>> {
        Self::from_gguf(file, opts, Instant::now())
    }

    fn from_gguf(file: GgufFile, opts: EngineOptions, start: Instant) -> Result<Arc<Engine>> {
        let file = Arc::new(file);
        opts.energy.mode.validate()?;
        let kernels = select_kernels(opts.kernels.as_deref())?;
        let threads = opts.threads.unwrap_or_else(runtime::default_threads).max(1);
        let pool = ThreadPool::new(threads);
        let load = LoadOptions { repack: opts.repack_weights.unwrap_or(true), kv_precision: opts.kv_precision };
        // The tokenizer is built on a thread of its own while the model loads (its vocabulary
        // parse is serial work that would otherwise add to the time until ready).
        let (model, tokenizer) = std::thread::scope(|scope| {
            let tokenizer = scope.spawn(|| Tokenizer::from_gguf(&file));
            let model = Model::load_with(Arc::clone(&file), kernels, load, Some(&pool));
            let tokenizer = tokenizer.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            (model, tokenizer)
        });
        let (model, tokenizer) = (model?, tokenizer?);
        if tokenizer.vocab_size() != model.config.vocab_size {
            return Err(Error::Corrupt(format!(
                "vocabulary has {} tokens but the model expects {}",
                tokenizer.vocab_size(),
                model.config.vocab_size
            )));
        }
        let template = ChatTemplate::from_gguf(&file)?;
        let train_ctx = model.config.context_length.max(1);
        let context_length = match opts.context_length {
            Some(0) => return Err(Error::InvalidOption("context_length must be positive".into())),
            Some(n) => n.min(train_ctx),
            None => train_ctx.min(DEFAULT_CONTEXT_CAP),
        };
        let info = ModelInfo {
            architecture: model.config.arch.to_owned(),
            name: file.get_str("general.name").unwrap_or("").to_owned(),
            n_params: model.n_params(),
            context_length,
            train_context_length: train_ctx,
            vocab_size: model.config.vocab_size,
            file_size: file.bytes().len() as u64,
            kernels: kernels.isa,
            threads,
            load_ms: 0.0,
            repacked_bytes: model.pack_stats().bytes as u64,
            repack_ms: model.pack_stats().ms,
            decode_weight_bytes: model.decode_weight_bytes() as u64,
            sampling: SamplingOptions::recommended_by(&file),
        };
        let energy = EnergyControl::new(opts.energy);
        let mut engine = Engine {
            model,
            tokenizer,
            template,
            pool,
            energy,
            info,
            verify_costs: CostModel::default(),
            acceptance: Mutex::default(),
            grammar_vocab: OnceLock::new(),
        };
        engine.info.load_ms = start.elapsed().as_secs_f64() * 1e3;
        let i = &engine.info;
        log::info!(
            "model loaded: {} `{}`, {} parameters, context {}, {} kernels, {} threads, {:.0} ms",
            i.architecture,
            i.name,
            i.n_params,
            i.context_length,
            i.kernels,
            i.threads,
            i.load_ms
        );
        Ok(Arc::new(engine))
    }

    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn chat_template(&self) -> &ChatTemplate {
        &self.template
    }

    crate::lab_pub! {
        fn model(&self) -> &Model {
            &self.model
        }
    }

    crate::lab_pub! {
        /// The thread pool forward passes of this engine run on.
        fn pool(&self) -> &ThreadPool {
            &self.pool
        }
    }

    crate::lab_pub! {
        /// What decode passes of n tokens have cost on this engine (learned from its sessions).
        fn verify_costs(&self) -> &CostModel {
            &self.verify_costs
        }
    }

    /// The acceptance model's weights as learned on this engine so far (they start from
    /// fitted priors; see docs/speculative.md).
    pub fn acceptance_weights(&self) -> Vec<f32> {
        self.acceptance.lock().unwrap_or_else(|e| e.into_inner()).weights().to_vec()
    }

    pub(crate) fn acceptance_model(&self) -> AcceptanceModel {
        self.acceptance.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Keeps what a session's acceptance model learned, for the sessions opened after it.
    pub(crate) fn keep_acceptance_model(&self, learned: &AcceptanceModel) {
        *self.acceptance.lock().unwrap_or_else(|e| e.into_inner()) = learned.clone();
    }

    pub(crate) fn energy(&self) -> &EnergyControl {
        &self.energy
    }

    /// Mode, device state, meter and the selection each phase runs on.
    pub fn energy_status(&self) -> EnergyStatus {
        self.energy.status()
    }

    /// Applies from the next request on. A custom mode naming a CPU that is not online here is
    /// [`Error::InvalidOption`], and the mode in force stays.
    pub fn set_energy_mode(&self, mode: EnergyMode) -> Result<()> {
        mode.validate()?;
        self.energy.set_mode(mode);
        Ok(())
    }

    /// The app reports thermal throttling or a low battery (and their end): decode moves to the
    /// power-saver selection while either lasts.
    pub fn report_device_state(&self, state: DeviceState) {
        self.energy.report_device_state(state);
    }

    /// The tuning in use (stored or made by [`Engine::tune_energy`]).
    pub fn energy_tuning(&self) -> Option<Tuning> {
        self.energy.tuning()
    }

    /// Searches this device for its decode selections (a few seconds of decoding) and keeps the
    /// result, on disk too when `EnergyOptions::tuning_dir` is set. Run it once per device, from
    /// a background thread, while no session generates: sessions on this engine would share the
    /// cores with the probes and disturb them.
    pub fn tune_energy(&self) -> Result<Tuning> {
        let tuning = tuning::tune_engine(self)?;
        self.energy.set_tuning(tuning.clone())?;
        Ok(tuning)
    }

    /// The vocabulary as grammars see it; indexed once, at the first call.
    pub fn grammar_vocabulary(&self) -> Result<Arc<Vocabulary>> {
        self.grammar_vocab
            .get_or_init(|| {
                constrain::vocabulary(&self.tokenizer).map(Arc::new).map_err(|e| match e {
                    Error::Grammar(msg) => msg,
                    e => e.to_string(),
                })
            })
            .clone()
            .map_err(Error::Grammar)
    }

    /// Compiles `grammar` for this model: a typed error now for what cannot be used.
    pub fn compile_grammar(&self, grammar: &Grammar) -> Result<CompiledGrammar> {
        grammar.compile(&*self.grammar_vocabulary()?)
    }

    /// Tokens `text` takes as message content (no BOS, special-token text not parsed).
    pub fn count_tokens(&self, text: &str) -> Result<usize> {
        Ok(self.tokenizer.encode(text, false, false)?.len())
    }

    /// Teacher-forced scoring: for every position i, the `top_k` highest (id, logit) pairs of the
    /// distribution after `ids[..=i]`, highest first.
    pub fn score(&self, ids: &[u32], top_k: usize) -> Result<Vec<Vec<(u32, f32)>>> {
        if top_k == 0 {
            return Err(Error::InvalidOption("top_k must be at least 1".into()));
        }
        let mut out = Vec::with_capacity(ids.len());
        self.for_each_logits(ids, |_, row| out.push(top_k_of(row, top_k)))?;
        Ok(out)
    }

    /// Teacher-forced logits: calls `f(i, logits)` with the full next-token logits after
    /// `ids[..=i]`, for every position in order. They are those of a session of the engine's
    /// context length (or of `ids`, if longer): a few architectures rotate positions
    /// differently past their original context, by the session's length.
    pub fn for_each_logits(&self, ids: &[u32], mut f: impl FnMut(usize, &[f32])) -> Result<()> {
        const CHUNK: usize = 32;
        let limit = self.info.train_context_length;
        if ids.len() > limit {
            return Err(Error::ContextOverflow { needed: ids.len(), limit });
        }
        let mut kv = self.model.new_kv_cache(ids.len().max(self.info.context_length).max(1));
        let mut scratch = crate::model::Scratch::default();
        let mut pos = 0;
        for chunk in ids.chunks(CHUNK) {
            self.model.forward(&self.pool, &mut kv, &mut scratch, chunk, Logits::All)?;
            for row in scratch.logits() {
                f(pos, row);
                pos += 1;
            }
        }
        Ok(())
    }
}

/// The `k` largest (id, logit) pairs, highest first (ties: lower id first).
pub(crate) fn top_k_of(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut idx: Vec<u32> = (0..logits.len() as u32).collect();
    let k = k.min(idx.len());
    let cmp = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]).then(a.cmp(b));
    if k < idx.len() {
        idx.select_nth_unstable_by(k, cmp);
        idx.truncate(k);
    }
    idx.sort_by(cmp);
    idx.into_iter().map(|i| (i, logits[i as usize])).collect()
}

fn select_kernels(name: Option<&str>) -> Result<&'static Kernels> {
    match name {
        None => Ok(quant::kernels()),
        Some(n) => quant::available_kernels()
            .into_iter()
            .find(|k| k.isa == n)
            .ok_or_else(|| Error::InvalidOption(format!("kernel set `{n}` is not available on this CPU"))),
    }
}
