//! The transformer: weights of the three supported architectures (llama, qwen2, gemma3) and
//! their forward pass. Architecture differences are data in [`Config`]; the pass below reads
//! top to bottom like the papers' block diagrams.

mod config;
mod kv;
mod ops;
mod weights;

pub use config::{Activation, Architecture, Config, Rope, RopeStyle};
pub use kv::KvCache;
pub use weights::Matrix;

use std::cell::RefCell;

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::quant::{self, Kernels};
use crate::runtime::ThreadPool;
use ops::{QuantizedInput, SharedMut};
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
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("arch", &self.config.arch).field("layers", &self.layers.len()).finish()
    }
}

impl Model {
    pub fn load(file: Arc<GgufFile>, kernels: &'static Kernels) -> Result<Model> {
        let c = Config::from_gguf(&file)?;
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
        Ok(Model { config: c, file, kernels, token_embd, output_norm, output, layers, inv_freq_global, inv_freq_local })
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
        KvCache::new(self.config.n_layer, self.config.kv_dim(), capacity)
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

        // x[n, d] = embedding rows, read straight from the mapped table.
        let Some(dequant) = k.dequantize(self.token_embd.ty) else {
            return Err(Error::UnsupportedTensorType { tensor: self.token_embd.name.clone(), ty: self.token_embd.ty.name().into() });
        };
        for (t, &tok) in tokens.iter().enumerate() {
            let row = &mut s.x[t * d..(t + 1) * d];
            dequant(self.token_embd.row(file, tok as usize), row);
            if c.embedding_scale != 1.0 {
                row.iter_mut().for_each(|v| *v *= c.embedding_scale);
            }
        }

        for (il, layer) in self.layers.iter().enumerate() {
            // Attention block.
            ops::rms_norm(&s.x[..n * d], &layer.attn_norm, c.rms_eps, &mut s.xb[..n * d]);
            s.qin.invalidate();
            self.project(pool, &mut s.qin, &layer.wq, n, &s.xb, &mut s.q);
            self.project(pool, &mut s.qin, &layer.wk, n, &s.xb, &mut s.k);
            self.project(pool, &mut s.qin, &layer.wv, n, &s.xb, &mut s.v);
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
            let (rope, inv_freq) =
                if local { (c.rope_local, &self.inv_freq_local) } else { (c.rope_global, &self.inv_freq_global) };
            self.apply_rope(&mut s.q[..n * qd], c.n_head, &s.layout.positions, rope.scale, inv_freq);
            self.apply_rope(&mut s.k[..n * kvd], c.n_head_kv, &s.layout.positions, rope.scale, inv_freq);
            kv.store(il, pos0, &s.k[..n * kvd], &s.v[..n * kvd]);
            let window = if local { c.sliding_window } else { None };
            self.attention(pool, kv, il, &s.q[..n * qd], &s.layout, window, &mut s.attn[..n * qd]);
            s.qin.invalidate();
            self.project(pool, &mut s.qin, &layer.wo, n, &s.attn, &mut s.proj);
            if let Some(w) = &layer.post_attn_norm {
                ops::rms_norm_inplace(&mut s.proj[..n * d], w, c.rms_eps);
            }
            ops::add_inplace(&mut s.x[..n * d], &s.proj[..n * d]);

            // Feed-forward block.
            ops::rms_norm(&s.x[..n * d], &layer.ffn_norm, c.rms_eps, &mut s.xb[..n * d]);
            s.qin.invalidate();
            self.project(pool, &mut s.qin, &layer.w_gate, n, &s.xb, &mut s.gate);
            self.project(pool, &mut s.qin, &layer.w_up, n, &s.xb, &mut s.up);
            glu(pool, c.activation, &mut s.gate[..n * ff], &s.up[..n * ff]);
            s.qin.invalidate();
            self.project(pool, &mut s.qin, &layer.w_down, n, &s.gate, &mut s.proj);
            if let Some(w) = &layer.post_ffn_norm {
                ops::rms_norm_inplace(&mut s.proj[..n * d], w, c.rms_eps);
            }
            ops::add_inplace(&mut s.x[..n * d], &s.proj[..n * d]);
        }
        kv.set_len(pos0 + n);

        let (first, rows) = match want {
            Logits::None => return Ok(()),
            Logits::Last => (n - 1, 1),
            Logits::All => (0, n),
        };
        ops::rms_norm(&s.x[first * d..(first + rows) * d], &self.output_norm, c.rms_eps, &mut s.xb[..rows * d]);
        s.qin.invalidate();
        let act = s.qin.get(k, self.output.ty.activation_type(), &s.xb[..rows * d], rows, d);
        s.logits.resize(rows * c.vocab_size, 0.0);
        ops::matmul(pool, k, file, &self.output, act, rows, &mut s.logits);
        s.logits_rows = rows;
        Ok(())
    }

