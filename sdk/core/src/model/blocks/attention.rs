//! The attention block: q, k and v projections (three tensors, or one fused q | k | v), their
//! biases where the file has them, per-head q and k norms, rotary embedding (or none: NoPE
//! layers), the session's cache, grouped-query attention over it (optionally within a sliding
//! window), and the output projection. Reads `xb`, writes `proj`.

use crate::error::Result;

use super::super::attention::{self, Heads};
use super::super::hparams::{HeadShape, Hparams};
use super::super::kv::KvShape;
use super::super::ops::{self, Product};
use super::super::scratch::grow;
use super::super::state::LayerCache;
use super::super::weights::{load_optional_vector, load_vector, Matrix};
use super::norm::RmsNorm;
use super::rope::RopeId;
use super::Pass;

/// How an architecture's attention tensors look.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttentionSpec {
    pub heads: HeadShape,
    /// Multiplies q·k (usually 1/√head_dim).
    pub scale: f32,
    /// One `attn_qkv` tensor (rows q, then k, then v) instead of three.
    pub fused_qkv: bool,
    /// Whether the q, k and v biases must be there (Qwen2); otherwise they are used if present.
    pub biases_required: bool,
    /// Per-head RMS norms of q and k (`attn_q_norm`, `attn_k_norm`) before the rotation.
    pub qk_norm: bool,
    /// Each query sees only the last `window` positions.
    pub window: Option<usize>,
    /// An RMS norm without weight of every value head (Gemma 4).
    pub v_norm: bool,
    /// No keys and values of its own: attends over that layer's (Gemma 4's shared layers).
    pub shared_kv: Option<usize>,
    /// `attn_q` gives each head its queries and then as many gate values, and the output is
    /// multiplied by their sigmoid before the output projection (Qwen3.5).
    pub output_gate: bool,
}

impl AttentionSpec {
    /// The usual attention: 1/√head_dim, separate projections, optional biases, no norms.
    pub fn new(heads: HeadShape) -> AttentionSpec {
        AttentionSpec {
            heads,
            scale: 1.0 / (heads.head_dim as f32).sqrt(),
            fused_qkv: false,
            biases_required: false,
            qk_norm: false,
            window: None,
            v_norm: false,
            shared_kv: None,
            output_gate: false,
        }
    }
}

pub(crate) struct Attention {
    q: Matrix,
    /// Key and value projections (none on a layer that reads another layer's cache).
    kv: Option<(Matrix, Matrix)>,
    /// Biases of q, k and v.
    bias: [Option<Vec<f32>>; 3],
    q_norm: Option<RmsNorm>,
    k_norm: Option<RmsNorm>,
    v_norm: Option<RmsNorm>,
    output: Matrix,
    heads: HeadShape,
    scale: f32,
    window: Option<usize>,
    output_gate: bool,
    /// The cache layer this block stores to and attends over.
    cache: usize,
}

impl Attention {
    /// Layer `il`'s attention tensors (`blk.{il}.attn_*`).
    pub fn load(h: &Hparams, il: usize, spec: &AttentionSpec) -> Result<Attention> {
        let (f, d, eps) = (h.f, h.config.n_embd, h.config.rms_eps);
        let hs = spec.heads;
        let (qd, kvd) = (hs.q_dim(), hs.kv_dim());
        // The q projection's rows: the queries, or each head's queries then its gate.
        let q_rows = if spec.output_gate { 2 * qd } else { qd };
        let name = |s: &str| format!("blk.{il}.{s}");
        let (q, kv) = if spec.fused_qkv {
            let qkv = Matrix::load(f, &name("attn_qkv.weight"), d, q_rows + 2 * kvd)?;
            let [q, k, v] = qkv.split(f, [q_rows, kvd, kvd])?;
            (q, Some((k, v)))
        } else if spec.shared_kv.is_some() {
            (Matrix::load(f, &name("attn_q.weight"), d, q_rows)?, None)
        } else {
            (
                Matrix::load(f, &name("attn_q.weight"), d, q_rows)?,
                Some((
                    Matrix::load(f, &name("attn_k.weight"), d, kvd)?,
                    Matrix::load(f, &name("attn_v.weight"), d, kvd)?,
                )),
            )
        };
        let own_kv = kv.is_some();
        let bias = |s: &str, len| match spec.biases_required {
            true => load_vector(f, &name(s), len).map(Some),
            false => load_optional_vector(f, &name(s), len),
        };
        let norm = |s: &str, used: bool| match spec.qk_norm && used {
            true => RmsNorm::load(f, &name(s), hs.head_dim, eps).map(Some),
            false => Ok(None),
        };
        Ok(Attention {
            bias: [bias("attn_q.bias", qd)?, bias("attn_k.bias", kvd)?, bias("attn_v.bias", kvd)?],
            q_norm: norm("attn_q_norm.weight", true)?,
            k_norm: norm("attn_k_norm.weight", own_kv)?,
            v_norm: (spec.v_norm && own_kv).then(|| RmsNorm::unit(hs.head_dim, eps)),
            output: Matrix::load(f, &name("attn_output.weight"), qd, d)?,
            q,
            kv,
            heads: hs,
            scale: spec.scale,
            window: spec.window,
            output_gate: spec.output_gate,
            cache: spec.shared_kv.unwrap_or(il),
        })
    }

