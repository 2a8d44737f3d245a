//! What architectures build their layers from: attention, the gated feed-forward, norms and
//! rotary embedding, and the [`Pass`] a layer runs in. A layer reads the residual stream
//! (`x`), runs its blocks on the normalised copy (`xb`), and adds their outputs (`proj`) back.

pub(crate) mod attention;
pub(crate) mod deltanet;
pub(crate) mod ffn;
pub(crate) mod hybrid;
pub(crate) mod norm;
pub(crate) mod rope;
pub(crate) mod shortconv;

use crate::quant::Kernels;
use crate::runtime::ThreadPool;

use super::kv::KvCache;
use super::ops::{self, Product, QuantizedInput};
use super::scratch::Scratch;
use super::state::LayerCache;
use super::weights::Matrix;
use norm::RmsNorm;
use rope::Rope;

/// One layer of an architecture, as the model's layer loop runs it.
pub(crate) trait Layer: Send + Sync {
    /// Runs the layer on the pass's batch: reads and updates the residual stream.
    fn forward(&self, p: &mut Pass<'_>);

    /// What the layer keeps in a session's cache between passes.
    fn cache(&self) -> LayerCache;

    /// Its weight matrices, in the order a pass reads them (for repacking).
    fn matrices(&mut self) -> Vec<&mut Matrix>;
}

/// Where a pass's products run: the thread pool, the kernel set, and the model file's bytes
/// (products of matrices that were not repacked read them).
#[derive(Clone, Copy)]
pub(crate) struct Exec<'a> {
    pub pool: &'a ThreadPool,
    pub kernels: &'static Kernels,
    pub file: &'a [u8],
}

impl Exec<'_> {
    /// out = W · input for the `n` rows of `input`, as one parallel job.
    pub(crate) fn project(&self, qin: &mut QuantizedInput, w: &Matrix, n: usize, input: &[f32], out: &mut [f32]) {
        qin.invalidate();
        qin.prepare(self.pool, self.kernels, w, &input[..n * w.cols], n);
        let act = qin.for_matrix(self.kernels, w);
        ops::matmul(self.pool, self.kernels, self.file, &mut [Product { w, act, out: &mut out[..n * w.rows] }], n);
    }
}

/// One forward pass, as the layers see it.
pub(crate) struct Pass<'a> {
    pub exec: Exec<'a>,
    pub kv: &'a mut KvCache,
    /// The model's rotary embeddings, by [`rope::RopeId`].
    pub ropes: &'a [Rope],
    pub s: &'a mut Scratch,
    /// Tokens in the batch.
    pub n: usize,
    /// Width of the residual stream.
    pub d: usize,
    /// Cache slot of the batch's first token (the cached length before the pass).
    pub pos0: usize,
    /// The batch's token ids (Gemma 4's per-layer embeddings look them up).
    pub tokens: &'a [u32],
}

impl Pass<'_> {
    /// The session's context length (its cache's capacity): some models rotate differently
    /// past their original context (Phi-3's LongRoPE).
    pub fn n_ctx(&self) -> usize {
        self.kv.capacity()
    }

    /// xb = norm(x): a block's input.
    pub(crate) fn norm(&mut self, w: &RmsNorm) {
        let len = self.n * self.d;
        w.apply(&self.s.x[..len], &mut self.s.xb[..len]);
    }

    /// Normalises the block's output before it joins the stream (Gemma's post-norms).
    pub(crate) fn post_norm(&mut self, w: &RmsNorm) {
        w.apply_inplace(&mut self.s.proj[..self.n * self.d]);
    }

    /// x += proj: the block's output joins the residual stream.
    pub(crate) fn add_to_stream(&mut self) {
        let len = self.n * self.d;
        ops::add_inplace(&mut self.s.x[..len], &self.s.proj[..len]);
    }

    /// x += proj * scale (Granite's residual scale).
    pub(crate) fn add_scaled_to_stream(&mut self, scale: f32) {
        let len = self.n * self.d;
        for (x, &p) in self.s.x[..len].iter_mut().zip(&self.s.proj[..len]) {
            *x += p * scale;
        }
    }
}

/// What turns the LM head's products into logits: a scale (Granite divides by its
/// `logit_scale`) and a soft cap `c · tanh(z / c)` (Gemma 2 and 4's final soft-capping).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogitMap {
    pub scale: f32,
    pub softcap: Option<f32>,
}

impl Default for LogitMap {
    fn default() -> Self {
        LogitMap { scale: 1.0, softcap: None }
    }
}

impl LogitMap {
    pub fn apply(&self, logits: &mut [f32]) {
        if self.scale != 1.0 {
            logits.iter_mut().for_each(|z| *z *= self.scale);
        }
        if let Some(c) = self.softcap {
            logits.iter_mut().for_each(|z| *z = c * (*z / c).tanh());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LogitMap;

    #[test]
    fn logit_map_scales_then_caps() {
        let mut z = [-40.0f32, -1.0, 0.0, 2.0, 40.0];
        LogitMap { scale: 0.5, softcap: Some(3.0) }.apply(&mut z);
        for (got, x) in z.iter().zip([-40.0f32, -1.0, 0.0, 2.0, 40.0]) {
            let want = 3.0 * (x * 0.5 / 3.0).tanh();
            assert!((got - want).abs() <= 1e-6, "{got} vs {want}");
            assert!(got.abs() < 3.0);
        }
        let mut plain = [1.5f32, -2.5];
        LogitMap::default().apply(&mut plain);
        assert_eq!(plain, [1.5, -2.5]);
    }
}
