//! Gemma 4 (E2B / E4B): Gemma 3's layer (q and k norms, post-norms, GeGLU, √width
//! embeddings) with
//! - sliding-window and global layers of their own head sizes (`attention.key_length_swa`
//!   and `key_length`), rotary dimensions and bases; the global layers' `rope_freqs`
//!   leave most pairs unrotated (proportional RoPE),
//! - an RMS norm without weight of the values and an attention scale of 1,
//! - the last `attention.shared_kv_layers` layers keeping no keys and values of their own:
//!   they attend over the last earlier layer's of their kind (llama.cpp takes layer
//!   `n_kv - 2` for sliding ones and `n_kv - 1` for global ones),
//! - per-layer embeddings: a small input per layer and token, made before the first layer
//!   from the token's row of `per_layer_token_embd` and a projection of its embedding, which
//!   gates a bottleneck added to the stream after each layer's feed-forward,
//! - a scale of each layer's output, and a soft cap of the logits.

use crate::error::{Error, Result};

use super::super::blocks::attention::AttentionSpec;
use super::super::blocks::norm::RmsNorm;
use super::super::blocks::rope::{Rope, RopeId, RopeStyle};
use super::super::blocks::{self, LogitMap, Pass};
use super::super::hparams::{HeadShape, Hparams};
use super::super::scratch::grow;
use super::super::state::LayerCache;
use super::super::weights::{load_vector, Matrix};
use super::{gemma3, output_norm, Arch};

const GLOBAL: RopeId = 0;
const SLIDING: RopeId = 1;

pub(super) fn load(h: &Hparams) -> Result<Arch> {
    let (f, d, n_layer) = (h.f, h.config.n_embd, h.config.n_layer);
    let sliding = sliding_pattern(h)?;
    let global_dim = h.head_dim()?;
    let sliding_dim = h.usize_or("attention.key_length_swa", global_dim)?;
    if sliding_dim == 0 || sliding_dim % 2 != 0 || h.usize_or("attention.value_length_swa", sliding_dim)? != sliding_dim
    {
        return Err(h.corrupt(
            "attention.key_length_swa",
            sliding_dim,
            "not an even head size equal to the value length",
        ));
    }
    let global = Rope::read(h, RopeStyle::Halves, global_dim)?.with_factors(f, "rope_freqs.weight")?;
    let sliding_dims = h.usize_or("rope.dimension_count_swa", sliding_dim)?;
    if sliding_dims == 0 || sliding_dims % 2 != 0 || sliding_dims > sliding_dim {
        return Err(h.corrupt("rope.dimension_count_swa", sliding_dims, "not an even count up to the head size"));
    }
    let base_swa = h.f32_or("rope.freq_base_swa", 10_000.0)?;
    if base_swa <= 0.0 {
        return Err(h.corrupt("rope.freq_base_swa", base_swa, "not positive"));
    }
    let local = Rope::new(RopeStyle::Halves, sliding_dims, base_swa)?;
    let window = h.positive("attention.sliding_window")?;
    let shared = h.usize_or("attention.shared_kv_layers", 0)?;
    let n_kv = n_layer.checked_sub(shared).filter(|&n| n >= 2 || shared == 0).ok_or_else(|| {
        h.corrupt("attention.shared_kv_layers", shared, "leaves no sliding and global layer to share")
    })?;
    if shared > 0 && !(sliding[n_kv - 2] && !sliding[n_kv - 1]) {
        return Err(h.corrupt(
            "attention.shared_kv_layers",
            shared,
            "the layers shared are not a sliding then a global one",
        ));
    }
    let per_layer = PerLayerInputs::load(h)?;
    let n_ff = h.per_layer("feed_forward_length", None)?;
    let mut layers: Vec<Box<dyn blocks::Layer>> = Vec::with_capacity(n_layer);
    for (il, (heads, &ff)) in h.heads()?.into_iter().zip(&n_ff).enumerate() {
        let is_sliding = sliding[il];
        let heads = HeadShape { head_dim: if is_sliding { sliding_dim } else { global_dim }, ..heads };
        let shared_kv = (il >= n_kv).then_some(if is_sliding { n_kv - 2 } else { n_kv - 1 });
        let spec = AttentionSpec {
            scale: 1.0,
            qk_norm: true,
            v_norm: true,
            window: is_sliding.then_some(window),
            shared_kv,
            ..AttentionSpec::new(heads)
        };
        let p = per_layer.width;
        let name = |s: &str| format!("blk.{il}.{s}.weight");
        layers.push(Box::new(Layer {
            block: gemma3::Layer::load(h, il, &spec, if is_sliding { SLIDING } else { GLOBAL }, ff)?,
            inp_gate: Matrix::load(f, &name("inp_gate"), d, p)?,
            proj: Matrix::load(f, &name("proj"), p, d)?,
            post_norm: RmsNorm::layer(h, il, "post_norm")?,
            output_scale: match f.tensor(&name("layer_output_scale")) {
                Some(_) => load_vector(f, &name("layer_output_scale"), 1)?[0],
                None => 1.0,
            },
            index: il,
            n_layer,
            width: p,
        }));
    }
    let softcap = h.f32_or("final_logit_softcapping", 0.0)?;
    Ok(Arch {
        layers,
        prelude: Some(Box::new(per_layer)),
        ropes: vec![global, local],
        embedding_scale: (d as f32).sqrt(),
        output_norm: output_norm(h)?,
        logits: LogitMap { scale: 1.0, softcap: (softcap > 0.0).then_some(softcap) },
    })
}

