//! The layer of the hybrid models (LFM2, Qwen3.5): a token mixer that is attention, a short
//! convolution or Gated DeltaNet, then a gated feed-forward, each after its own RMS norm and
//! added to the stream.

use super::super::state::LayerCache;
use super::super::weights::Matrix;
use super::attention::Attention;
use super::deltanet::GatedDeltaNet;
use super::ffn::Glu;
use super::norm::RmsNorm;
use super::shortconv::ShortConv;
use super::{Layer, Pass};

/// What mixes tokens in a layer.
pub(crate) enum Mixer {
    /// Attention rotated by the model's first rotary embedding.
    Attention(Attention),
    Conv(ShortConv),
    DeltaNet(GatedDeltaNet),
}

pub(crate) struct HybridLayer {
    pub attn_norm: RmsNorm,
    pub mixer: Mixer,
    pub ffn_norm: RmsNorm,
    pub ffn: Glu,
}

impl Layer for HybridLayer {
    fn forward(&self, p: &mut Pass<'_>) {
        p.norm(&self.attn_norm);
        match &self.mixer {
            Mixer::Attention(a) => a.forward(p, Some(0)),
            Mixer::Conv(c) => c.forward(p),
            Mixer::DeltaNet(g) => g.forward(p),
        }
        p.add_to_stream();
        p.norm(&self.ffn_norm);
        self.ffn.forward(p);
        p.add_to_stream();
    }

    fn cache(&self) -> LayerCache {
        match &self.mixer {
            Mixer::Attention(a) => a.cache(),
            Mixer::Conv(c) => LayerCache::Conv(c.shape()),
            Mixer::DeltaNet(g) => LayerCache::Conv(g.shape()),
        }
    }

    fn matrices(&mut self) -> Vec<&mut Matrix> {
        let mixer: Vec<&mut Matrix> = match &mut self.mixer {
            Mixer::Attention(a) => a.matrices(),
            Mixer::Conv(c) => c.matrices().into_iter().collect(),
            Mixer::DeltaNet(g) => g.matrices().into_iter().collect(),
        };
        mixer.into_iter().chain(self.ffn.matrices()).collect()
    }
}
