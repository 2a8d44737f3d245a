//! Rotary position embedding: how a model rotates query and key pairs by position, and the
//! per-pass tables of the batch's angles.

use crate::error::{Error, Result};

use super::super::hparams::Hparams;
use super::super::weights::load_vector;

/// Which dimensions form a rotated pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RopeStyle {
    /// Adjacent pairs (2i, 2i + 1): llama.cpp's NORM type (llama's GGUF layout).
    Interleaved,
    /// Halves (i, i + dims / 2) of the rotated part: llama.cpp's NEOX type.
    Halves,
}

/// Index of a [`Rope`] in the model's list (a layer picks its own).
pub(crate) type RopeId = usize;

/// One rotary embedding: the first `dims` dimensions of each head turn by
/// `pos * pos_scale * inv_freq[i]`, and the rest pass through.
#[derive(Debug, Clone)]
pub(crate) struct Rope {
    pub style: RopeStyle,
    /// Rotated dimensions per head (even, at most the head size).
    pub dims: usize,
    /// `base^(-2i / dims)`, divided by the model's frequency factor of pair i where it has one.
    inv_freq: Vec<f32>,
    /// Positions are multiplied by this (linear scaling).
    pos_scale: f32,
    /// Multiplies the cosines and sines (llama.cpp's `attn_factor`: scales q and k).
    mscale: f32,
}

impl Rope {
    /// A rotation of `dims` dimensions around `base`.
    pub fn new(style: RopeStyle, dims: usize, base: f32) -> Result<Rope> {
        if !(base.is_finite() && base > 0.0) {
            return Err(Error::Corrupt(format!("rotary base {base} is not a positive number")));
        }
        let inv_freq = (0..dims / 2).map(|i| base.powf(-((2 * i) as f32) / dims as f32)).collect();
        Ok(Rope { style, dims, inv_freq, pos_scale: 1.0, mscale: 1.0 })
    }

    /// The rotation most files describe: `rope.dimension_count` of `head_dim` (all by default)
    /// around `rope.freq_base` (10000 by default), with linear position scaling where
    /// `rope.scaling.type` says so and `rope.scaling.attn_factor` where given.
    pub fn read(h: &Hparams, style: RopeStyle, head_dim: usize) -> Result<Rope> {
        let dims = h.rope_dims(head_dim)?;
        let base = h.f32_or("rope.freq_base", 10_000.0)?;
        if base <= 0.0 {
            return Err(h.corrupt("rope.freq_base", base, "not positive"));
        }
        let mut rope = Rope::new(style, dims, base)?;
        if h.has("rope.scaling.factor")
            && h.f.get(&h.key("rope.scaling.type")).and_then(|t| t.as_str()) == Some("linear")
        {
            let factor = h.f32("rope.scaling.factor")?;
            if factor <= 0.0 {
                return Err(h.corrupt("rope.scaling.factor", factor, "not positive"));
            }
            rope.pos_scale = 1.0 / factor;
        }
        rope.mscale = h.f32_or("rope.scaling.attn_factor", 1.0)?;
        Ok(rope)
    }

    /// The same rotation around another base (Gemma's sliding-window layers).
    pub(crate) fn with_base(&self, base: f32) -> Result<Rope> {
        let mut r = Rope::new(self.style, self.dims, base)?;
        r.mscale = self.mscale;
        Ok(r)
    }

    /// Divides each pair's frequency by the factor tensor `name` ({dims / 2} values: Llama 3's
    /// `rope_freqs`, LongRoPE's long and short factors), when the file has it.
    pub(crate) fn with_factors(mut self, f: &crate::gguf::GgufFile, name: &str) -> Result<Rope> {
        if f.tensor(name).is_none() {
            return Ok(self);
        }
        let factors = load_vector(f, name, self.dims / 2)?;
        if let Some(bad) = factors.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
            return Err(Error::Corrupt(format!("rotary factor {bad} in `{name}` is not a positive number")));
        }
        self.inv_freq.iter_mut().zip(&factors).for_each(|(w, f)| *w /= f);
        Ok(self)
    }

    /// Rotates `n_heads` heads of `head_dim` per row of `x`, row t by row t of `angles`
    /// (the cosines then the sines of its position, from [`RopeTables::angles`]).
    pub fn apply(&self, x: &mut [f32], n_heads: usize, head_dim: usize, angles: &[f32]) {
        let half = self.inv_freq.len();
        for (xr, cs) in x.chunks_exact_mut(n_heads * head_dim).zip(angles.chunks_exact(2 * half)) {
            let (cos, sin) = cs.split_at(half);
            for h in xr.chunks_exact_mut(head_dim) {
                for i in 0..half {
                    let (a, b) = match self.style {
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

    /// Per position: the cosines then the sines of its angles.
    fn fill(&self, positions: &[usize], table: &mut Vec<f32>) {
        let half = self.inv_freq.len();
        table.clear();
        table.resize(positions.len() * 2 * half, 0.0);
        for (cs, &pos) in table.chunks_exact_mut(2 * half).zip(positions) {
            let p = pos as f32 * self.pos_scale;
            let (cos, sin) = cs.split_at_mut(half);
            for i in 0..half {
                let (s, c) = (p * self.inv_freq[i]).sin_cos();
                (cos[i], sin[i]) = (c, s);
            }
            if self.mscale != 1.0 {
                cs.iter_mut().for_each(|v| *v *= self.mscale);
            }
        }
    }
}

/// The angles of one pass's positions for each of the model's ropes, computed when a layer
/// first asks for them (once per pass, whichever layers use them).
#[derive(Default)]
pub(crate) struct RopeTables {
    tables: Vec<Vec<f32>>,
    valid: Vec<bool>,
}

impl RopeTables {
    /// Forgets the previous pass's angles (buffers are kept).
    pub(crate) fn invalidate(&mut self) {
        self.valid.iter_mut().for_each(|v| *v = false);
    }

    pub(crate) fn angles(&mut self, ropes: &[Rope], id: RopeId, positions: &[usize]) -> &[f32] {
        if self.tables.len() <= id {
            self.tables.resize_with(id + 1, Vec::new);
            self.valid.resize(id + 1, false);
        }
        if !self.valid[id] {
            ropes[id].fill(positions, &mut self.tables[id]);
            self.valid[id] = true;
        }
        &self.tables[id]
    }
}
