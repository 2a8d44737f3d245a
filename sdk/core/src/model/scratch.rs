//! Activation buffers of one forward pass, grown to the largest batch seen and then reused.

use super::attention::{self, BatchLayout};
use super::blocks::rope::RopeTables;
use super::ops::QuantizedInput;

/// A session's buffers for [`Model::forward`](super::Model::forward): the residual stream,
/// each block's intermediate rows, the quantized inputs of the products, and the logits.
#[derive(Default)]
pub struct Scratch {
    /// The residual stream, a row of the model's width per token.
    pub(super) x: Vec<f32>,
    /// The normalised stream, a block's input.
    pub(super) xb: Vec<f32>,
    pub(super) q: Vec<f32>,
    pub(super) k: Vec<f32>,
    pub(super) v: Vec<f32>,
    pub(super) attn: Vec<f32>,
    /// A block's output, before it joins the residual stream.
    pub(super) proj: Vec<f32>,
    pub(super) gate: Vec<f32>,
    pub(super) up: Vec<f32>,
    /// Gemma 4's per-layer inputs: per token, a row per layer.
    pub(super) per_layer: Vec<f32>,
    pub(super) qin: QuantizedInput,
    pub(super) layout: BatchLayout,
    pub(super) attn_scratch: attention::Scratch,
    pub(super) rope: RopeTables,
    pub(super) logits: Vec<f32>,
    pub(super) logits_rows: usize,
    /// Rows of `xb` that hold a [`Logits::Hidden`](super::Logits::Hidden) pass's normalized
    /// rows, and their length.
    pub(super) hidden_rows: usize,
    pub(super) hidden_dim: usize,
    /// One embedding row as stored, when rows are copied out of the file.
    pub(super) embd_row: Vec<u8>,
}

/// Grows `v` to at least `len` values (never shrinks: no allocation once a session's buffers
/// have met its largest batch).
pub(super) fn grow(v: &mut Vec<f32>, len: usize) {
    if v.len() < len {
        v.resize(len, 0.0);
    }
}

impl Scratch {
    /// Logit rows of the last forward pass.
    pub fn logits(&self) -> impl ExactSizeIterator<Item = &[f32]> {
        let vocab = self.logits.len().checked_div(self.logits_rows).unwrap_or(1);
        self.logits.chunks_exact(vocab).take(self.logits_rows)
    }

    /// The normalized rows (the LM head's input) of the last pass, if it ran with
    /// [`Logits::Hidden`](super::Logits::Hidden).
    pub fn hidden(&self) -> impl ExactSizeIterator<Item = &[f32]> {
        self.xb.chunks_exact(self.hidden_dim.max(1)).take(self.hidden_rows)
    }

    /// Row `i` of the last pass's logits, writable (samplers apply penalties in place).
    pub(crate) fn logits_row_mut(&mut self, i: usize) -> Option<&mut [f32]> {
        let vocab = self.logits.len().checked_div(self.logits_rows)?;
        (i < self.logits_rows).then(|| &mut self.logits[i * vocab..(i + 1) * vocab])
    }

    /// The last row of logits (the next-token distribution after the last input token).
    pub(crate) fn last_logits(&mut self) -> &mut [f32] {
        let rows = self.logits_rows.max(1);
        let vocab = self.logits.len() / rows;
        let start = vocab * (rows - 1);
        &mut self.logits[start..]
    }
}
