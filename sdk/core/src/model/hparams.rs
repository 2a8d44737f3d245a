//! Hyper-parameters from the GGUF metadata (`<arch>.*` keys).
//!
//! Metadata is untrusted: a count read here sizes vectors, caches and loops later on, so every
//! count is checked against what the file can hold before anything is allocated from it (the
//! layer count against the tensors present; widths against the tensors' shapes, which the
//! loaders check before sizing anything by them), and impossible values (zero, odd rotary
//! dimensions, head sizes that do not divide, products that overflow) are a typed error here,
//! at load, instead of a panic in the first forward pass.

use crate::error::{Error, Result};
use crate::gguf::GgufFile;

/// What every architecture has: the model's public shape.
#[derive(Debug, Clone)]
pub struct Config {
    /// `general.architecture`.
    pub arch: &'static str,
    pub n_embd: usize,
    pub n_layer: usize,
    pub vocab_size: usize,
    /// Context length the model was trained for.
    pub context_length: usize,
    pub rms_eps: f32,
}

/// Longest head the attention kernels are built for.
const MAX_HEAD_DIM: usize = 1024;

/// Reads `<arch>.<key>` values of one file.
pub(crate) struct Hparams<'f> {
    pub f: &'f GgufFile,
    pub arch: &'static str,
    pub config: Config,
}

impl<'f> Hparams<'f> {
    /// The keys every architecture requires, checked.
    pub fn read(f: &'f GgufFile, arch: &'static str) -> Result<Self> {
        let mut h = Hparams {
            f,
            arch,
            config: Config { arch, n_embd: 0, n_layer: 0, vocab_size: 0, context_length: 0, rms_eps: 0.0 },
        };
        let n_embd = h.positive("embedding_length")?;
        let n_layer = h.positive("block_count")?;
        // Each layer has tensors of its own: a layer count above the tensor count cannot be
        // true, and would otherwise size per-layer tables before any tensor is looked up.
        let tensors = f.tensors().len();
        if n_layer > tensors {
            return Err(h.corrupt(
                "block_count",
                n_layer,
                &format!("more layers than the {tensors} tensors in the file"),
            ));
        }
        let context_length = h.usize("context_length")?;
        let rms_eps = h.f32("attention.layer_norm_rms_epsilon")?;
        if rms_eps < 0.0 {
            return Err(h.corrupt("attention.layer_norm_rms_epsilon", rms_eps, "negative"));
        }
        // The token list is authoritative; `<arch>.vocab_size` is optional.
        let vocab_size = f.get_array("tokenizer.ggml.tokens")?.len as usize;
        h.config = Config { arch, n_embd, n_layer, vocab_size, context_length, rms_eps };
        Ok(h)
    }

    pub fn key(&self, k: &str) -> String {
        format!("{}.{k}", self.arch)
    }

    pub fn has(&self, k: &str) -> bool {
        self.f.get(&self.key(k)).is_some()
    }

    pub fn usize(&self, k: &str) -> Result<usize> {
        self.f.get_usize(&self.key(k))
    }

    pub(crate) fn usize_or(&self, k: &str, default: usize) -> Result<usize> {
        if self.has(k) {
            self.usize(k)
        } else {
            Ok(default)
        }
    }

    /// A required count that must not be zero.
    pub(crate) fn positive(&self, k: &str) -> Result<usize> {
        match self.usize(k)? {
            0 => Err(self.corrupt(k, 0, "zero")),
            n => Ok(n),
        }
    }

    /// A finite number.
    pub fn f32(&self, k: &str) -> Result<f32> {
        let v = self.f.get_f32(&self.key(k))?;
        if !v.is_finite() {
            return Err(self.corrupt(k, v, "not finite"));
        }
        Ok(v)
    }

    pub(crate) fn f32_or(&self, k: &str, default: f32) -> Result<f32> {
        if self.has(k) {
            self.f32(k)
        } else {
            Ok(default)
        }
    }

    pub(crate) fn bool_or(&self, k: &str, default: bool) -> Result<bool> {
        if self.has(k) {
            self.f.get_bool(&self.key(k))
        } else {
            Ok(default)
        }
    }

    /// A count per layer: one value for all, or an array of one per layer (llama.cpp accepts
    /// either for widths and head counts). `default` applies when the key is absent.
    pub(crate) fn per_layer(&self, k: &str, default: Option<usize>) -> Result<Vec<usize>> {
        let n_layer = self.config.n_layer;
        let key = self.key(k);
        let Some(value) = self.f.get(&key) else {
            return match default {
                Some(d) => Ok(vec![d; n_layer]),
                None => Err(Error::MissingMetadata(key)),
            };
        };
        let Some(array) = value.as_array() else {
            return Ok(vec![self.usize(k)?; n_layer]);
        };
        if array.len != n_layer as u64 {
            return Err(Error::Corrupt(format!("`{key}` has {} values for {n_layer} layers", array.len)));
        }
        let values = array.to_i64_vec(self.f.bytes()).ok_or_else(|| Error::MetadataType {
            key: key.clone(),
            expected: "integers",
            found: "array".into(),
        })?;
        values
            .into_iter()
            .map(|v| usize::try_from(v).map_err(|_| Error::Corrupt(format!("`{key}` holds {v}"))))
            .collect()
    }

