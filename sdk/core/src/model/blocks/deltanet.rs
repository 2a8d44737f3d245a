//! Qwen3.5's linear attention, Gated DeltaNet: `attn_qkv` gives each token's q | k | v, which
//! go through a causal depthwise convolution over the last `ssm.conv_kernel` tokens and SiLU;
//! q and k are L2-normalised per head; `ssm_alpha` and `ssm_beta` give each value head its
//! decay `g = softplus(α + dt_bias) · ssm_a` and its write strength `β = sigmoid(·)`; the delta
//! rule ([`DeltaRule`]) turns them into one output row per head, which is RMS-normalised
//! (`ssm_norm`), gated by SiLU of `attn_gate`'s row and mapped back by `ssm_out`. The session's
//! state keeps the convolution window and the rule's matrices. Reads `xb`, writes `proj`.

use crate::error::Result;

use super::super::hparams::Hparams;
use super::super::ops::{self, Product};
use super::super::scratch::grow;
use super::super::state::{ConvShape, DeltaRule};
use super::super::weights::{load_conv_taps, load_vector, Matrix};
use super::norm::RmsNorm;
use super::Pass;

/// Longest convolution the loader accepts (Qwen3.5 uses 4).
const MAX_KERNEL: usize = 64;
/// Largest head the loader accepts (Qwen3.5 uses 128).
const MAX_HEAD: usize = 1024;

pub(crate) struct GatedDeltaNet {
    qkv: Matrix,
    /// `attn_gate`: the output gate's pre-activations, a row per value head.
    z: Matrix,
    alpha: Matrix,
    beta: Matrix,
    /// `kernel` taps per channel (channel-major, as the file stores `{L, channels}`).
    taps: Vec<f32>,
    dt_bias: Vec<f32>,
    /// `ssm_a`: −exp(A_log), the decay rate per value head.
    a: Vec<f32>,
    norm: RmsNorm,
    out: Matrix,
    shape: ConvShape,
    rule: DeltaRule,
    eps: f32,
    /// The cache layer holding this block's state.
    cache: usize,
}

impl GatedDeltaNet {
    /// Layer `il`'s tensors, with the shapes of the `ssm.*` keys.
    pub fn load(h: &Hparams, il: usize) -> Result<GatedDeltaNet> {
        let (f, d, eps) = (h.f, h.config.n_embd, h.config.rms_eps);
        let kernel = h.positive("ssm.conv_kernel")?;
        if kernel > MAX_KERNEL {
            return Err(h.corrupt("ssm.conv_kernel", kernel, "longer than the convolutions this crate runs"));
        }
        let dim = h.positive("ssm.state_size")?;
        if dim > MAX_HEAD {
            return Err(h.corrupt("ssm.state_size", dim, "a head wider than 1024"));
        }
        let k_heads = h.positive("ssm.group_count")?;
        let v_heads = h.positive("ssm.time_step_rank")?;
        if v_heads % k_heads != 0 || v_heads > MAX_HEAD || k_heads > MAX_HEAD {
            return Err(h.corrupt("ssm.time_step_rank", v_heads, "not a multiple of `ssm.group_count`"));
        }
        let inner = h.positive("ssm.inner_size")?;
        if inner != v_heads * dim {
            return Err(h.corrupt("ssm.inner_size", inner, "not the value heads times `ssm.state_size`"));
        }
        let rule = DeltaRule { v_heads, k_heads, dim };
        let channels = 2 * k_heads * dim + inner;
        let name = |s: &str| format!("blk.{il}.{s}");
        Ok(GatedDeltaNet {
            qkv: Matrix::load(f, &name("attn_qkv.weight"), d, channels)?,
            z: Matrix::load(f, &name("attn_gate.weight"), d, inner)?,
            alpha: Matrix::load(f, &name("ssm_alpha.weight"), d, v_heads)?,
            beta: Matrix::load(f, &name("ssm_beta.weight"), d, v_heads)?,
            taps: load_conv_taps(f, &name("ssm_conv1d.weight"), kernel, channels)?,
            dt_bias: load_vector(f, &name("ssm_dt.bias"), v_heads)?,
            a: load_vector(f, &name("ssm_a"), v_heads)?,
            norm: RmsNorm::load(f, &name("ssm_norm.weight"), dim, eps)?,
            out: Matrix::load(f, &name("ssm_out.weight"), inner, d)?,
            shape: ConvShape { channels, kernel, rule: Some(rule) },
            rule,
            eps,
            cache: il,
        })
    }

