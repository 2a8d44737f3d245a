//! Qwen2 and Qwen2.5: Llama's layout with biases on the q, k and v projections and RoPE on
//! the halves of each head.

use crate::error::Result;

use super::super::blocks::attention::{Attention, AttentionSpec};
use super::super::blocks::ffn::{Activation, Glu};
use super::super::blocks::norm::RmsNorm;
use super::super::blocks::rope::{Rope, RopeStyle};
use super::super::blocks::{self, Pass};
use super::super::hparams::Hparams;
use super::super::state::LayerCache;
use super::super::weights::Matrix;
use super::Arch;

pub(super) fn load(h: &Hparams) -> Result<Arch> {
    let rope = Rope::read(h, RopeStyle::Halves, h.head_dim()?)?;
    let n_ff = h.per_layer("feed_forward_length", None)?;
    let mut layers: Vec<Box<dyn blocks::Layer>> = Vec::with_capacity(h.config.n_layer);
    for (il, (heads, &ff)) in h.heads()?.into_iter().zip(&n_ff).enumerate() {
        let spec = AttentionSpec { biases_required: true, ..AttentionSpec::new(heads) };
        layers.push(Box::new(Layer {
            attn_norm: RmsNorm::layer(h, il, "attn_norm")?,
            attn: Attention::load(h, il, &spec)?,
            ffn_norm: RmsNorm::layer(h, il, "ffn_norm")?,
            ffn: Glu::load(h, il, ff, Activation::Silu)?,
        }));
    }
    Arch::plain(h, layers, vec![rope])
}

struct Layer {
    attn_norm: RmsNorm,
    attn: Attention,
    ffn_norm: RmsNorm,
    ffn: Glu,
}

impl blocks::Layer for Layer {
    fn forward(&self, p: &mut Pass<'_>) {
        p.norm(&self.attn_norm);
        self.attn.forward(p, Some(0));
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
