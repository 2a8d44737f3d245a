//! Phi-3 and Phi-4-mini: fused q | k | v and gate | up tensors, RoPE on the halves of the
//! first `rope.dimension_count` dimensions of each head (partial rotary), and LongRoPE: the
//! frequencies are divided by `rope_factors_long` when the session's context is longer than
//! `rope.scaling.original_context_length`, by `rope_factors_short` otherwise, and
//! `rope.scaling.attn_factor` scales the rotated q and k. The choice follows the session (its
//! cache's capacity), as llama.cpp's follows the context size, not the model.
//! (`attention.sliding_window` is ignored, as llama.cpp ignores it.)

use crate::error::Result;

use super::super::blocks::attention::{Attention, AttentionSpec};
use super::super::blocks::ffn::{Activation, Glu};
use super::super::blocks::norm::RmsNorm;
use super::super::blocks::rope::{Rope, RopeId, RopeStyle};
use super::super::blocks::{self, Pass};
use super::super::hparams::Hparams;
use super::super::state::LayerCache;
use super::super::weights::Matrix;
use super::Arch;

const LONG: RopeId = 0;
const SHORT: RopeId = 1;

pub(super) fn load(h: &Hparams) -> Result<Arch> {
    let rope = Rope::read(h, RopeStyle::Halves, h.head_dim()?)?;
    let long = rope.clone().with_factors(h.f, "rope_factors_long.weight")?;
    let short = rope.with_factors(h.f, "rope_factors_short.weight")?;
    let original_context = h.usize_or("rope.scaling.original_context_length", h.config.context_length)?;
    let n_ff = h.per_layer("feed_forward_length", None)?;
    let mut layers: Vec<Box<dyn blocks::Layer>> = Vec::with_capacity(h.config.n_layer);
    for (il, (heads, &ff)) in h.heads()?.into_iter().zip(&n_ff).enumerate() {
        // The fused tensor's query part is exactly the stream's width.
        if heads.q_dim() != h.config.n_embd {
            return Err(h.corrupt("attention.head_count", heads.n_head, "queries not as wide as the stream"));
        }
        layers.push(Box::new(Layer {
            attn_norm: RmsNorm::layer(h, il, "attn_norm")?,
            attn: Attention::load(h, il, &AttentionSpec { fused_qkv: true, ..AttentionSpec::new(heads) })?,
            original_context,
            ffn_norm: RmsNorm::layer(h, il, "ffn_norm")?,
            ffn: Glu::load_fused(h, il, ff, Activation::Silu)?,
        }));
    }
    Arch::plain(h, layers, vec![long, short])
}

struct Layer {
    attn_norm: RmsNorm,
    attn: Attention,
    original_context: usize,
    ffn_norm: RmsNorm,
    ffn: Glu,
}

impl blocks::Layer for Layer {
    fn forward(&self, p: &mut Pass<'_>) {
        let rope = if p.n_ctx() > self.original_context { LONG } else { SHORT };
        p.norm(&self.attn_norm);
        self.attn.forward(p, Some(rope));
        p.add_to_stream();
        p.norm(&self.ffn_norm);
        self.ffn.forward(p);
        p.add_to_stream();
    }

    fn cache(&self) -> LayerCache {
        self.attn.cache()
    }

    fn matrices(&mut self) -> Vec<&mut Matrix> {
        self.attn.matrices().into_iter().chain(self.ffn.matrices()).collect()
    }
}