    pub fn shape(&self) -> ConvShape {
        self.shape
    }

    pub(crate) fn matrices(&mut self) -> [&mut Matrix; 5] {
        [&mut self.qkv, &mut self.z, &mut self.alpha, &mut self.beta, &mut self.out]
    }

    pub fn forward(&self, p: &mut Pass<'_>) {
        let (e, n, d) = (p.exec, p.n, p.d);
        let (ch, rule) = (self.shape.channels, self.rule);
        let (hv, kd, inner) = (rule.v_heads, rule.k_heads * rule.dim, rule.output_len());
        let s = &mut *p.s;
        // q | k | v per token in `q`, its convolution in `k`, the gate in `gate`, α | β in
        // `up`, the rule's inputs in `v` and its outputs in `attn`.
        grow(&mut s.q, n * ch);
        grow(&mut s.k, n * ch);
        grow(&mut s.gate, n * inner);
        grow(&mut s.up, 2 * n * hv);
        grow(&mut s.v, n * rule.input_len());
        grow(&mut s.attn, n * inner);
        s.qin.invalidate();
        let k = e.kernels;
        for w in [&self.qkv, &self.z, &self.alpha, &self.beta] {
            s.qin.prepare(e.pool, k, w, &s.xb[..n * d], n);
        }
        let (alpha, beta) = s.up[..2 * n * hv].split_at_mut(n * hv);
        let mut products = [
            Product { w: &self.qkv, act: s.qin.for_matrix(k, &self.qkv), out: &mut s.q[..n * ch] },
            Product { w: &self.z, act: s.qin.for_matrix(k, &self.z), out: &mut s.gate[..n * inner] },
            Product { w: &self.alpha, act: s.qin.for_matrix(k, &self.alpha), out: alpha },
            Product { w: &self.beta, act: s.qin.for_matrix(k, &self.beta), out: beta },
        ];
        ops::matmul(e.pool, k, e.file, &mut products, n);

        let Some(state) = p.kv.conv_state(self.cache) else {
            s.proj[..n * d].fill(0.0);
            return;
        };
        state.apply(&self.taps, &s.q[..n * ch], &s.layout, &mut s.k[..n * ch]);
        let il = rule.input_len();
        for t in 0..n {
            let conv = &mut s.k[t * ch..(t + 1) * ch];
            conv.iter_mut().for_each(|x| *x = silu(*x));
            let row = &mut s.v[t * il..(t + 1) * il];
            row[..ch].copy_from_slice(conv);
            // q and k: unit length per head (ggml's L2 norm with the RMS epsilon).
            for head in row[..2 * kd].chunks_exact_mut(rule.dim) {
                let inv = 1.0 / (head.iter().map(|x| x * x).sum::<f32>() + self.eps).sqrt();
                head.iter_mut().for_each(|x| *x *= inv);
            }
            let (g, b) = row[ch..].split_at_mut(hv);
            for h in 0..hv {
                g[h] = softplus(s.up[t * hv + h] + self.dt_bias[h]) * self.a[h];
                b[h] = sigmoid(s.up[(n + t) * hv + h]);
            }
        }
        state.recur(&s.v[..n * il], &s.layout, &mut s.attn[..n * inner]);
        // norm(o) per head, times silu(z).
        self.norm.apply_inplace(&mut s.attn[..n * inner]);
        (k.silu_mul())(&mut s.gate[..n * inner], &s.attn[..n * inner]);
        e.project(&mut s.qin, &self.out, n, &s.gate, &mut s.proj);
    }
}

fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// ggml's softplus: log(1 + eˣ), and x itself past 20.
fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        (1.0 + x.exp()).ln()
    }
}