    /// out = W · input for the `n` rows of `input` (input quantized once per format, see
    /// [`QuantizedInput`]).
    #[allow(clippy::too_many_arguments)]
    fn project(&self, pool: &ThreadPool, qin: &mut QuantizedInput, w: &Matrix, n: usize, input: &[f32], out: &mut [f32]) {
        let act = qin.get(self.kernels, w.ty.activation_type(), &input[..n * w.cols], n, w.cols);
        ops::matmul(pool, self.kernels, self.file.bytes(), w, act, n, &mut out[..n * w.rows]);
    }

    /// Rotary position embedding of `n_heads` heads per row; row t sits at `positions[t]`.
    fn apply_rope(&self, x: &mut [f32], n_heads: usize, positions: &[usize], pos_scale: f32, inv_freq: &[f32]) {
        let c = &self.config;
        let hd = c.head_dim;
        let half = inv_freq.len();
        let row = n_heads * hd;
        ROPE_TABLE.with(|table| {
            let mut table = table.borrow_mut();
            table.resize(half * 2, 0.0);
            let (cos, sin) = table.split_at_mut(half);
            for (xr, &pos) in x.chunks_exact_mut(row).zip(positions) {
                let p = pos as f32 * pos_scale;
                for i in 0..half {
                    let (s_, c_) = (p * inv_freq[i]).sin_cos();
                    cos[i] = c_;
                    sin[i] = s_;
                }
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
        });
    }

    /// Causal (optionally sliding-window) attention of the batch's query rows over the cache
    /// of layer `il`: query t sees the cached positions and the batch keys `layout` lists for
    /// it, in position order. One task per (head, token); a query's result does not depend on
    /// the other queries in the batch.
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        pool: &ThreadPool,
        kv: &KvCache,
        il: usize,
        q: &[f32],
        layout: &BatchLayout,
        window: Option<usize>,
        out: &mut [f32],
    ) {
        let c = &self.config;
        let (hd, nh) = (c.head_dim, c.n_head);
        let n = layout.positions.len();
        let group = c.n_head / c.n_head_kv;
        let kvd = c.kv_dim();
        let slots = layout.pos0 + n;
        let keys = kv.keys(il, slots);
        let values = kv.values(il, slots);
        let scale = c.attention_scale;
        let (f16_dot, f16_axpy) = (self.kernels.f16_dot(), self.kernels.f16_axpy());
        let out_ptr = SharedMut::new(out.as_mut_ptr());
        pool.parallel_for(nh * n, &|task| {
            let (t, h) = (task / nh, task % nh);
            let p = layout.positions[t];
            let lo = window.map_or(0, |w| (p + 1).saturating_sub(w));
            let visible = layout.visible_slots(t, lo);
            let g = h / group;
            let qh = &q[t * nh * hd + h * hd..][..hd];
            SCORES.with(|buf| {
                let mut buf = buf.borrow_mut();
                let count = visible.len();
                buf.resize(count + hd, 0.0);
                let (scores, acc) = buf.split_at_mut(count);
                for (j, sc) in visible.clone().zip(scores.iter_mut()) {
                    *sc = f16_dot(&keys[j * kvd + g * hd..][..hd], qh) * scale;
                }
                ops::softmax(scores);
                acc.iter_mut().for_each(|a| *a = 0.0);
                for (j, &w) in visible.zip(scores.iter()) {
                    f16_axpy(w, &values[j * kvd + g * hd..][..hd], acc);
                }
                // SAFETY: each (t, h) task writes its own hd-sized slice.
                let o = unsafe { std::slice::from_raw_parts_mut(out_ptr.get().add(t * nh * hd + h * hd), hd) };
                o.copy_from_slice(acc);
            });
        });
    }
}

