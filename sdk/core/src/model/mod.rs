//! The transformer: weights of the three supported architectures (llama, qwen2, gemma3) and
//! their forward pass. Architecture differences are data in [`Config`]; the pass below reads
//! top to bottom like the papers' block diagrams.

mod attention;
mod config;
mod kv;
mod ops;
mod weights;

pub use config::{Activation, Architecture, Config, Rope, RopeStyle};
pub use kv::{KvCache, KvPrecision};
pub use weights::Matrix;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::quant::packed::{Arena, Packer, Packing, ALIGN};
use crate::quant::{self, Kernels};
use crate::runtime::ThreadPool;
use attention::BatchLayout;
use ops::{Product, QuantizedInput, SharedMut};
use weights::{load_optional_vector, load_vector};

struct Layer {
    attn_norm: Vec<f32>,
    wq: Matrix,
    wk: Matrix,
    wv: Matrix,
    wo: Matrix,
    bq: Option<Vec<f32>>,
    bk: Option<Vec<f32>>,
    bv: Option<Vec<f32>>,
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    post_attn_norm: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    w_gate: Matrix,
    w_up: Matrix,
    w_down: Matrix,
    post_ffn_norm: Option<Vec<f32>>,
}

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
    output_norm: Vec<f32>,
    output: Matrix,
    layers: Vec<Layer>,
    /// Rotary frequencies (rope_dim / 2) of global and of sliding-window layers.
    inv_freq_global: Vec<f32>,
    inv_freq_local: Vec<f32>,
    packed: PackStats,
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
        let c = Config::from_gguf(&file)?;
        if opts.kv_precision == KvPrecision::Int8Fp8 && c.head_dim % quant::KEY_GROUP != 0 {
            return Err(Error::InvalidOption(format!(
                "an int8 KV cache needs head sizes that are multiples of {}; this model's is {}",
                quant::KEY_GROUP,
                c.head_dim
            )));
        }
        let f = &*file;
        let (d, qd, kvd, ff) = (c.n_embd, c.q_dim(), c.kv_dim(), c.n_ff);
        let token_embd = Matrix::load(f, "token_embd.weight", d, c.vocab_size)?;
        let output = match f.tensor("output.weight") {
            Some(t) => Matrix::from_info(f, t, d, c.vocab_size)?,
            None => token_embd.clone(), // tied embeddings
        };
        let output_norm = load_vector(f, "output_norm.weight", d)?;
        let mut layers = Vec::with_capacity(c.n_layer);
        for i in 0..c.n_layer {
            let n = |s: &str| format!("blk.{i}.{s}");
            let bias = |s: &str, len| -> Result<Option<Vec<f32>>> {
                if c.has_qkv_bias {
                    load_vector(f, &n(s), len).map(Some)
                } else {
                    load_optional_vector(f, &n(s), len)
                }
            };
            let norm = |s: &str, len| -> Result<Option<Vec<f32>>> {
                if c.has_qk_norm || c.has_post_norms {
                    load_vector(f, &n(s), len).map(Some)
                } else {
                    Ok(None)
                }
            };
            layers.push(Layer {
                attn_norm: load_vector(f, &n("attn_norm.weight"), d)?,
                wq: Matrix::load(f, &n("attn_q.weight"), d, qd)?,
                wk: Matrix::load(f, &n("attn_k.weight"), d, kvd)?,
                wv: Matrix::load(f, &n("attn_v.weight"), d, kvd)?,
                wo: Matrix::load(f, &n("attn_output.weight"), qd, d)?,
                bq: bias("attn_q.bias", qd)?,
                bk: bias("attn_k.bias", kvd)?,
                bv: bias("attn_v.bias", kvd)?,
                q_norm: if c.has_qk_norm { norm("attn_q_norm.weight", c.head_dim)? } else { None },
                k_norm: if c.has_qk_norm { norm("attn_k_norm.weight", c.head_dim)? } else { None },
                post_attn_norm: if c.has_post_norms { norm("post_attention_norm.weight", d)? } else { None },
                ffn_norm: load_vector(f, &n("ffn_norm.weight"), d)?,
                w_gate: Matrix::load(f, &n("ffn_gate.weight"), d, ff)?,
                w_up: Matrix::load(f, &n("ffn_up.weight"), d, ff)?,
                w_down: Matrix::load(f, &n("ffn_down.weight"), ff, d)?,
                post_ffn_norm: if c.has_post_norms { norm("post_ffw_norm.weight", d)? } else { None },
            });
        }
        let inv_freq = |rope: Rope| -> Vec<f32> {
            (0..c.rope_dim / 2).map(|i| rope.base.powf(-((2 * i) as f32) / c.rope_dim as f32)).collect()
        };
        let (inv_freq_global, inv_freq_local) = (inv_freq(c.rope_global), inv_freq(c.rope_local));
        let mut model = Model {
            config: c,
            file,
            kernels,
            token_embd,
            output_norm,
            output,
            layers,
            inv_freq_global,
            inv_freq_local,
            packed: PackStats::default(),
            kv_precision: opts.kv_precision,
            read_embedding_rows: false,
        };
        if let (true, Some(p)) = (opts.repack, kernels.packing()) {
            model.repack(p, pool);
        }
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
            .layers
            .iter_mut()
            .flat_map(|l| [&mut l.wq, &mut l.wk, &mut l.wv, &mut l.wo, &mut l.w_gate, &mut l.w_up, &mut l.w_down])
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
        let bytes = |m: &Matrix| m.packed().map_or(m.bytes(), |p| p.bytes());
        let layers: usize = self
            .layers
            .iter()
            .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down])
            .map(bytes)
            .sum();
        layers + bytes(&self.output)
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

    pub fn new_kv_cache(&self, capacity: usize) -> KvCache {
        let c = &self.config;
        KvCache::with_precision(c.n_layer, c.kv_dim(), c.head_dim, capacity, self.kv_precision)
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
        self.run(pool, kv, scratch, tokens, None, want)
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
        self.run(pool, kv, scratch, tokens, Some(parents), want)
    }

    fn run(
        &self,
        pool: &ThreadPool,
        kv: &mut KvCache,
        scratch: &mut Scratch,
        tokens: &[u32],
        tree: Option<&[Option<usize>]>,
        want: Logits,
    ) -> Result<()> {
        let c = &self.config;
        let n = tokens.len();
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
        let (d, qd, kvd, ff) = (c.n_embd, c.q_dim(), c.kv_dim(), c.n_ff);
        scratch.reserve(c, n);
        let s = scratch;
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
            if c.embedding_scale != 1.0 {
                row.iter_mut().for_each(|v| *v *= c.embedding_scale);
            }
        }

        // The rotation angles of the batch's positions, once for all layers (local layers may
        // have their own base).
        rope_angles(&s.layout.positions, c.rope_global.scale, &self.inv_freq_global, &mut s.rope[0]);
        if c.layer_is_local.iter().any(|&l| l) {
            rope_angles(&s.layout.positions, c.rope_local.scale, &self.inv_freq_local, &mut s.rope[1]);
        }

        for (il, layer) in self.layers.iter().enumerate() {
            // Attention block.
            ops::rms_norm(&s.x[..n * d], &layer.attn_norm, c.rms_eps, &mut s.xb[..n * d]);
            s.qin.invalidate();
            for w in [&layer.wq, &layer.wk, &layer.wv] {
                s.qin.prepare(pool, k, w, &s.xb[..n * d], n);
            }
            let mut qkv = [
                Product { w: &layer.wq, act: s.qin.for_matrix(k, &layer.wq), out: &mut s.q[..n * qd] },
                Product { w: &layer.wk, act: s.qin.for_matrix(k, &layer.wk), out: &mut s.k[..n * kvd] },
                Product { w: &layer.wv, act: s.qin.for_matrix(k, &layer.wv), out: &mut s.v[..n * kvd] },
            ];
            ops::matmul(pool, k, file, &mut qkv, n);
            if let Some(b) = &layer.bq {
                ops::add_bias(&mut s.q[..n * qd], b);
            }
            if let Some(b) = &layer.bk {
                ops::add_bias(&mut s.k[..n * kvd], b);
            }
            if let Some(b) = &layer.bv {
                ops::add_bias(&mut s.v[..n * kvd], b);
            }
            if let Some(w) = &layer.q_norm {
                ops::rms_norm_inplace(&mut s.q[..n * qd], w, c.rms_eps);
            }
            if let Some(w) = &layer.k_norm {
                ops::rms_norm_inplace(&mut s.k[..n * kvd], w, c.rms_eps);
            }
            let local = c.layer_is_local[il];
            let angles = &s.rope[usize::from(local)];
            self.apply_rope(&mut s.q[..n * qd], c.n_head, angles);
            self.apply_rope(&mut s.k[..n * kvd], c.n_head_kv, angles);
            kv.store(il, pos0, &s.k[..n * kvd], &s.v[..n * kvd]);
            let window = if local { c.sliding_window } else { None };
            let heads = attention::Heads {
                n_head: c.n_head,
                n_head_kv: c.n_head_kv,
                head_dim: c.head_dim,
                scale: c.attention_scale,
            };
            attention::attend(
                pool,
                k,
                kv,
                il,
                &mut s.q[..n * qd],
                &s.layout,
                window,
                heads,
                &mut s.attn[..n * qd],
                &mut s.attn_scratch,
            );
            self.project(pool, &mut s.qin, &layer.wo, n, &s.attn, &mut s.proj);
            if let Some(w) = &layer.post_attn_norm {
                ops::rms_norm_inplace(&mut s.proj[..n * d], w, c.rms_eps);
            }
            ops::add_inplace(&mut s.x[..n * d], &s.proj[..n * d]);

            // Feed-forward block: gate and up in one job, each task then applying the
            // activation to the rows it produced.
            ops::rms_norm(&s.x[..n * d], &layer.ffn_norm, c.rms_eps, &mut s.xb[..n * d]);
            s.qin.invalidate();
            s.qin.prepare(pool, k, &layer.w_gate, &s.xb[..n * d], n);
            s.qin.prepare(pool, k, &layer.w_up, &s.xb[..n * d], n);
            let (gate_ptr, up_ptr) = (SharedMut::new(s.gate.as_mut_ptr()), SharedMut::new(s.up.as_mut_ptr()));
            let (activation, silu_mul) = (c.activation, k.silu_mul());
            let glu_rows = move |r0: usize, r1: usize| {
                for t in 0..n {
                    // SAFETY: rows r0..r1 of every token belong to the calling task alone, and
                    // the gate and up buffers hold n * ff values (sized by `reserve`).
                    let (g, u) = unsafe {
                        (
                            std::slice::from_raw_parts_mut(gate_ptr.get().add(t * ff + r0), r1 - r0),
                            std::slice::from_raw_parts(up_ptr.get().add(t * ff + r0), r1 - r0),
                        )
                    };
                    glu(activation, silu_mul, g, u);
                }
            };
            let mut gate_up = [
                Product { w: &layer.w_gate, act: s.qin.for_matrix(k, &layer.w_gate), out: &mut s.gate[..n * ff] },
                Product { w: &layer.w_up, act: s.qin.for_matrix(k, &layer.w_up), out: &mut s.up[..n * ff] },
            ];
            ops::matmul_then(pool, k, file, &mut gate_up, n, Some(&glu_rows));
            self.project(pool, &mut s.qin, &layer.w_down, n, &s.gate, &mut s.proj);
            if let Some(w) = &layer.post_ffn_norm {
                ops::rms_norm_inplace(&mut s.proj[..n * d], w, c.rms_eps);
            }
            ops::add_inplace(&mut s.x[..n * d], &s.proj[..n * d]);
        }
        kv.set_len(pos0 + n);

        s.hidden_rows = 0;
        let (first, rows) = match want {
            Logits::None => return Ok(()),
            Logits::Last => (n - 1, 1),
            Logits::All => (0, n),
            Logits::Hidden { last } => {
                ops::rms_norm(&s.x[..n * d], &self.output_norm, c.rms_eps, &mut s.xb[..n * d]);
                (s.hidden_rows, s.hidden_dim) = (n, d);
                if last {
                    // The same norm and product of the last row as `Logits::Last` (rows are
                    // normalised independently), so its logits do not change.
                    s.logits.resize(c.vocab_size, 0.0);
                    self.project(pool, &mut s.qin, &self.output, 1, &s.xb[(n - 1) * d..n * d], &mut s.logits);
                    s.logits_rows = 1;
                }
                return Ok(());
            }
        };
        ops::rms_norm(&s.x[first * d..(first + rows) * d], &self.output_norm, c.rms_eps, &mut s.xb[..rows * d]);
        s.logits.resize(rows * c.vocab_size, 0.0);
        self.project(pool, &mut s.qin, &self.output, rows, &s.xb, &mut s.logits);
        s.logits_rows = rows;
        Ok(())
    }

    /// out = W · input for the `n` rows of `input`, as one parallel job.
    fn project(
        &self,
        pool: &ThreadPool,
        qin: &mut QuantizedInput,
        w: &Matrix,
        n: usize,
        input: &[f32],
        out: &mut [f32],
    ) {
        qin.invalidate();
        qin.prepare(pool, self.kernels, w, &input[..n * w.cols], n);
        let act = qin.for_matrix(self.kernels, w);
        ops::matmul(pool, self.kernels, self.file.bytes(), &mut [Product { w, act, out: &mut out[..n * w.rows] }], n);
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
        let dst = SharedMut::new(out.as_mut_ptr());
        pool.parallel_for(n, &|t| {
            let h = quant::blocks::as_bytes(&scratch.xb[t * d..(t + 1) * d]);
            // SAFETY: task t alone writes row t of `out` (n rows of k).
            let o = unsafe { std::slice::from_raw_parts_mut(dst.get().add(t * k), k) };
            mat_vec(d, w, h, o);
        });
    }

    /// Rotary position embedding of `n_heads` heads per row, row t by the angles of its
    /// position (`angles`: per row, the cosines then the sines; see [`rope_angles`]).
    fn apply_rope(&self, x: &mut [f32], n_heads: usize, angles: &[f32]) {
        let c = &self.config;
        let hd = c.head_dim;
        // The rotated dimensions (the rotary part of a head may be shorter than the head).
        let half = self.inv_freq_global.len();
        for (xr, cs) in x.chunks_exact_mut(n_heads * hd).zip(angles.chunks_exact(2 * half)) {
            let (cos, sin) = cs.split_at(half);
            for h in xr.chunks_exact_mut(hd) {
                for i in 0..half {
                    let (a, b) = match c.rope_style {
                        RopeStyle::Interleaved => (2 * i, 2 * i + 1),
                        RopeStyle::Halves => (i, i + half),
                    };
                    let (x0, x1) = (h[a], h[b]);
                    h[a] = x0 * cos[i] - x1 * sin[i];
                    h[b] = x0 * sin[i] + x1 * cos[i];
                }
            }
        }
    }
}

