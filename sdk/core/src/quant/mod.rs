//! Tensor element types: block layouts, dequantization and dot products against quantized
//! activations. `reference` is the scalar truth that every fast kernel is tested against.
//!
//! Use: pick the kernel set once with [`kernels`], quantize the activation row into an
//! [`ActBuf`] with `quantize(w.activation_type())`, then call `vec_dot(w)` (or `mat_vec(w)`)
//! per weight row; for several tokens at once, `mat_mat(w)`. All byte-level functions check sizes and never panic: a row that is too
//! short yields `0.0` (dot products) or leaves the output untouched (everything else).
//!
//! Alignment: kernels view bytes as blocks in place when they are aligned for the block type
//! (2 bytes for f16-scaled blocks, 4 for Q8_K and f32). GGUF tensor data and [`ActBuf`] always
//! are; any other buffer still works, through a copy into aligned scratch (slower, same result).
//!
//! Kernel sets: `reference` (portable scalar), `avx2` (x86-64 with AVX2+FMA+F16C), `avxvnni`
//! (256-bit VNNI: AVX-VNNI, or AVX-512 VNNI in its EVEX form) and `avx512` (AVX-512 F/BW/VL +
//! VNNI; both built when the compiler is Rust 1.89 or newer, see `build.rs`), and
//! on aarch64 `neon` (base ARMv8-A), `dotprod` (`sdot`) and `i8mm` (`smmla` for prefill, `sdot`
//! otherwise). One binary carries them all; the CPU is checked at run time. A set may also carry
//! a [`packed::Packing`]: a tiled weight layout built at load and the kernels that read it (the
//! `avx512` set does).

/// Evaluates `$call` with the constant `$G` set to the head count `$g` (1 to 8; more take 8).
/// The SIMD attention chunk kernels are instantiated per head count so that their per-head
/// loops unroll and the accumulators stay in registers.
#[allow(unused_macros)]
macro_rules! by_head_count {
    ($g:expr, $G:ident => $call:expr) => {
        by_head_count!(@arms $g, $G, $call, 1 2 3 4 5 6 7)
    };
    (@arms $g:expr, $G:ident, $call:expr, $($n:literal)*) => {
        match $g {
            $($n => { const $G: usize = $n; $call })*
            _ => { const $G: usize = 8; $call }
        }
    };
}

#[cfg(target_arch = "aarch64")]
pub mod aarch64;
mod adapt;
pub mod blocks;
mod dispatch;
pub mod packed;
pub mod reference;
mod sets;
pub mod types;
#[cfg(target_arch = "x86_64")]
pub mod x86;

#[cfg(test)]
mod packed_tests;
#[cfg(test)]
mod tests;

pub use blocks::{as_blocks, as_blocks_mut, Block};
pub use dispatch::{available_kernels, kernels, reference_kernels, Kernels};
pub use types::GgmlType;

/// Runs an element-wise vector kernel `f` over `W`-element pieces of `x` (in place) and `y`, to
/// the shorter length: whole pieces where they lie, the last partial one through zero-padded
/// copies, so that every element gets the same operations wherever it lies (batch invariance).
/// Inlined into the caller, whose target features `f` needs.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(always)]
fn in_pieces<const W: usize>(x: &mut [f32], y: &[f32], mut f: impl FnMut(&mut [f32; W], &[f32; W])) {
    let n = x.len().min(y.len());
    let (mut xs, mut ys) = (x[..n].chunks_exact_mut(W), y[..n].chunks_exact(W));
    for (a, b) in (&mut xs).zip(&mut ys) {
        if let (Ok(a), Ok(b)) = (a.try_into(), b.try_into()) {
            f(a, b);
        }
    }
    let (xr, yr) = (xs.into_remainder(), ys.remainder());
    if !xr.is_empty() {
        let (mut a, mut b) = ([0f32; W], [0f32; W]);
        a[..xr.len()].copy_from_slice(xr);
        b[..yr.len()].copy_from_slice(yr);
        f(&mut a, &b);
        xr.copy_from_slice(&a[..xr.len()]);
    }
}

