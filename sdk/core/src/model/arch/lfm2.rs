//! LFM2 / LFM2.5 (Liquid): a hybrid of gated short-convolution layers and a few grouped-query
//! attention layers (a per-layer `attention.head_count_kv` of 0 marks a convolution layer),
//! each followed by a SwiGLU feed-forward. Attention has per-head q and k norms and NEOX
//! rotation; the convolution reads the last `shortconv.l_cache` tokens. The final norm is
//! `token_embd_norm`, and the LM head is tied to the embedding.

use crate::error::Result;

use super::super::blocks::attention::{Attention, AttentionSpec};
use super::super::blocks::ffn::{Activation, Glu};
use super::super::blocks::hybrid::{HybridLayer, Mixer};
use super::super::blocks::norm::RmsNorm;
use super::super::blocks::rope::{Rope, RopeStyle};
use super::super::blocks::shortconv::ShortConv;
use super::super::blocks::{self, LogitMap};
use super::super::hparams::Hparams;
use super::Arch;

/// Longest convolution the loader accepts (LFM2 uses 3).
const MAX_KERNEL: usize = 64;

pub(super) fn load(h: &Hparams) -> Result<Arch> {
    let kernel = h.positive("shortconv.l_cache")?;
    if kernel > MAX_KERNEL {
        return Err(h.corrupt("shortconv.l_cache", kernel, "longer than the convolutions this crate runs"));
    }
    let rope = Rope::read(h, RopeStyle::Halves, h.head_dim()?)?;
    let n_ff = h.per_layer("feed_forward_length", None)?;
    let mut layers: Vec<Box<dyn blocks::Layer>> = Vec::with_capacity(h.config.n_layer);
    for (il, (heads, &ff)) in h.attention_layers()?.into_iter().zip(&n_ff).enumerate() {
        let mixer = match heads {
            Some(heads) => {
                let spec = AttentionSpec { qk_norm: true, ..AttentionSpec::new(heads) };
                Mixer::Attention(Attention::load(h, il, &spec)?)
            }
            None => Mixer::Conv(ShortConv::load(h, il, kernel)?),
        };
        layers.push(Box::new(HybridLayer {
            attn_norm: RmsNorm::layer(h, il, "attn_norm")?,
            mixer,
            ffn_norm: RmsNorm::layer(h, il, "ffn_norm")?,
            ffn: Glu::load(h, il, ff, Activation::Silu)?,
        }));
    }
    let output_norm = RmsNorm::load(h.f, "token_embd_norm.weight", h.config.n_embd, h.config.rms_eps)?;
    Ok(Arch {
        layers,
        prelude: None,
        ropes: vec![rope],
        embedding_scale: 1.0,
        output_norm,
        logits: LogitMap::default(),
    })
}