/// Per position: the cosines then the sines of its rotation angles (`pos * scale * inv_freq[i]`).
fn rope_angles(positions: &[usize], pos_scale: f32, inv_freq: &[f32], table: &mut Vec<f32>) {
    let half = inv_freq.len();
    table.clear();
    table.resize(positions.len() * 2 * half, 0.0);
    for (cs, &pos) in table.chunks_exact_mut(2 * half).zip(positions) {
        let p = pos as f32 * pos_scale;
        let (cos, sin) = cs.split_at_mut(half);
        for i in 0..half {
            let (s_, c_) = (p * inv_freq[i]).sin_cos();
            cos[i] = c_;
            sin[i] = s_;
        }
    }
}

/// gate = act(gate) * up, element by element.
fn glu(act: Activation, silu_mul: fn(&mut [f32], &[f32]), gate: &mut [f32], up: &[f32]) {
    match act {
        Activation::Silu => silu_mul(gate, up),
        Activation::GeluTanh => gate.iter_mut().zip(up).for_each(|(a, &b)| *a = ops::gelu_tanh(*a) * b),
    }
}

/// Activation buffers of one forward pass, grown to the largest batch seen and then reused.
#[derive(Default)]
pub struct Scratch {
    x: Vec<f32>,
    xb: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
    proj: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    qin: QuantizedInput,
    layout: BatchLayout,
    attn_scratch: attention::Scratch,
    logits: Vec<f32>,
    logits_rows: usize,
    /// Rows of `xb` that hold a [`Logits::Hidden`] pass's normalized rows, and their length.
    hidden_rows: usize,
    hidden_dim: usize,
    /// Rotation angles of the batch's positions for global and for local layers.
    rope: [Vec<f32>; 2],
    /// One embedding row as stored, when rows are copied out of the file.
    embd_row: Vec<u8>,
}

