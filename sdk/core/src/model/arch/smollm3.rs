//! SmolLM3: Llama's layout where every fourth layer ((il + 1) % 4 == 0) has no rotary
//! embedding (NoPE). The step is fixed in llama.cpp, not a GGUF key.

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

/// Layers `il` with `(il + 1) % NO_ROPE_STEP == 0` attend without positions.
const NO_ROPE_STEP: usize = 4;

pub(super) fn load(h: &Hparams) -> Result<Arch> {
    let head_dim = h.head_dim()?;
    let rope = Rope::read(h, RopeStyle::Interleaved, head_dim)?;
    if rope.dims != head_dim {
        return Err(h.corrupt("rope.dimension_count", rope.dims, "differs from the head size"));
    }
    let n_ff = h.per_layer("feed_forward_length", None)?;
    let mut layers: Vec<Box<dyn blocks::Layer>> = Vec::with_capacity(h.config.n_layer);
    for (il, (heads, &ff)) in h.heads()?.into_iter().zip(&n_ff).enumerate() {
        layers.push(Box::new(Layer {
            attn_norm: RmsNorm::layer(h, il, "attn_norm")?,
            attn: Attention::load(h, il, &AttentionSpec::new(heads))?,
            rope: ((il + 1) % NO_ROPE_STEP != 0).then_some(0),
            ffn_norm: RmsNorm::layer(h, il, "ffn_norm")?,
            ffn: Glu::load(h, il, ff, Activation::Silu)?,
        }));
    }
    Arch::plain(h, layers, vec![rope])
}

struct Layer {
    attn_norm: RmsNorm,
    attn: Attention,
    /// `None` on the NoPE layers.
    rope: Option<RopeId>,
    ffn_norm: RmsNorm,
    ffn: Glu,
}

impl blocks::Layer for Layer {
    fn forward(&self, p: &mut Pass<'_>) {
        p.norm(&self.attn_norm);
        self.attn.forward(p, self.rope);
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
