//! The transformer: [`Model::load`] finds the file's architecture in `arch` (one file each,
//! building its layers from the shared `blocks`), and [`Model::forward`] runs the token
//! embedding, the architecture's layers in order, and the LM head.

mod arch;
mod attention;
mod blocks;
mod hparams;
mod kv;
mod ops;
mod scratch;
mod state;
mod weights;

pub use arch::names as architecture_names;
pub use hparams::Config;
pub use kv::{KvCache, KvPrecision, KvShape};
pub use scratch::Scratch;
pub use state::{ConvShape, DeltaRule, LayerCache};
pub use weights::Matrix;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::quant::packed::{Arena, Packer, Packing, ALIGN};
use crate::quant::{self, Kernels};
use crate::runtime::ThreadPool;
use blocks::norm::RmsNorm;
use blocks::rope::Rope;
use blocks::{Exec, Layer, LogitMap, Pass};
use hparams::Hparams;
use ops::SharedMut;

/// Which rows of logits a forward pass computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    None,
    Last,
    All,
    /// Every token's row after the output norm (the LM head's input), kept for
    /// [`Model::score_hidden`], and the last token's logits if `last`: a few chosen tokens
    /// scored at every position for a fraction of the whole vocabulary's cost.
    Hidden {
        last: bool,
    },
}

pub struct Model {
    pub config: Config,
    file: Arc<GgufFile>,
    kernels: &'static Kernels,
    token_embd: Matrix,
    /// Multiplies the embedding rows.
    embedding_scale: f32,
    layers: Vec<Box<dyn Layer>>,
    /// Runs before the layers (see `arch::Arch::prelude`).
    prelude: Option<Box<dyn Layer>>,
    /// The rotary embeddings the layers use.
    ropes: Vec<Rope>,
    output_norm: RmsNorm,
    output: Matrix,
    logit_map: LogitMap,
    packed: PackStats,
    /// Weight bytes a decode step reads (see [`Model::decode_weight_bytes`]).
    decode_bytes: usize,
    kv_precision: KvPrecision,
    /// Whether only row lookups read the embedding table from the file (the output projection
    /// reads other bytes, or a repacked copy), so they copy rows out with positioned reads and
    /// the table's pages stay out of resident memory.
    read_embedding_rows: bool,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("arch", &self.config.arch).field("layers", &self.layers.len()).finish()
    }
}

/// How [`Model::load_with`] prepares the weights.
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    /// Repack weight matrices into the kernel set's tiled layout, where it has one (see
    /// `quant::packed`): faster products for a copy of the weights made at load. The mapped
    /// pages of repacked matrices are then dropped from memory, so resident memory stays
    /// about the file's size.
    pub repack: bool,
    /// How KV caches made by [`Model::new_kv_cache`] store keys and values.
    pub kv_precision: KvPrecision,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { repack: true, kv_precision: KvPrecision::F16 }
    }
}

/// Repacking done at load.
#[derive(Debug, Clone, Copy, Default)]
pub struct PackStats {
    pub matrices: usize,
    /// Bytes of the tiled copies.
    pub bytes: usize,
    pub ms: f64,
}

impl Model {
    /// Loads with the default [`LoadOptions`], packing on the calling thread.
    pub fn load(file: Arc<GgufFile>, kernels: &'static Kernels) -> Result<Model> {
        Self::load_with(file, kernels, LoadOptions::default(), None)
    }

    /// Loads the weights of `file`; repacking (if asked for and available) runs on `pool`.
    pub fn load_with(
        file: Arc<GgufFile>,
        kernels: &'static Kernels,
        opts: LoadOptions,
        pool: Option<&ThreadPool>,
    ) -> Result<Model> {
        let f = &*file;
        let (arch_name, load_arch) = arch::find(f.architecture()?)?;
        let h = Hparams::read(f, arch_name)?;
        let c = h.config.clone();
        let token_embd = Matrix::load(f, "token_embd.weight", c.n_embd, c.vocab_size)?;
        let output = match f.tensor("output.weight") {
            Some(t) => Matrix::from_info(f, t, c.n_embd, c.vocab_size)?,
            None => token_embd.clone(), // tied embeddings
        };
        let arch = load_arch(&h)?;
        if opts.kv_precision == KvPrecision::Int8Fp8 {
            let kv_shapes = arch.layers.iter().filter_map(|l| match l.cache() {
                LayerCache::Kv(s) => Some(s),
                _ => None,
            });
            if let Some(s) = kv_shapes.into_iter().find(|s| s.head_dim % quant::KEY_GROUP != 0) {
                return Err(Error::InvalidOption(format!(
                    "an int8 KV cache needs head sizes that are multiples of {}; this model's is {}",
                    quant::KEY_GROUP,
                    s.head_dim
                )));
            }
        }
        let mut model = Model {
            config: c,
            file,
            kernels,
            token_embd,
            embedding_scale: arch.embedding_scale,
            layers: arch.layers,
            prelude: arch.prelude,
            ropes: arch.ropes,
            output_norm: arch.output_norm,
            output,
            logit_map: arch.logits,
            packed: PackStats::default(),
            decode_bytes: 0,
            kv_precision: opts.kv_precision,
            read_embedding_rows: false,
        };
        if let (true, Some(p)) = (opts.repack, kernels.packing()) {
            model.repack(p, pool);
        }
        let bytes = |m: &Matrix| m.packed().map_or(m.bytes(), |p| p.bytes());
        let layers: usize =
            model.layers.iter_mut().chain(model.prelude.as_mut()).flat_map(|l| l.matrices()).map(|m| bytes(m)).sum();
        model.decode_bytes = layers + bytes(&model.output);
        model.read_embedding_rows =
            model.output.packed().is_some() || model.output.file_range() != model.token_embd.file_range();
        Ok(model)
    }

