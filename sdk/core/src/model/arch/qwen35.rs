//! Qwen3.5 (dense): Gated DeltaNet layers with a full-attention layer after every few (the
//! `attention.recurrent_layers` flags, else every `full_attention_interval`-th layer is
//! attention). Attention has per-head q and k norms, an output gate carried by `attn_q`, and
//! M-RoPE over `rope.dimension_count` dimensions, which for text (every section at the token's
//! position) is NEOX rotation. Each layer ends with a SwiGLU feed-forward after
//! `post_attention_norm`; the LM head may be tied to the embedding.

use crate::error::Result;

use super::super::blocks;
use super::super::blocks::attention::{Attention, AttentionSpec};
use super::super::blocks::deltanet::GatedDeltaNet;
use super::super::blocks::ffn::{Activation, Glu};
use super::super::blocks::hybrid::{HybridLayer, Mixer};
use super::super::blocks::norm::RmsNorm;
use super::super::blocks::rope::{Rope, RopeStyle};
use super::super::hparams::Hparams;
use super::Arch;

pub(super) fn load(h: &Hparams) -> Result<Arch> {
    let rope = Rope::read(h, RopeStyle::Halves, h.head_dim()?)?;
    let n_ff = h.per_layer("feed_forward_length", None)?;
    let recurrent = recurrent_layers(h)?;
    let mut layers: Vec<Box<dyn blocks::Layer>> = Vec::with_capacity(h.config.n_layer);
    for (il, ((heads, &ff), &linear)) in h.heads()?.into_iter().zip(&n_ff).zip(&recurrent).enumerate() {
        let mixer = match linear {
            true => Mixer::DeltaNet(GatedDeltaNet::load(h, il)?),
            false => {
                let spec = AttentionSpec { qk_norm: true, output_gate: true, ..AttentionSpec::new(heads) };
                Mixer::Attention(Attention::load(h, il, &spec)?)
            }
        };
        layers.push(Box::new(HybridLayer {
            attn_norm: RmsNorm::layer(h, il, "attn_norm")?,
            mixer,
            ffn_norm: RmsNorm::layer(h, il, "post_attention_norm")?,
            ffn: Glu::load(h, il, ff, Activation::Silu)?,
        }));
    }
    Arch::plain(h, layers, vec![rope])
}

/// Which layers are Gated DeltaNet layers: the file's flags, or all but every
/// `full_attention_interval`-th (default 4, as llama.cpp reads it).
fn recurrent_layers(h: &Hparams) -> Result<Vec<bool>> {
    if h.has("attention.recurrent_layers") {
        return Ok(h.per_layer("attention.recurrent_layers", None)?.into_iter().map(|v| v != 0).collect());
    }
    let interval = h.usize_or("full_attention_interval", 4)?;
    if interval == 0 {
        return Err(h.corrupt("full_attention_interval", 0, "not positive"));
    }
    Ok((0..h.config.n_layer).map(|i| (i + 1) % interval != 0).collect())
}
