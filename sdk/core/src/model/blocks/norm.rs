//! RMS normalisation with a learned weight: of the residual stream before a block, of a block's
//! output (Gemma's post-norms), or of each head of the queries and keys.

use crate::error::Result;
use crate::gguf::GgufFile;

use super::super::hparams::Hparams;
use super::super::ops;
use super::super::weights::load_vector;

pub(crate) struct RmsNorm {
    weight: Vec<f32>,
    eps: f32,
}

impl RmsNorm {
    /// The weight tensor `name`, `len` values (the width it normalises).
    pub fn load(f: &GgufFile, name: &str, len: usize, eps: f32) -> Result<RmsNorm> {
        Ok(RmsNorm { weight: load_vector(f, name, len)?, eps })
    }

    /// A norm without a learned weight (all ones), over rows of `len`.
    pub fn unit(len: usize, eps: f32) -> RmsNorm {
        RmsNorm { weight: vec![1.0; len], eps }
    }

    /// Layer `il`'s norm `blk.{il}.{name}.weight` of the residual stream's width.
    pub fn layer(h: &Hparams, il: usize, name: &str) -> Result<RmsNorm> {
        Self::load(h.f, &format!("blk.{il}.{name}.weight"), h.config.n_embd, h.config.rms_eps)
    }

    /// out = x / rms(x) * w, for every row of the width.
    pub fn apply(&self, x: &[f32], out: &mut [f32]) {
        ops::rms_norm(x, &self.weight, self.eps, out);
    }

    /// In place, for every row of the width (a row may be one head of a wider one).
    pub(crate) fn apply_inplace(&self, x: &mut [f32]) {
        ops::rms_norm_inplace(x, &self.weight, self.eps);
    }
}