    /// Packs every weight matrix the kernel set can pack, as one parallel job over all their
    /// runs of tiles (small matrices would leave threads idle one job at a time), releasing
    /// mapped pages as their rows are packed (peak memory: the copies plus the rows in flight).
    fn repack(&mut self, p: &Packing, pool: Option<&ThreadPool>) {
        let start = std::time::Instant::now();
        let file = Arc::clone(&self.file);
        let bytes = file.bytes();
        let mut matrices: Vec<&mut Matrix> = self
            .prelude
            .iter_mut()
            .chain(self.layers.iter_mut())
            .flat_map(|l| l.matrices())
            .chain(std::iter::once(&mut self.output))
            .collect();
        // One buffer for every copy, in the order decode reads them (each padded as the arena
        // aligns it); without one (no memory for it at once) each matrix gets its own.
        let total = matrices.iter().filter_map(|m| m.packed_size(p)).map(|n| n.next_multiple_of(ALIGN)).sum();
        let arena = Arena::new(total);
        let packers: Vec<(usize, Packer)> =
            matrices.iter().enumerate().filter_map(|(i, m)| Some((i, m.packer(bytes, p, arena.as_ref())?))).collect();
        // (packer, run) of every run, matrix by matrix.
        let runs: Vec<(usize, usize)> =
            packers.iter().enumerate().flat_map(|(k, (_, packer))| (0..packer.runs()).map(move |r| (k, r))).collect();
        // Mapped pages go back as soon as they are packed, so that the copies and the file never
        // both hold much: a large matrix's a run at a time, every matrix's all at once after its
        // last run (every release is a system call that interrupts the other cores).
        const RELEASE_IN_RUNS: usize = 4 << 20;
        let runs_left: Vec<AtomicUsize> = packers.iter().map(|(_, k)| AtomicUsize::new(k.runs())).collect();
        let base = bytes.as_ptr() as usize;
        let build = |i: usize| {
            let (k, run) = runs[i];
            let (m, packer) = &packers[k];
            // SAFETY: every (packer, run) pair appears once in `runs`.
            unsafe { packer.build_run(run) };
            let m = &matrices[*m];
            if m.bytes() >= RELEASE_IN_RUNS {
                // From the previous run's rows on: releases go by whole 64 KiB units, and the
                // unit across the two runs' boundary is free only once both are packed (the
                // previous run is almost always done: a thread packs its runs in order).
                let (from, to) = (packer.source(run.saturating_sub(1)), packer.source(run));
                let start = from.as_ptr() as usize - base;
                file.release(start, to.as_ptr() as usize + to.len() - base - start);
            }
            // The last run also gives back the pages at the runs' edges.
            if runs_left[k].fetch_sub(1, Ordering::AcqRel) == 1 {
                let (start, len) = m.file_range();
                file.release(start, len);
            }
        };
        match pool {
            Some(pool) => pool.parallel_for(runs.len(), &build),
            None => (0..runs.len()).for_each(build),
        }
        let mut stats = PackStats::default();
        for (i, packer) in packers {
            let m = &mut matrices[i];
            m.set_packed(packer.finish());
            stats.matrices += 1;
            stats.bytes += m.packed().map_or(0, |p| p.bytes());
        }
        stats.ms = start.elapsed().as_secs_f64() * 1e3;
        self.packed = stats;
    }

    /// Weight bytes one decode step reads: every layer matrix and the output matrix, as stored
    /// for the products (repacked or in the file). What decode speed is bounded by, with
    /// the memory bandwidth, once the weights do not fit in the caches.
    pub fn decode_weight_bytes(&self) -> usize {
        self.decode_bytes
    }

    /// What repacking did at load (zeros when it did not run).
    pub fn pack_stats(&self) -> PackStats {
        self.packed
    }

    pub fn file(&self) -> &GgufFile {
        &self.file
    }

