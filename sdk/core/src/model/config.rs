//! Hyper-parameters, read from the GGUF metadata of each architecture (`<arch>.*` keys).

use crate::error::{Error, Result};
use crate::gguf::GgufFile;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Llama,
    Qwen2,
    Gemma3,
}

impl Architecture {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "llama" => Ok(Architecture::Llama),
            "qwen2" => Ok(Architecture::Qwen2),
            "gemma3" => Ok(Architecture::Gemma3),
            other => Err(Error::UnsupportedArchitecture(other.to_owned())),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Architecture::Llama => "llama",
            Architecture::Qwen2 => "qwen2",
            Architecture::Gemma3 => "gemma3",
        }
    }
}

/// How rotary embedding pairs dimensions: adjacent pairs (llama's GGUF layout) or halves (NeoX).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    Interleaved,
    Halves,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// SwiGLU: silu(gate) * up.
    Silu,
    /// GeGLU with the tanh approximation of GELU.
    GeluTanh,
}

/// Rotary embedding parameters of one layer kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rope {
    pub base: f32,
    /// Positions are multiplied by this (linear scaling).
    pub scale: f32,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub arch: Architecture,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    /// Rotated dimensions per head (≤ head_dim).
    pub rope_dim: usize,
    pub n_ff: usize,
    pub vocab_size: usize,
    pub context_length: usize,
    pub rms_eps: f32,
    pub rope_style: RopeStyle,
    pub rope_global: Rope,
    /// Rope of sliding-window layers (same as global where there are none).
    pub rope_local: Rope,
    /// Sliding window length of local layers, if the model has them.
    pub sliding_window: Option<usize>,
    /// Per layer: true when it attends only within `sliding_window`.
    pub layer_is_local: Vec<bool>,
    pub activation: Activation,
    /// Multiplies the token embedding (Gemma: sqrt(n_embd)).
    pub embedding_scale: f32,
    /// Multiplies q·k.
    pub attention_scale: f32,
    pub has_qkv_bias: bool,
    pub has_qk_norm: bool,
    pub has_post_norms: bool,
}

impl Config {
    pub fn from_gguf(f: &GgufFile) -> Result<Config> {
        let arch = Architecture::from_name(f.architecture()?)?;
        let a = arch.name();
        let key = |k: &str| format!("{a}.{k}");
        let n_embd = f.get_usize(&key("embedding_length"))?;
        let n_layer = f.get_usize(&key("block_count"))?;
        let n_head = f.get_usize(&key("attention.head_count"))?;
        let n_head_kv = match f.get(&key("attention.head_count_kv")) {
            Some(_) => f.get_usize(&key("attention.head_count_kv"))?,
            None => n_head,
        };
        if n_head == 0 || n_head_kv == 0 || n_head % n_head_kv != 0 || n_layer == 0 || n_embd == 0 {
            return Err(Error::Corrupt(format!(
                "impossible attention shape: {n_head} heads, {n_head_kv} kv heads, {n_layer} layers, width {n_embd}"
            )));
        }
        let head_dim = match f.get(&key("attention.key_length")) {
            Some(_) => f.get_usize(&key("attention.key_length"))?,
            None => n_embd / n_head,
        };
        if f.get(&key("attention.value_length")).is_some() {
            let v = f.get_usize(&key("attention.value_length"))?;
            if v != head_dim {
                return Err(Error::Corrupt(format!("value length {v} differs from key length {head_dim}")));
            }
        }
        let rope_dim = match f.get(&key("rope.dimension_count")) {
            Some(_) => f.get_usize(&key("rope.dimension_count"))?,
            None => head_dim,
        };
        if head_dim == 0 || head_dim % 2 != 0 || rope_dim > head_dim || rope_dim % 2 != 0 || head_dim > 1024 {
            return Err(Error::Corrupt(format!("impossible head size {head_dim} (rotated {rope_dim})")));
        }
        let n_ff = f.get_usize(&key("feed_forward_length"))?;
        let context_length = f.get_usize(&key("context_length"))?;
        let rms_eps = f.get_f32(&key("attention.layer_norm_rms_epsilon"))?;
        let base = match f.get(&key("rope.freq_base")) {
            Some(_) => f.get_f32(&key("rope.freq_base"))?,
            None => 10_000.0,
        };
        let scale = match (f.get(&key("rope.scaling.type")), f.get(&key("rope.scaling.factor"))) {
            (Some(t), Some(_)) if t.as_str() == Some("linear") => 1.0 / f.get_f32(&key("rope.scaling.factor"))?,
            _ => 1.0,
        };
        let rope_global = Rope { base, scale };
        // Vocabulary size: the token list is authoritative; `<arch>.vocab_size` is optional.
        let vocab_size = f.get_array("tokenizer.ggml.tokens")?.len as usize;

        let mut c = Config {
            arch,
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            head_dim,
            rope_dim,
            n_ff,
            vocab_size,
            context_length,
            rms_eps,
            rope_style: RopeStyle::Halves,
            rope_global,
            rope_local: rope_global,
            sliding_window: None,
            layer_is_local: vec![false; n_layer],
            activation: Activation::Silu,
            embedding_scale: 1.0,
            attention_scale: 1.0 / (head_dim as f32).sqrt(),
            has_qkv_bias: false,
            has_qk_norm: false,
            has_post_norms: false,
        };
        match arch {
            Architecture::Llama => {
                c.rope_style = RopeStyle::Interleaved;
            }
            Architecture::Qwen2 => {
                c.has_qkv_bias = true;
            }
            Architecture::Gemma3 => {
                // Gemma 3: five sliding-window layers then one global, local rope base 10k.
                let window = f.get_usize(&key("attention.sliding_window"))?;
                c.sliding_window = Some(window.max(1));
                c.layer_is_local = (0..n_layer).map(|i| i % 6 < 5).collect();
                c.rope_local = Rope { base: 10_000.0, scale: 1.0 };
                c.activation = Activation::GeluTanh;
                c.embedding_scale = (n_embd as f32).sqrt();
                c.has_qk_norm = true;
                c.has_post_norms = true;
            }
        }
        Ok(c)
    }

    pub fn q_dim(&self) -> usize {
        self.n_head * self.head_dim
    }

    pub fn kv_dim(&self) -> usize {
        self.n_head_kv * self.head_dim
    }
}