    /// What the block keeps in the cache (nothing when it reads another layer's).
    pub fn cache(&self) -> LayerCache {
        match self.kv {
            Some(_) => LayerCache::Kv(KvShape { n_head: self.heads.n_head_kv, head_dim: self.heads.head_dim }),
            None => LayerCache::None,
        }
    }

    pub(crate) fn matrices(&mut self) -> Vec<&mut Matrix> {
        let mut m = vec![&mut self.q];
        if let Some((k, v)) = &mut self.kv {
            m.extend([k, v]);
        }
        m.push(&mut self.output);
        m
    }

    /// proj = attention(xb), rotating q and k by `rope` (`None`: a NoPE layer); appends the
    /// batch's keys and values to the cache.
    pub fn forward(&self, p: &mut Pass<'_>, rope: Option<RopeId>) {
        let (e, n, pos0) = (p.exec, p.n, p.pos0);
        let (k, hs) = (e.kernels, self.heads);
        let (d, qd, kvd) = (self.q.cols, hs.q_dim(), hs.kv_dim());
        let s = &mut *p.s;
        grow(&mut s.q, n * qd);
        grow(&mut s.k, n * kvd);
        grow(&mut s.v, n * kvd);
        grow(&mut s.attn, n * qd);
        if self.output_gate {
            grow(&mut s.gate, n * 2 * qd);
            grow(&mut s.up, n * qd);
        }

        // q, k and v quantize their shared input once and run as one parallel job.
        s.qin.invalidate();
        // The q product lands in `gate` when it carries the gate (split below).
        let q_out = match self.output_gate {
            true => &mut s.gate[..n * 2 * qd],
            false => &mut s.q[..n * qd],
        };
        let Some((wk, wv)) = &self.kv else {
            // Keys and values are another layer's, already in the cache.
            e.project(&mut s.qin, &self.q, n, &s.xb, q_out);
            self.split_gate(p);
            self.finish(p, rope);
            return;
        };
        for w in [&self.q, wk, wv] {
            s.qin.prepare(e.pool, k, w, &s.xb[..n * d], n);
        }
        let mut qkv = [
            Product { w: &self.q, act: s.qin.for_matrix(k, &self.q), out: q_out },
            Product { w: wk, act: s.qin.for_matrix(k, wk), out: &mut s.k[..n * kvd] },
            Product { w: wv, act: s.qin.for_matrix(k, wv), out: &mut s.v[..n * kvd] },
        ];
        ops::matmul(e.pool, k, e.file, &mut qkv, n);
        self.split_gate(p);
        let s = &mut *p.s;
        let outs = [&mut s.q[..n * qd], &mut s.k[..n * kvd], &mut s.v[..n * kvd]];
        for (b, out) in self.bias.iter().zip(outs) {
            if let Some(b) = b {
                ops::add_bias(out, b);
            }
        }
        if let Some(w) = &self.k_norm {
            w.apply_inplace(&mut s.k[..n * kvd]);
        }
        if let Some(w) = &self.v_norm {
            w.apply_inplace(&mut s.v[..n * kvd]);
        }
        if let Some(id) = rope {
            let angles = s.rope.angles(p.ropes, id, &s.layout.positions);
            p.ropes[id].apply(&mut s.k[..n * kvd], hs.n_head_kv, hs.head_dim, angles);
        }
        p.kv.store(self.cache, pos0, &s.k[..n * kvd], &s.v[..n * kvd]);
        self.finish(p, rope);
    }

    /// With an output gate: each token's q product (in `gate`: per head, queries then gate
    /// values) split into the queries (`q`) and the gate values (`up`).
    fn split_gate(&self, p: &mut Pass<'_>) {
        if !self.output_gate {
            return;
        }
        let (hd, qd, s) = (self.heads.head_dim, self.heads.q_dim(), &mut *p.s);
        for t in 0..p.n {
            let both = &s.gate[t * 2 * qd..(t + 1) * 2 * qd];
            for (h, pair) in both.chunks_exact(2 * hd).enumerate() {
                let at = t * qd + h * hd;
                s.q[at..at + hd].copy_from_slice(&pair[..hd]);
                s.up[at..at + hd].copy_from_slice(&pair[hd..]);
            }
        }
    }

    /// The queries' norm and rotation, attention over the cache, the output projection.
    fn finish(&self, p: &mut Pass<'_>, rope: Option<RopeId>) {
        let (e, n) = (p.exec, p.n);
        let (k, hs) = (e.kernels, self.heads);
        let qd = hs.q_dim();
        let s = &mut *p.s;
        if let Some(w) = &self.q_norm {
            w.apply_inplace(&mut s.q[..n * qd]);
        }
        if let Some(id) = rope {
            let angles = s.rope.angles(p.ropes, id, &s.layout.positions);
            p.ropes[id].apply(&mut s.q[..n * qd], hs.n_head, hs.head_dim, angles);
        }
        let heads = Heads { n_head: hs.n_head, n_head_kv: hs.n_head_kv, head_dim: hs.head_dim, scale: self.scale };
        attention::attend(
            e.pool,
            k,
            p.kv,
            self.cache,
            &mut s.q[..n * qd],
            &s.layout,
            self.window,
            heads,
            &mut s.attn[..n * qd],
            &mut s.attn_scratch,
        );
        if self.output_gate {
            for (o, &g) in s.attn[..n * qd].iter_mut().zip(&s.up[..n * qd]) {
                *o *= 1.0 / (1.0 + (-g).exp());
            }
        }
        e.project(&mut s.qin, &self.output, n, &s.attn, &mut s.proj);
    }
}