    pub fn kernels(&self) -> &'static Kernels {
        self.kernels
    }

    /// Parameters in the weight matrices and vectors.
    pub fn n_params(&self) -> u64 {
        self.file.tensors().iter().map(|t| t.n_elements()).sum()
    }

    /// A cache for a session of `capacity` positions (its context length: some architectures
    /// rotate positions differently past their original context, by the capacity).
    pub fn new_kv_cache(&self, capacity: usize) -> KvCache {
        let kinds: Vec<LayerCache> = self.layers.iter().map(|l| l.cache()).collect();
        KvCache::with_layers(&kinds, capacity, self.kv_precision)
    }

    /// Runs `tokens` at positions `kv.len()..` and appends their keys and values to `kv`.
    /// Logits land in `scratch.logits` (rows of vocab size: the last token's, or every token's).
    pub fn forward(
        &self,
        pool: &ThreadPool,
        kv: &mut KvCache,
        scratch: &mut Scratch,
        tokens: &[u32],
        want: Logits,
    ) -> Result<()> {
        self.run(pool, kv, scratch, tokens, None, want, None)
    }

    /// [`Model::forward`] that stops between layers once `stop` is set: [`Error::Cancelled`],
    /// and the cache keeps the length it had (what the stopped pass wrote past it is
    /// overwritten by the next). A pass that is not stopped computes exactly what `forward`
    /// does.
    pub(crate) fn forward_unless(
        &self,
        pool: &ThreadPool,
        kv: &mut KvCache,
        scratch: &mut Scratch,
        tokens: &[u32],
        want: Logits,
        stop: &AtomicBool,
    ) -> Result<()> {
        self.run(pool, kv, scratch, tokens, None, want, Some(stop))
    }

    /// Runs a tree of tokens after the cached sequence in one pass (speculative verification).
    /// `parents[i]` is the index in `tokens` of token i's parent, or `None` for a token that
    /// directly follows the cache; parents come before their children. Token i is stored in
    /// the KV cache at slot `kv.len() + i` but sits at position `kv.len() + depth(i)` and
    /// attends to the cache and its own ancestors only, so its logits are those that feeding
    /// its path one token at a time would give (bit for bit: see the batch-invariance
    /// invariant in docs/ARCHITECTURE.md). Afterwards keep one path with
    /// [`KvCache::keep_slots`].
    pub fn forward_tree(
        &self,
        pool: &ThreadPool,
        kv: &mut KvCache,
        scratch: &mut Scratch,
        tokens: &[u32],
        parents: &[Option<usize>],
        want: Logits,
    ) -> Result<()> {
        if parents.len() != tokens.len() {
            return Err(Error::InvalidOption(format!(
                "token tree has {} tokens but {} parent links",
                tokens.len(),
                parents.len()
            )));
        }
        if let Some(i) = parents.iter().enumerate().position(|(i, p)| p.is_some_and(|p| p >= i)) {
            return Err(Error::InvalidOption(format!("token tree: the parent of token {i} does not come before it")));
        }
        self.run(pool, kv, scratch, tokens, Some(parents), want, None)
    }

    fn run(
        &self,
        pool: &ThreadPool,
        kv: &mut KvCache,
        scratch: &mut Scratch,
        tokens: &[u32],
        tree: Option<&[Option<usize>]>,
        want: Logits,
        stop: Option<&AtomicBool>,
    ) -> Result<()> {
        let stopped = || stop.is_some_and(|s| s.load(Ordering::Acquire));
        let c = &self.config;
        let n = tokens.len();
        kv.begin_pass();
        let pos0 = kv.len();
        if n == 0 {
            return Ok(());
        }
        if pos0 + n > kv.capacity() {
            return Err(Error::ContextOverflow { needed: pos0 + n, limit: kv.capacity() });
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= c.vocab_size) {
            return Err(Error::InvalidOption(format!("token id {bad} is outside the vocabulary ({})", c.vocab_size)));
        }
        let k = self.kernels;
        let file = self.file.bytes();
        let d = c.n_embd;
        let s = scratch;
        for v in [&mut s.x, &mut s.xb, &mut s.proj] {
            scratch::grow(v, n * d);
        }
        s.layout.build(pos0, n, tree);

        // x[n, d] = embedding rows, read one by one from the file (never the whole table).
        let Some(dequant) = k.dequantize(self.token_embd.ty) else {
            return Err(Error::UnsupportedTensorType {
                tensor: self.token_embd.name.clone(),
                ty: self.token_embd.ty.name().into(),
            });
        };
        s.embd_row.resize(self.token_embd.row_bytes(), 0);
        for (t, &tok) in tokens.iter().enumerate() {
            let bytes = if self.read_embedding_rows {
                self.token_embd.read_row(&self.file, tok as usize, &mut s.embd_row);
                &s.embd_row[..]
            } else {
                self.token_embd.row(file, tok as usize)
            };
            let row = &mut s.x[t * d..(t + 1) * d];
            dequant(bytes, row);
            if self.embedding_scale != 1.0 {
                row.iter_mut().for_each(|v| *v *= self.embedding_scale);
            }
        }

        // The layers, each reading and updating the residual stream `x`; rotation angles are
        // computed once per pass, when a layer first needs them.
        s.rope.invalidate();
        let exec = Exec { pool, kernels: k, file };
        let mut p = Pass { exec, kv: &mut *kv, ropes: &self.ropes, s: &mut *s, n, d, pos0, tokens };
        for layer in self.prelude.iter().chain(&self.layers) {
            if stopped() {
                p.kv.abandon_pass(pos0);
                return Err(Error::Cancelled);
            }
            layer.forward(&mut p);
        }
        if stopped() {
            kv.abandon_pass(pos0);
            return Err(Error::Cancelled);
        }
        kv.set_len(pos0 + n);
        if let Some(parents) = tree {
            kv.begin_tree(pos0, parents);
        }

        s.hidden_rows = 0;
        let (first, rows) = match want {
            Logits::None => return Ok(()),
            Logits::Last => (n - 1, 1),
            Logits::All => (0, n),
            Logits::Hidden { last } => {
                self.output_norm.apply(&s.x[..n * d], &mut s.xb[..n * d]);
                (s.hidden_rows, s.hidden_dim) = (n, d);
                if last {
                    // The same norm and product of the last row as `Logits::Last` (rows are
                    // normalised independently), so its logits do not change.
                    s.logits.resize(c.vocab_size, 0.0);
                    exec.project(&mut s.qin, &self.output, 1, &s.xb[(n - 1) * d..n * d], &mut s.logits);
                    self.logit_map.apply(&mut s.logits);
                    s.logits_rows = 1;
                }
                return Ok(());
            }
        };
        self.output_norm.apply(&s.x[first * d..(first + rows) * d], &mut s.xb[..rows * d]);
        s.logits.resize(rows * c.vocab_size, 0.0);
        exec.project(&mut s.qin, &self.output, rows, &s.xb, &mut s.logits);
        self.logit_map.apply(&mut s.logits);
        s.logits_rows = rows;
        Ok(())
    }

    /// The output projection's rows (the LM head's) of `tokens`, as f32, one after another,
    /// read from the file; ids outside the vocabulary get rows of zeros.
    pub fn output_rows(&self, tokens: &[u32], out: &mut Vec<f32>) -> Result<()> {
        let d = self.config.n_embd;
        let w = &self.output;
        let dequant = self
            .kernels
            .dequantize(w.ty)
            .ok_or_else(|| Error::UnsupportedTensorType { tensor: w.name.clone(), ty: w.ty.name().into() })?;
        let mut bytes = vec![0u8; w.row_bytes()];
        out.clear();
        out.resize(tokens.len() * d, 0.0);
        for (&t, row) in tokens.iter().zip(out.chunks_exact_mut(d)) {
            if (t as usize) < self.config.vocab_size {
                w.read_row(&self.file, t as usize, &mut bytes);
                dequant(&bytes, row);
            }
        }
        Ok(())
    }

    /// `out[t * k + j]` = the logit of token j after row t of the last [`Logits::Hidden`] pass,
    /// where `rows` holds the k tokens' output rows ([`Model::output_rows`]). Rows of the pass
    /// are shared among the pool's threads. Computed in f32 from f32 rows: close to, not equal
    /// to, the quantized LM head's logits.
    pub fn score_hidden(&self, pool: &ThreadPool, scratch: &Scratch, rows: &[f32], out: &mut Vec<f32>) {
        let d = self.config.n_embd;
        let k = rows.len() / d;
        let n = if scratch.hidden_dim == d { scratch.hidden_rows } else { 0 };
        out.clear();
        out.resize(n * k, 0.0);
        let Some(mat_vec) = self.kernels.mat_vec(quant::GgmlType::F32) else { return };
        if k == 0 || n == 0 {
            return;
        }
        let w = quant::blocks::as_bytes(&rows[..k * d]);
        let (dst, logit_map) = (SharedMut::new(out.as_mut_ptr()), self.logit_map);
        pool.parallel_for(n, &|t| {
            let h = quant::blocks::as_bytes(&scratch.xb[t * d..(t + 1) * d]);
            // SAFETY: task t alone writes row t of `out` (n rows of k).
            let o = unsafe { std::slice::from_raw_parts_mut(dst.get().add(t * k), k) };
            mat_vec(d, w, h, o);
            logit_map.apply(o);
        });
    }
}

/// Kernels in use unless the engine is told otherwise.
pub fn default_kernels() -> &'static Kernels {
    quant::kernels()
}