impl Scratch {
    fn reserve(&mut self, c: &Config, n: usize) {
        let grow = |v: &mut Vec<f32>, len: usize| {
            if v.len() < len {
                v.resize(len, 0.0);
            }
        };
        grow(&mut self.x, n * c.n_embd);
        grow(&mut self.xb, n * c.n_embd);
        grow(&mut self.q, n * c.q_dim());
        grow(&mut self.k, n * c.kv_dim());
        grow(&mut self.v, n * c.kv_dim());
        grow(&mut self.attn, n * c.q_dim());
        grow(&mut self.proj, n * c.n_embd);
        grow(&mut self.gate, n * c.n_ff);
        grow(&mut self.up, n * c.n_ff);
    }

    /// Logit rows of the last forward pass.
    pub fn logits(&self) -> impl ExactSizeIterator<Item = &[f32]> {
        let vocab = self.logits.len().checked_div(self.logits_rows).unwrap_or(1);
        self.logits.chunks_exact(vocab).take(self.logits_rows)
    }

    /// The normalized rows (the LM head's input) of the last pass, if it ran with
    /// [`Logits::Hidden`].
    pub fn hidden(&self) -> impl ExactSizeIterator<Item = &[f32]> {
        self.xb.chunks_exact(self.hidden_dim.max(1)).take(self.hidden_rows)
    }

    /// Row `i` of the last pass's logits, writable (samplers apply penalties in place).
    pub fn logits_row_mut(&mut self, i: usize) -> Option<&mut [f32]> {
        let vocab = self.logits.len().checked_div(self.logits_rows)?;
        (i < self.logits_rows).then(|| &mut self.logits[i * vocab..(i + 1) * vocab])
    }

    /// The last row of logits (the next-token distribution after the last input token).
    pub fn last_logits(&mut self) -> &mut [f32] {
        let rows = self.logits_rows.max(1);
        let vocab = self.logits.len() / rows;
        let start = vocab * (rows - 1);
        &mut self.logits[start..]
    }
}

/// Kernels in use unless the engine is told otherwise.
pub fn default_kernels() -> &'static Kernels {
    quant::kernels()
}
