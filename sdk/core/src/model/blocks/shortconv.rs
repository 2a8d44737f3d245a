//! LFM2's gated short convolution: `in_proj` turns each token's normalised row into three
//! (B, C and x), the product B ∘ x goes through a causal depthwise convolution over the last
//! `L` tokens (the session's state keeps the `L - 1` before the batch), C gates the result,
//! and `out_proj` maps it back to the stream. Reads `xb`, writes `proj`.

use crate::error::Result;

use super::super::hparams::Hparams;
use super::super::scratch::grow;
use super::super::state::ConvShape;
use super::super::weights::{load_conv_taps, Matrix};
use super::Pass;

pub(crate) struct ShortConv {
    in_proj: Matrix,
    /// `kernel` taps per channel (channel-major, as the file stores `{L, E}`).
    taps: Vec<f32>,
    out_proj: Matrix,
    shape: ConvShape,
    /// The cache layer holding this block's window.
    cache: usize,
}

impl ShortConv {
    /// Layer `il`'s `shortconv.in_proj`, `shortconv.conv` (`kernel` taps) and `shortconv.out_proj`.
    pub fn load(h: &Hparams, il: usize, kernel: usize) -> Result<ShortConv> {
        let (f, d) = (h.f, h.config.n_embd);
        let name = |s: &str| format!("blk.{il}.shortconv.{s}.weight");
        Ok(ShortConv {
            in_proj: Matrix::load(f, &name("in_proj"), d, 3 * d)?,
            taps: load_conv_taps(f, &name("conv"), kernel, d)?,
            out_proj: Matrix::load(f, &name("out_proj"), d, d)?,
            shape: ConvShape { channels: d, kernel, rule: None },
            cache: il,
        })
    }

    pub fn shape(&self) -> ConvShape {
        self.shape
    }

    pub(crate) fn matrices(&mut self) -> [&mut Matrix; 2] {
        [&mut self.in_proj, &mut self.out_proj]
    }

    pub fn forward(&self, p: &mut Pass<'_>) {
        let (e, n, d) = (p.exec, p.n, p.d);
        let s = &mut *p.s;
        // B | C | x per token in `q`; B ∘ x in `k`; the convolution's output in `v`.
        grow(&mut s.q, n * 3 * d);
        grow(&mut s.k, n * d);
        grow(&mut s.v, n * d);
        e.project(&mut s.qin, &self.in_proj, n, &s.xb, &mut s.q);
        for t in 0..n {
            let row = &s.q[t * 3 * d..(t + 1) * 3 * d];
            let (b, x) = (&row[..d], &row[2 * d..]);
            for ((o, &b), &x) in s.k[t * d..(t + 1) * d].iter_mut().zip(b).zip(x) {
                *o = b * x;
            }
        }
        if let Some(state) = p.kv.conv_state(self.cache) {
            state.apply(&self.taps, &s.k[..n * d], &s.layout, &mut s.v[..n * d]);
        }
        for t in 0..n {
            let c = &s.q[t * 3 * d + d..t * 3 * d + 2 * d];
            for (y, &c) in s.v[t * d..(t + 1) * d].iter_mut().zip(c) {
                *y *= c;
            }
        }
        e.project(&mut s.qin, &self.out_proj, n, &s.v, &mut s.proj);
    }
}
