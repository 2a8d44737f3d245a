//! The architectures, one file each: its hyper-parameters (`<arch>.*` keys), its tensors, and
//! its layers as calls of the shared blocks. [`ARCHITECTURES`] lists them by their
//! `general.architecture` name.

mod gemma3;
mod gemma4;
mod granite;
mod lfm2;
mod llama;
mod phi3;
mod qwen2;
mod qwen3;
mod qwen35;
mod smollm3;

use crate::error::{Error, Result};

use super::blocks::norm::RmsNorm;
use super::blocks::rope::Rope;
use super::blocks::{Layer, LogitMap};
use super::hparams::Hparams;

/// Builds an architecture's part of a model from a file whose common keys are read.
type Loader = fn(&Hparams) -> Result<Arch>;

/// Every architecture this crate runs.
const ARCHITECTURES: &[(&str, Loader)] = &[
    ("llama", llama::load),
    ("qwen2", qwen2::load),
    ("gemma3", gemma3::load),
    ("gemma4", gemma4::load),
    ("qwen3", qwen3::load),
    ("smollm3", smollm3::load),
    ("phi3", phi3::load),
    ("granite", granite::load),
    ("lfm2", lfm2::load),
    ("qwen35", qwen35::load),
];

/// What a loader builds: the layers, and what surrounds them in the forward pass (the token
/// embedding and the LM head are the same tensors for every architecture; `Model` loads them).
pub(crate) struct Arch {
    pub layers: Vec<Box<dyn Layer>>,
    /// Runs on the embedded batch before the first layer (Gemma 4's per-layer inputs); it
    /// keeps nothing in the cache.
    pub prelude: Option<Box<dyn Layer>>,
    /// The rotary embeddings the layers refer to by index.
    pub ropes: Vec<Rope>,
    /// Multiplies the token embedding rows (Gemma: √width; Granite: `embedding_scale`).
    pub embedding_scale: f32,
    /// Normalises the last layer's output for the LM head.
    pub output_norm: RmsNorm,
    pub logits: LogitMap,
}

impl Arch {
    /// `layers` with the usual surroundings: `output_norm.weight`, no embedding scale, plain logits.
    fn plain(h: &Hparams, layers: Vec<Box<dyn Layer>>, ropes: Vec<Rope>) -> Result<Arch> {
        Ok(Arch {
            layers,
            prelude: None,
            ropes,
            embedding_scale: 1.0,
            output_norm: output_norm(h)?,
            logits: LogitMap::default(),
        })
    }
}

/// The final norm most architectures have.
fn output_norm(h: &Hparams) -> Result<RmsNorm> {
    RmsNorm::load(h.f, "output_norm.weight", h.config.n_embd, h.config.rms_eps)
}

/// The entry of `name`, as its static name and loader.
pub(crate) fn find(name: &str) -> Result<(&'static str, Loader)> {
    ARCHITECTURES
        .iter()
        .find(|(n, _)| *n == name)
        .copied()
        .ok_or_else(|| Error::UnsupportedArchitecture { name: name.to_owned(), supported: names() })
}

/// The names of every supported architecture, for messages.
pub fn names() -> String {
    ARCHITECTURES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}
