//! Element-wise and reduction kernels of the forward pass, and the threaded matrix product.

use crate::quant::{GgmlType, Kernels};
use crate::runtime::ThreadPool;

use super::weights::Matrix;

/// out = x / rms(x) * w, row by row.
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let n = w.len();
    for (xr, or) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        let ss: f32 = xr.iter().map(|v| v * v).sum::<f32>() / n as f32;
        let inv = 1.0 / (ss + eps).sqrt();
        for ((o, &v), &g) in or.iter_mut().zip(xr).zip(w) {
            *o = v * inv * g;
        }
    }
}

/// In-place RMS norm of every `w.len()`-sized chunk (per-head QK norm).
pub fn rms_norm_inplace(x: &mut [f32], w: &[f32], eps: f32) {
    let n = w.len();
    for xr in x.chunks_exact_mut(n) {
        let ss: f32 = xr.iter().map(|v| v * v).sum::<f32>() / n as f32;
        let inv = 1.0 / (ss + eps).sqrt();
        for (v, &g) in xr.iter_mut().zip(w) {
            *v = *v * inv * g;
        }
    }
}

pub fn add_inplace(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Adds `bias` to every row of `x`.
pub fn add_bias(x: &mut [f32], bias: &[f32]) {
    for row in x.chunks_exact_mut(bias.len()) {
        add_inplace(row, bias);
    }
}

#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

#[inline]
fn gelu_tanh_exact(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + 0.044_715 * x * x)).tanh())
}

/// GELU (tanh form) through a table over all f16 inputs, as ggml computes it: the reference
/// outputs this engine is held to were produced that way, and a lookup is cheaper than tanh.
#[inline]
pub fn gelu_tanh(x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        gelu_table()[half::f16::from_f32(x).to_bits() as usize].to_f32()
    }
}

fn gelu_table() -> &'static [half::f16] {
    static TABLE: std::sync::OnceLock<Vec<half::f16>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX).map(|bits| half::f16::from_f32(gelu_tanh_exact(half::f16::from_bits(bits).to_f32()))).collect()
    })
}

/// Softmax in place over `x`.
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    let inv = 1.0 / sum;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

/// Raw pointer that tasks on different threads write through at disjoint indices.
#[derive(Clone, Copy)]
pub struct SharedMut<T>(*mut T);
unsafe impl<T> Send for SharedMut<T> {}
unsafe impl<T> Sync for SharedMut<T> {}

impl<T> SharedMut<T> {
    pub fn new(p: *mut T) -> Self {
        SharedMut(p)
    }

    /// The pointer. A method, so that closures capture the whole (Sync) wrapper.
    #[inline]
    pub fn get(self) -> *mut T {
        self.0
    }
}

/// Quantized copies of one activation matrix, one per activation format asked for, so that
/// q/k/v (or gate/up) projections of the same input quantize it once. Buffers are kept between
/// inputs: no allocation once they have grown to the largest batch.
#[derive(Default)]
pub struct QuantizedInput {
    slots: Vec<Slot>,
}

struct Slot {
    act: GgmlType,
    valid: bool,
    len: usize,
    words: Vec<u32>,
}

impl QuantizedInput {
    /// Forget the previous input (buffers are kept).
    pub fn invalidate(&mut self) {
        self.slots.iter_mut().for_each(|s| s.valid = false);
    }

