//! Gemma 3: five sliding-window layers (their own RoPE base, 10000) for every global one,
//! per-head q and k norms, norms after each block as well as before, GeGLU, and token
//! embeddings scaled by √width.

use crate::error::Result;

use super::super::blocks::attention::{Attention, AttentionSpec};
use super::super::blocks::ffn::{Activation, Glu};
use super::super::blocks::norm::RmsNorm;
use super::super::blocks::rope::{Rope, RopeId, RopeStyle};
use super::super::blocks::{self, LogitMap, Pass};
use super::super::hparams::Hparams;
use super::super::state::LayerCache;
use super::super::weights::Matrix;
use super::{output_norm, Arch};

/// Layers per pattern of local (sliding-window) layers and one global layer.
const PATTERN: usize = 6;
const GLOBAL: RopeId = 0;
const LOCAL: RopeId = 1;

pub(super) fn load(h: &Hparams) -> Result<Arch> {
    let global = Rope::read(h, RopeStyle::Halves, h.head_dim()?)?;
    let local = global.with_base(10_000.0)?;
    let window = h.usize("attention.sliding_window")?.max(1);
    let n_ff = h.per_layer("feed_forward_length", None)?;
    let mut layers: Vec<Box<dyn blocks::Layer>> = Vec::with_capacity(h.config.n_layer);
    for (il, (heads, &ff)) in h.heads()?.into_iter().zip(&n_ff).enumerate() {
        let is_local = il % PATTERN < PATTERN - 1;
        let spec = AttentionSpec { qk_norm: true, window: is_local.then_some(window), ..AttentionSpec::new(heads) };
        layers.push(Box::new(Layer::load(h, il, &spec, if is_local { LOCAL } else { GLOBAL }, ff)?));
    }
    Ok(Arch {
        layers,
        prelude: None,
        ropes: vec![global, local],
        embedding_scale: (h.config.n_embd as f32).sqrt(),
        output_norm: output_norm(h)?,
        logits: LogitMap::default(),
    })
}

/// Gemma's layer: attention and GeGLU, each between a norm before and a norm after (Gemma 4's
/// layers are this plus their per-layer embedding).
pub(super) struct Layer {
    attn_norm: RmsNorm,
    attn: Attention,
    rope: RopeId,
    post_attn_norm: RmsNorm,
    ffn_norm: RmsNorm,
    ffn: Glu,
    post_ffn_norm: RmsNorm,
}

impl Layer {
    pub(super) fn load(h: &Hparams, il: usize, spec: &AttentionSpec, rope: RopeId, ff: usize) -> Result<Layer> {
        Ok(Layer {
            attn_norm: RmsNorm::layer(h, il, "attn_norm")?,
            attn: Attention::load(h, il, spec)?,
            rope,
            post_attn_norm: RmsNorm::layer(h, il, "post_attention_norm")?,
            ffn_norm: RmsNorm::layer(h, il, "ffn_norm")?,
            ffn: Glu::load(h, il, ff, Activation::GeluTanh)?,
            post_ffn_norm: RmsNorm::layer(h, il, "post_ffw_norm")?,
        })
    }
}

impl blocks::Layer for Layer {
    fn forward(&self, p: &mut Pass<'_>) {
        p.norm(&self.attn_norm);
        self.attn.forward(p, Some(self.rope));
        p.post_norm(&self.post_attn_norm);
        p.add_to_stream();
        p.norm(&self.ffn_norm);
        self.ffn.forward(p);
        p.post_norm(&self.post_ffn_norm);
        p.add_to_stream();
    }

    fn cache(&self) -> LayerCache {
        self.attn.cache()
    }

    fn matrices(&mut self) -> Vec<&mut Matrix> {
        self.attn.matrices().into_iter().chain(self.ffn.matrices()).collect()
    }
}
