//! Granite (3.x dense): Llama's layout with four scales from the file: token embeddings times
//! `embedding_scale`, each block's output times `residual_scale` before it joins the stream,
//! `attention.scale` instead of 1/√head_dim, and logits divided by `logit_scale`.

use crate::error::Result;

use super::super::blocks::attention::{Attention, AttentionSpec};
use super::super::blocks::ffn::{Activation, Glu};
use super::super::blocks::norm::RmsNorm;
use super::super::blocks::rope::{Rope, RopeStyle};
use super::super::blocks::{self, LogitMap, Pass};
use super::super::hparams::Hparams;
use super::super::state::LayerCache;
use super::super::weights::Matrix;
use super::{output_norm, Arch};

pub(super) fn load(h: &Hparams) -> Result<Arch> {
    let head_dim = h.head_dim()?;
    let rope = Rope::read(h, RopeStyle::Interleaved, head_dim)?;
    if rope.dims != head_dim {
        return Err(h.corrupt("rope.dimension_count", rope.dims, "differs from the head size"));
    }
    let rope = rope.with_factors(h.f, "rope_freqs.weight")?;
    // `rope.scaling.finetuned` = false turns the rotation off (llama.cpp's reading of it).
    let rotate = h.bool_or("rope.scaling.finetuned", true)?;
    let logit_scale = h.f32("logit_scale")?;
    if logit_scale == 0.0 {
        return Err(h.corrupt("logit_scale", logit_scale, "logits would be divided by zero"));
    }
    // Zero (or absent) means "none" for the other three, as in llama.cpp.
    let (embedding_scale, residual_scale, attention_scale) =
        (h.f32_or("embedding_scale", 0.0)?, h.f32_or("residual_scale", 0.0)?, h.f32_or("attention.scale", 0.0)?);
    let n_ff = h.per_layer("feed_forward_length", None)?;
    let mut layers: Vec<Box<dyn blocks::Layer>> = Vec::with_capacity(h.config.n_layer);
    for (il, (heads, &ff)) in h.heads()?.into_iter().zip(&n_ff).enumerate() {
        let mut spec = AttentionSpec::new(heads);
        if attention_scale != 0.0 {
            spec.scale = attention_scale;
        }
        layers.push(Box::new(Layer {
            attn_norm: RmsNorm::layer(h, il, "attn_norm")?,
            attn: Attention::load(h, il, &spec)?,
            rotate,
            ffn_norm: RmsNorm::layer(h, il, "ffn_norm")?,
            ffn: Glu::load(h, il, ff, Activation::Silu)?,
            residual_scale: (residual_scale != 0.0).then_some(residual_scale),
        }));
    }
    Ok(Arch {
        layers,
        prelude: None,
        ropes: vec![rope],
        embedding_scale: if embedding_scale != 0.0 { embedding_scale } else { 1.0 },
        output_norm: output_norm(h)?,
        logits: LogitMap { scale: 1.0 / logit_scale, softcap: None },
    })
}

struct Layer {
    attn_norm: RmsNorm,
    attn: Attention,
    rotate: bool,
    ffn_norm: RmsNorm,
    ffn: Glu,
    residual_scale: Option<f32>,
}

impl Layer {
    fn join(&self, p: &mut Pass<'_>) {
        match self.residual_scale {
            Some(s) => p.add_scaled_to_stream(s),
            None => p.add_to_stream(),
        }
    }
}

impl blocks::Layer for Layer {
    fn forward(&self, p: &mut Pass<'_>) {
        p.norm(&self.attn_norm);
        self.attn.forward(p, self.rotate.then_some(0));
        self.join(p);
        p.norm(&self.ffn_norm);
        self.ffn.forward(p);
        self.join(p);
    }

    fn cache(&self) -> LayerCache {
        self.attn.cache()
    }

    fn matrices(&mut self) -> Vec<&mut Matrix> {
        self.attn.matrices().into_iter().chain(self.ffn.matrices()).collect()
    }
}