/// `attention.sliding_window_pattern`: true for a sliding-window layer, one per layer.
fn sliding_pattern(h: &Hparams) -> Result<Vec<bool>> {
    let key = h.key("attention.sliding_window_pattern");
    let array = h.f.get(&key).and_then(|v| v.as_array()).ok_or_else(|| Error::MissingMetadata(key.clone()))?;
    let values: Vec<bool> = array
        .to_i64_vec(h.f.bytes())
        .ok_or_else(|| Error::MetadataType { key: key.clone(), expected: "booleans", found: "array".into() })?
        .into_iter()
        .map(|v| v != 0)
        .collect();
    if values.len() != h.config.n_layer {
        return Err(Error::Corrupt(format!("`{key}` has {} values for {} layers", values.len(), h.config.n_layer)));
    }
    Ok(values)
}

/// The per-layer inputs, made once per pass from the embedded batch:
/// `(per_layer_token_embd[token] · √P + norm(per_layer_model_proj · x₀ / √E)) / √2`, `P` wide
/// per layer, into `Scratch::per_layer` (per token, the layers' rows in order).
struct PerLayerInputs {
    token_embd: Matrix,
    model_proj: Matrix,
    proj_norm: RmsNorm,
    /// Values per layer and token (`embedding_length_per_layer_input`).
    width: usize,
    n_layer: usize,
}

impl PerLayerInputs {
    fn load(h: &Hparams) -> Result<PerLayerInputs> {
        let (f, d, n_layer) = (h.f, h.config.n_embd, h.config.n_layer);
        let width = h.positive("embedding_length_per_layer_input")?;
        let all = width
            .checked_mul(n_layer)
            .ok_or_else(|| h.corrupt("embedding_length_per_layer_input", width, "overflows over the layers"))?;
        Ok(PerLayerInputs {
            token_embd: Matrix::load(f, "per_layer_token_embd.weight", all, h.config.vocab_size)?,
            model_proj: Matrix::load(f, "per_layer_model_proj.weight", d, all)?,
            proj_norm: RmsNorm::load(f, "per_layer_proj_norm.weight", width, h.config.rms_eps)?,
            width,
            n_layer,
        })
    }
}

impl blocks::Layer for PerLayerInputs {
    fn forward(&self, p: &mut Pass<'_>) {
        let (e, n, d) = (p.exec, p.n, p.d);
        let all = self.width * self.n_layer;
        let s = &mut *p.s;
        grow(&mut s.per_layer, n * all);
        e.project(&mut s.qin, &self.model_proj, n, &s.x, &mut s.per_layer);
        let scale = 1.0 / (d as f32).sqrt();
        s.per_layer[..n * all].iter_mut().for_each(|v| *v *= scale);
        self.proj_norm.apply_inplace(&mut s.per_layer[..n * all]);
        let Some(dequant) = e.kernels.dequantize(self.token_embd.ty) else { return };
        grow(&mut s.up, all);
        let (tok_scale, mix) = ((self.width as f32).sqrt(), std::f32::consts::FRAC_1_SQRT_2);
        for (t, &tok) in p.tokens.iter().enumerate() {
            dequant(self.token_embd.row(e.file, tok as usize), &mut s.up[..all]);
            for (v, &r) in s.per_layer[t * all..(t + 1) * all].iter_mut().zip(&s.up[..all]) {
                *v = (*v + r * tok_scale) * mix;
            }
        }
    }

    fn cache(&self) -> LayerCache {
        LayerCache::None
    }

    fn matrices(&mut self) -> Vec<&mut Matrix> {
        // The token table is only read by rows.
        vec![&mut self.model_proj]
    }
}

struct Layer {
    /// Gemma 3's layer, then the per-layer embedding's update.
    block: gemma3::Layer,
    /// The per-layer embedding's gate (width → P) and projection back (P → width).
    inp_gate: Matrix,
    proj: Matrix,
    post_norm: RmsNorm,
    output_scale: f32,
    index: usize,
    n_layer: usize,
    width: usize,
}

impl blocks::Layer for Layer {
    fn forward(&self, p: &mut Pass<'_>) {
        self.block.forward(p);

        // x += norm(proj · (gelu(inp_gate · x) ∘ this layer's input)).
        let (e, n, w) = (p.exec, p.n, self.width);
        let all = w * self.n_layer;
        let s = &mut *p.s;
        grow(&mut s.gate, n * w);
        e.project(&mut s.qin, &self.inp_gate, n, &s.x, &mut s.gate);
        for t in 0..n {
            let inp = &s.per_layer[t * all + self.index * w..t * all + (self.index + 1) * w];
            (e.kernels.gelu_mul())(&mut s.gate[t * w..(t + 1) * w], inp);
        }
        e.project(&mut s.qin, &self.proj, n, &s.gate, &mut s.proj);
        p.post_norm(&self.post_norm);
        p.add_to_stream();
        if self.output_scale != 1.0 {
            let len = n * p.d;
            p.s.x[..len].iter_mut().for_each(|v| *v *= self.output_scale);
        }
    }

    fn cache(&self) -> LayerCache {
        self.block.cache()
    }

    fn matrices(&mut self) -> Vec<&mut Matrix> {
        let mut m = self.block.matrices();
        m.extend([&mut self.inp_gate, &mut self.proj]);
        m
    }
}