/// Where the tokens of one pass sit: their positions and, for a token tree, which batch slots
/// each may see. Rebuilt per pass into buffers that only grow.
#[derive(Default)]
struct BatchLayout {
    /// KV slot of the first batch token (= the cached length).
    pos0: usize,
    /// Position of each batch token (its rotary position and its place in the sequence).
    positions: Vec<usize>,
    /// Tree passes only: for token t, `ancestors[starts[t]..starts[t + 1]]` are the batch
    /// indices of its ancestors and itself, ascending.
    ancestors: Vec<usize>,
    starts: Vec<usize>,
    is_tree: bool,
}

impl BatchLayout {
    fn build(&mut self, pos0: usize, n: usize, tree: Option<&[Option<usize>]>) {
        self.pos0 = pos0;
        self.positions.clear();
        self.ancestors.clear();
        self.starts.clear();
        self.is_tree = tree.is_some();
        let Some(parents) = tree else {
            self.positions.extend(pos0..pos0 + n);
            return;
        };
        self.starts.push(0);
        for (i, parent) in parents.iter().enumerate() {
            // A parent's list is complete before its children's (parents come first).
            let begin = self.ancestors.len();
            if let Some(p) = *parent {
                let (s, e) = (self.starts[p], self.starts[p + 1]);
                self.ancestors.extend_from_within(s..e);
            }
            self.ancestors.push(i);
            self.starts.push(self.ancestors.len());
            self.positions.push(pos0 + (self.ancestors.len() - begin) - 1);
        }
    }

    /// KV slots query `t` attends to, ascending: cached slots from `lo` on (slot = position
    /// there), then the batch slots of its ancestors and itself at positions ≥ `lo`.
    fn visible_slots(&self, t: usize, lo: usize) -> VisibleSlots<'_> {
        let cached = lo.min(self.pos0)..self.pos0;
        if !self.is_tree {
            return VisibleSlots { cached: lo.min(self.pos0 + t + 1)..self.pos0 + t + 1, batch: &[], layout: self, lo };
        }
        VisibleSlots { cached, batch: &self.ancestors[self.starts[t]..self.starts[t + 1]], layout: self, lo }
    }
}

/// Iterator over the KV slots one query sees (see [`BatchLayout::visible_slots`]).
#[derive(Clone)]
struct VisibleSlots<'a> {
    cached: std::ops::Range<usize>,
    batch: &'a [usize],
    layout: &'a BatchLayout,
    lo: usize,
}

impl VisibleSlots<'_> {
    fn len(&self) -> usize {
        self.cached.len() + self.batch.iter().filter(|&&j| self.layout.positions[j] >= self.lo).count()
    }
}

impl Iterator for VisibleSlots<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if let Some(j) = self.cached.next() {
            return Some(j);
        }
        while let Some((&j, rest)) = self.batch.split_first() {
            self.batch = rest;
            if self.layout.positions[j] >= self.lo {
                return Some(self.layout.pos0 + j);
            }
        }
        None
    }
}

thread_local! {
    static SCORES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    static ROPE_TABLE: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// gate = act(gate) * up, split across the pool by chunks.
fn glu(pool: &ThreadPool, act: Activation, gate: &mut [f32], up: &[f32]) {
    const CHUNK: usize = 4096;
    let n_tasks = gate.len().div_ceil(CHUNK);
    let len = gate.len();
    let g = SharedMut::new(gate.as_mut_ptr());
    pool.parallel_for(n_tasks, &|i| {
        let s = i * CHUNK;
        let e = (s + CHUNK).min(len);
        // SAFETY: chunks are disjoint.
        let gs = unsafe { std::slice::from_raw_parts_mut(g.get().add(s), e - s) };
        match act {
            Activation::Silu => gs.iter_mut().zip(&up[s..e]).for_each(|(a, &b)| *a = ops::silu(*a) * b),
            Activation::GeluTanh => gs.iter_mut().zip(&up[s..e]).for_each(|(a, &b)| *a = ops::gelu_tanh(*a) * b),
        }
    });
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
    logits: Vec<f32>,
    logits_rows: usize,
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