/// Dot product of `n` elements: `w` is one weight row's bytes, `a` the quantized activation
/// row's bytes (in the weight type's [`GgmlType::activation_type`]). Extra bytes are ignored;
/// too few give `0.0`.
pub(crate) type VecDotFn = fn(n: usize, w: &[u8], a: &[u8]) -> f32;
/// `out[r] = dot(row r, a)` for `out.len()` consecutive weight rows of `n` elements each in
/// `w`. Same contract as [`VecDotFn`]; on bad sizes `out` is left untouched.
pub(crate) type MatVecFn = fn(n: usize, w: &[u8], a: &[u8], out: &mut [f32]);
/// `out[t * out_stride + r] = dot(weight row r, activation row t)` for `r in 0..n_rows`,
/// `t in 0..n_tok`: `w` holds `n_rows` consecutive weight rows of `n` elements, `a` holds
/// `n_tok` consecutive activation rows (in the weight type's activation format). Used for
/// prefill, where decoding each weight block once for several tokens pays off. Same contract
/// as [`VecDotFn`]; on bad sizes (including `out_stride < n_rows` with more than one token, or
/// `out` too short) `out` is left untouched.
pub(crate) type MatMatFn =
    fn(n: usize, w: &[u8], n_rows: usize, a: &[u8], n_tok: usize, out: &mut [f32], out_stride: usize);
/// One KV head's cached rows as the attention kernels read them: slices start at the head's
/// first element (scale), and slot `j`'s row starts `j * stride` elements (`j * scale_stride`
/// scales) on.
#[derive(Debug, Clone, Copy)]
pub enum KvHeadRows<'a> {
    F16 {
        keys: &'a [half::f16],
        values: &'a [half::f16],
        stride: usize,
    },
    /// int8 keys, each [`KEY_GROUP`] of a row times its own scale (slot `j`'s from
    /// `key_scales[j * key_scale_stride]` on); fp8 e4m3 values, read as f16 bits
    /// (`reference::e4m3_f16_bits`) times their row's scale (`value_scales[j * value_scale_stride]`).
    Int8Fp8 {
        keys: &'a [i8],
        key_scales: &'a [f32],
        values: &'a [u8],
        value_scales: &'a [f32],
        stride: usize,
        key_scale_stride: usize,
        value_scale_stride: usize,
    },
}

/// Key elements sharing one scale in an int8 KV cache (head sizes are multiples of it):
/// outlying key dimensions then cost precision only to their own group.
pub const KEY_GROUP: usize = 16;

/// Attention of `heads` query heads that share one KV head, over a chunk of cached positions.
/// `q` holds the heads' query rows (`heads` × `hd`, `hd = q.len() / heads`); `slots` lists the
/// positions of `rows` to attend to. For each head `h` it writes `out[h * (hd + 2)..]`: the
/// largest scaled score `m`, `l = Σ p` and `Σ p · value row` (hd values) with
/// `p = exp(score - m)` rounded to f16 (as ggml rounds the probabilities for its f16 value
/// product), so chunks combine exactly like one softmax. `scores` is scratch for
/// `heads × slots.len()` values. Sizes are checked: on any mismatch (a slot past the cache,
/// short buffers) `out` is left untouched.
pub(crate) type AttnChunkFn =
    fn(q: &[f32], heads: usize, rows: KvHeadRows<'_>, slots: &[u32], scale: f32, scores: &mut [f32], out: &mut [f32]);
/// f32 row -> activation-format bytes (`x.len()` a multiple of the block size, `out` at least
/// `row_bytes(x.len())` long).
pub(crate) type QuantizeFn = fn(x: &[f32], out: &mut [u8]);
/// One row of weight bytes -> `out.len()` f32 values.
pub(crate) type DequantizeFn = fn(w: &[u8], out: &mut [f32]);

impl GgmlType {
    /// Bytes of a row of `n` elements (`n` a multiple of the block size).
    pub fn row_bytes(self, n: usize) -> usize {
        n / self.block_size() * self.block_bytes()
    }
}

/// A byte buffer for quantized activations, 4-byte aligned (Q8_K's f32 scale needs it) so the
/// kernels can view it in place. Grows but never shrinks its allocation.
#[derive(Debug, Clone, Default)]
pub struct ActBuf {
    words: Vec<u32>,
    len: usize,
}

impl ActBuf {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the length to `bytes`; new bytes are zero.
    pub fn resize(&mut self, bytes: usize) {
        self.words.resize(bytes.div_ceil(4), 0);
        self.len = bytes;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `len <= 4 * words.len()`, u32 storage is initialised and u8 has alignment 1.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }

    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above; any byte values are valid u32s.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.len) }
    }

    /// Quantizes `x` into this buffer in format `act` with `k`'s kernels, resizing to fit.
    /// Returns false (buffer emptied) when `act` is not an activation format or `x.len()` is not
    /// a whole number of its blocks.
    pub fn quantize(&mut self, k: &Kernels, act: GgmlType, x: &[f32]) -> bool {
        match k.quantize(act) {
            Some(q) if x.len() % act.block_size() == 0 => {
                self.resize(act.row_bytes(x.len()));
                q(x, self.as_bytes_mut());
                true
            }
            _ => {
                self.resize(0);
                false
            }
        }
    }
}