    /// The bytes of `x` (`n_rows` rows of `cols`) in activation format `act`, quantized on the
    /// first request since the last `invalidate`.
    pub fn get(&mut self, kernels: &Kernels, act: GgmlType, x: &[f32], n_rows: usize, cols: usize) -> &[u8] {
        let row_bytes = act.row_bytes(cols);
        let len = row_bytes * n_rows;
        let idx = match self.slots.iter().position(|s| s.act == act) {
            Some(i) => i,
            None => {
                self.slots.push(Slot { act, valid: false, len: 0, words: Vec::new() });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[idx];
        if !slot.valid || slot.len != len {
            if slot.words.len() * 4 < len {
                slot.words.resize(len.div_ceil(4), 0);
            }
            if let Some(quantize) = kernels.quantize(act) {
                let bytes = bytes_of_mut(&mut slot.words, len);
                for (xr, out) in x.chunks_exact(cols).zip(bytes.chunks_exact_mut(row_bytes)).take(n_rows) {
                    quantize(xr, out);
                }
            }
            slot.valid = true;
            slot.len = len;
        }
        bytes_of(&self.slots[idx].words, len)
    }
}

fn bytes_of(words: &[u32], len: usize) -> &[u8] {
    // SAFETY: u32 storage viewed as bytes; len ≤ 4 * words.len().
    unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, len.min(words.len() * 4)) }
}

fn bytes_of_mut(words: &mut [u32], len: usize) -> &mut [u8] {
    // SAFETY: as above; the buffer is 4-byte aligned, which the activation blocks need.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, len.min(words.len() * 4)) }
}

/// Rows of the weight handled by one task.
const ROWS_PER_TASK: usize = 16;

/// Tokens per tile when several tokens go through a weight at once (prefill).
const TOKENS_PER_TILE: usize = 32;

/// out[t * w.rows + r] = W[r] · x[t] for `n_tok` tokens, whose activations `act` are already in
/// `w.ty.activation_type()` format. Rows are split into tasks; each task keeps its weight rows hot
/// in cache while it walks over the tokens. One token goes through the GEMV kernel; several go
/// through the GEMM kernel a tile of tokens at a time, so each weight block is decoded once per tile.
pub fn matmul(pool: &ThreadPool, kernels: &Kernels, file: &[u8], w: &Matrix, act: &[u8], n_tok: usize, out: &mut [f32]) {
    let Some(mat_vec) = kernels.mat_vec(w.ty) else { return };
    let mat_mat = if n_tok > 1 { kernels.mat_mat(w.ty) } else { None };
    let act_row = w.ty.activation_type().row_bytes(w.cols);
    if act.len() < act_row * n_tok || out.len() < w.rows * n_tok {
        return;
    }
    let out_ptr = SharedMut::new(out.as_mut_ptr());
    let rows = w.rows;
    let cols = w.cols;
    let n_tasks = rows.div_ceil(ROWS_PER_TASK);
    pool.parallel_for(n_tasks, &|task| {
        let r0 = task * ROWS_PER_TASK;
        let r1 = (r0 + ROWS_PER_TASK).min(rows);
        let n_rows = r1 - r0;
        let weights = w.rows(file, r0, r1);
        let o = out_ptr;
        if let Some(mat_mat) = mat_mat {
            // The tile is token-major with a stride of ROWS_PER_TASK, then copied to its place.
            let mut tile = [0f32; ROWS_PER_TASK * TOKENS_PER_TILE];
            let mut t0 = 0;
            while t0 < n_tok {
                let t1 = (t0 + TOKENS_PER_TILE).min(n_tok);
                let a = &act[t0 * act_row..t1 * act_row];
                mat_mat(cols, weights, n_rows, a, t1 - t0, &mut tile, ROWS_PER_TASK);
                for t in t0..t1 {
                    let src = &tile[(t - t0) * ROWS_PER_TASK..(t - t0) * ROWS_PER_TASK + n_rows];
                    // SAFETY: row ranges are disjoint across tasks; out holds n_tok * rows (checked above).
                    let dst = unsafe { std::slice::from_raw_parts_mut(o.get().add(t * rows + r0), n_rows) };
                    dst.copy_from_slice(src);
                }
                t0 = t1;
            }
            return;
        }
        for t in 0..n_tok {
            let a = &act[t * act_row..(t + 1) * act_row];
            // SAFETY: row ranges are disjoint across tasks; out holds n_tok * rows (checked above).
            let dst = unsafe { std::slice::from_raw_parts_mut(o.get().add(t * rows + r0), n_rows) };
            mat_vec(cols, weights, a, dst);
        }
    });
}
