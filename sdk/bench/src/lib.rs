//! Inputs for the kernel benchmarks in `benches/`: real weight tensors from the model cache and
//! activations quantized the way the engine quantizes them.

use std::path::PathBuf;

use tern::gguf::GgufFile;
use tern::quant::packed::Packing;
use tern::quant::{ActBuf, GgmlType, Kernels};

/// The model cache (`$TERN_MODEL_DIR`, default `~/.cache/tern/models`).
pub fn model_dir() -> PathBuf {
    std::env::var_os("TERN_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/tern/models"))
}

/// A 2-D weight tensor of one type, taken from a model file.
pub struct WeightSample {
    pub model: String,
    pub tensor: String,
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    pub bytes: Vec<u8>,
}

/// The largest 2-D tensor of each type in each model file found in the cache (the files
/// `cargo xtask models --all` fetches); files that are absent are skipped.
pub fn weight_samples() -> Vec<WeightSample> {
    let files =
        ["SmolLM2-135M-Instruct.Q4_1.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "gemma-3-270m-q4_k_m.gguf"];
    let mut out: Vec<WeightSample> = Vec::new();
    for name in files {
        let Ok(file) = GgufFile::open(model_dir().join(name)) else { continue };
        let mut best: Vec<&tern::gguf::TensorInfo> = Vec::new();
        for t in file.tensors().iter().filter(|t| t.dims.len() == 2 && t.ty.block_size() > 0) {
            match best.iter_mut().find(|b| b.ty == t.ty) {
                Some(b) if b.size < t.size => *b = t,
                Some(_) => {}
                None => best.push(t),
            }
        }
        for t in best {
            // Cap at 8 MiB of rows: larger than the caches, small enough to keep runs short.
            let (cols, all_rows) = (t.dims[0] as usize, t.dims[1] as usize);
            let row_bytes = t.ty.row_bytes(cols);
            let rows = all_rows.min((8 << 20) / row_bytes.max(1)).max(1);
            let data = file.tensor_data(t);
            out.push(WeightSample {
                model: name.split(".gguf").next().unwrap_or(name).to_owned(),
                tensor: t.name.clone(),
                ty: t.ty,
                rows,
                cols,
                bytes: data[..rows * row_bytes].to_vec(),
            });
        }
    }
    out.extend([GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::Q5_K].map(|ty| synthetic(ty, 896, 4864)));
    out
}

/// A matrix of `ty` (Q5_1, IQ4_NL or Q5_K, whose blocks start with f16 scales) of Qwen2.5-0.5B's
/// ffn_down shape with hashed quants and small scales: no model in the cache has these types
/// (Q5_K_M, Q5_1 and IQ4_NL files do), and the kernels' speed does not depend on the values.
fn synthetic(ty: GgmlType, rows: usize, cols: usize) -> WeightSample {
    let mut bytes: Vec<u8> = (0..rows * ty.row_bytes(cols))
        .map(|i| ((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
        .collect();
    let scale = half::f16::from_f32(0.01).to_le_bytes();
    for block in bytes.chunks_exact_mut(ty.row_bytes(ty.block_size())) {
        let scales = if ty == GgmlType::IQ4_NL { 1 } else { 2 };
        for s in 0..scales {
            block[2 * s..2 * s + 2].copy_from_slice(&scale);
        }
    }
    WeightSample { model: "synthetic".to_owned(), tensor: "ffn_down".to_owned(), ty, rows, cols, bytes }
}

/// Deterministic, activation-like values in [-1, 1) for token `t`.
fn token_values(cols: usize, t: usize) -> Vec<f32> {
    (0..cols)
        .map(|i| {
            let h = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (t as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            ((h >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// `n_tok` activation rows of `cols` values, quantized to `w`'s activation type by `kernels`.
pub fn activations(kernels: &Kernels, w: GgmlType, cols: usize, n_tok: usize) -> Option<ActBuf> {
    let act = w.activation_type();
    let quantize = kernels.quantize(act)?;
    let row_bytes = act.row_bytes(cols);
    let mut buf = ActBuf::new();
    buf.resize(row_bytes * n_tok);
    for t in 0..n_tok {
        quantize(&token_values(cols, t), &mut buf.as_bytes_mut()[t * row_bytes..(t + 1) * row_bytes]);
    }
    Some(buf)
}

/// The same rows in the activation layout of `p`'s kernel for weight type `w`.
pub fn packed_activations(p: &Packing, w: GgmlType, cols: usize, n_tok: usize) -> Option<ActBuf> {
    let row_bytes = p.act_row_bytes(w, cols)?;
    let mut buf = ActBuf::new();
    buf.resize(row_bytes * n_tok);
    for t in 0..n_tok {
        (p.quantize_act)(w, &token_values(cols, t), &mut buf.as_bytes_mut()[t * row_bytes..(t + 1) * row_bytes]);
    }
    Some(buf)
}