    /// Size of an attention head: `attention.key_length`, by default the width over the
    /// heads (llama.cpp's default); `attention.value_length`, if given, must be the same.
    pub(crate) fn head_dim(&self) -> Result<usize> {
        let n_embd = self.config.n_embd;
        let head_dim = if self.has("attention.key_length") {
            self.usize("attention.key_length")?
        } else {
            // The default divides by the first layer's heads, as llama.cpp's does.
            let n_head = self.per_layer("attention.head_count", None)?.first().copied().unwrap_or(0);
            if n_head == 0 || n_embd % n_head != 0 {
                return Err(Error::Corrupt(format!(
                    "`{}` = {n_head} does not divide the width {n_embd}, and `{}` is absent",
                    self.key("attention.head_count"),
                    self.key("attention.key_length")
                )));
            }
            n_embd / n_head
        };
        let value_length = self.usize_or("attention.value_length", head_dim)?;
        if value_length != head_dim {
            return Err(self.corrupt("attention.value_length", value_length, "differs from the key length"));
        }
        if head_dim == 0 || head_dim % 2 != 0 || head_dim > MAX_HEAD_DIM {
            return Err(self.corrupt("attention.key_length", head_dim, "not an even head size up to 1024"));
        }
        Ok(head_dim)
    }

    /// The attention geometry of every layer: query heads, KV heads (as many by default) and
    /// [`head_dim`](Self::head_dim), checked.
    pub fn heads(&self) -> Result<Vec<HeadShape>> {
        self.layer_heads(false)?.into_iter().map(|h| h.ok_or_else(|| self.no_kv_heads())).collect()
    }

    /// The same for a hybrid model whose layers without KV heads (`attention.head_count_kv`
    /// 0 in the per-layer array) are not attention layers: `None` for those.
    pub(crate) fn attention_layers(&self) -> Result<Vec<Option<HeadShape>>> {
        self.layer_heads(true)
    }

    fn no_kv_heads(&self) -> Error {
        self.corrupt("attention.head_count_kv", 0, "a layer without KV heads")
    }

    fn layer_heads(&self, hybrid: bool) -> Result<Vec<Option<HeadShape>>> {
        let head_dim = self.head_dim()?;
        let n_head = self.per_layer("attention.head_count", None)?;
        let n_head_kv = self.per_layer("attention.head_count_kv", n_head.first().copied())?;
        n_head
            .iter()
            .zip(&n_head_kv)
            .map(|(&n_head, &n_head_kv)| {
                if hybrid && n_head_kv == 0 {
                    return Ok(None);
                }
                if n_head == 0 || n_head_kv == 0 || n_head % n_head_kv != 0 {
                    return Err(Error::Corrupt(format!(
                        "`{}` = {n_head} and `{}` = {n_head_kv}: query heads must share the KV heads evenly",
                        self.key("attention.head_count"),
                        self.key("attention.head_count_kv")
                    )));
                }
                // Widths are compared with tensor shapes later: they must exist first.
                if n_head.checked_mul(head_dim).is_none() {
                    return Err(self.corrupt("attention.head_count", n_head, "heads of this size overflow"));
                }
                Ok(Some(HeadShape { n_head, n_head_kv, head_dim }))
            })
            .collect()
    }

    /// Rotated dimensions per head (default: all of them): even, non-zero, at most `head_dim`.
    pub(crate) fn rope_dims(&self, head_dim: usize) -> Result<usize> {
        let dims = self.usize_or("rope.dimension_count", head_dim)?;
        if dims == 0 || dims % 2 != 0 || dims > head_dim {
            return Err(self.corrupt("rope.dimension_count", dims, &format!("not an even count in 2..={head_dim}")));
        }
        Ok(dims)
    }

    pub fn corrupt(&self, k: &str, value: impl std::fmt::Display, why: &str) -> Error {
        Error::Corrupt(format!("`{}` = {value}: {why}", self.key(k)))
    }
}

/// Query heads, KV heads and the head size of one attention layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeadShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
}

impl HeadShape {
    /// Width of the queries (and of the attention output): checked not to overflow.
    pub(crate) fn q_dim(self) -> usize {
        self.n_head * self.head_dim
    }

    pub(crate) fn kv_dim(self) -> usize {
        self.n_head_kv * self.head_dim
    }
}
