//! Run-time CPU selection of a kernel set. The sets themselves live in `sets`, one per file;
//! a SIMD set is handed out only after checking the CPU supports it, which is what makes its
//! safe function pointers sound.

use std::sync::OnceLock;

use half::f16;

use super::packed::Packing;
#[cfg(target_arch = "x86_64")]
use super::sets::avx2::AVX2;
use super::sets::reference::REFERENCE;
#[cfg(all(target_arch = "x86_64", tern_avx512))]
use super::sets::{
    avx512::AVX512,
    avxvnni::{AVXVNNI_EVEX, AVXVNNI_VEX},
};
#[cfg(target_arch = "aarch64")]
use super::sets::{dotprod::DOTPROD, i8mm::I8MM, neon::NEON};
use super::types::N_TYPES;
use super::{AttnChunkFn, DequantizeFn, GgmlType, MatMatFn, MatVecFn, QuantizeFn, VecDotFn};

/// A set of kernels for one instruction set: one table entry per [`GgmlType`] for each kind of
/// kernel. Only obtainable through [`kernels`], [`reference_kernels`] and [`available_kernels`],
/// which hand out a SIMD set only after checking the CPU supports it: that is what makes its
/// safe function pointers sound.
pub struct Kernels {
    /// Instruction set name: `"reference"`, `"avx2"`, `"avxvnni"`, `"avx512"`, `"neon"`,
    /// `"dotprod"` or `"i8mm"`.
    pub isa: &'static str,
    pub(in crate::quant) dot: [Option<VecDotFn>; N_TYPES],
    pub(in crate::quant) mat_vec: [Option<MatVecFn>; N_TYPES],
    pub(in crate::quant) mat_mat: [Option<MatMatFn>; N_TYPES],
    pub(in crate::quant) quant: [Option<QuantizeFn>; N_TYPES],
    pub(in crate::quant) deq: [Option<DequantizeFn>; N_TYPES],
    pub(in crate::quant) f16_dot: fn(&[f16], &[f32]) -> f32,
    pub(in crate::quant) f16_axpy: fn(f32, &[f16], &mut [f32]),
    pub(in crate::quant) silu_mul: fn(&mut [f32], &[f32]),
    pub(in crate::quant) gelu_mul: fn(&mut [f32], &[f32]),
    pub(in crate::quant) attn_chunk: AttnChunkFn,
    pub(in crate::quant) packing: Option<&'static Packing>,
}

impl Kernels {
    /// Dot product of one row of weight type `w` with an activation row in
    /// `w.activation_type()`. `None` for activation-only types.
    pub(crate) fn vec_dot(&self, w: GgmlType) -> Option<VecDotFn> {
        self.dot[w.slot()]
    }

    /// Matrix-vector product over consecutive rows (one call per matrix or thread share).
    pub fn mat_vec(&self, w: GgmlType) -> Option<MatVecFn> {
        self.mat_vec[w.slot()]
    }

    /// Matrix-matrix product: several weight rows against several activation rows (prefill).
    /// Present wherever `mat_vec` is; types without a dedicated kernel loop over `mat_vec`.
    pub fn mat_mat(&self, w: GgmlType) -> Option<MatMatFn> {
        self.mat_mat[w.slot()]
    }

    /// `x · y` for an f16 row and an f32 row (attention scores against the f16 key cache);
    /// reads the shorter length.
    pub fn f16_dot(&self) -> fn(&[f16], &[f32]) -> f32 {
        self.f16_dot
    }

    /// `y += a * x` for an f16 row (attention's sum of f16 value rows); the shorter length.
    pub fn f16_axpy(&self) -> fn(f32, &[f16], &mut [f32]) {
        self.f16_axpy
    }

    /// SwiGLU's `gate[i] = silu(gate[i]) * up[i]`; the shorter length.
    pub(crate) fn silu_mul(&self) -> fn(&mut [f32], &[f32]) {
        self.silu_mul
    }

    /// GeGLU's `gate[i] = gelu(gate[i]) * up[i]` (ggml's f16 table); the shorter length.
    pub(crate) fn gelu_mul(&self) -> fn(&mut [f32], &[f32]) {
        self.gelu_mul
    }

    /// f32 row -> activation format `act` (`Q8_0`, `Q8_1`, `Q8_K`, or `F32`, which copies).
    pub fn quantize(&self, act: GgmlType) -> Option<QuantizeFn> {
        self.quant[act.slot()]
    }

    /// One row of `w` -> f32 (all types, activation formats included).
    pub(crate) fn dequantize(&self, w: GgmlType) -> Option<DequantizeFn> {
        self.deq[w.slot()]
    }

    /// Attention of one KV head's query heads over a chunk of cache rows.
    pub fn attn_chunk(&self) -> AttnChunkFn {
        self.attn_chunk
    }

    /// The repacked-weight layout and kernels of this set, if it has them.
    pub fn packing(&self) -> Option<&'static Packing> {
        self.packing
    }
}

impl std::fmt::Debug for Kernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernels").field("isa", &self.isa).finish_non_exhaustive()
    }
}

/// The aarch64 sets this CPU runs, in order: each one's features include the previous one's.
#[cfg(target_arch = "aarch64")]
fn detect_aarch64() -> Vec<&'static Kernels> {
    use std::arch::is_aarch64_feature_detected as has;
    let mut v = Vec::new();
    if has!("neon") {
        v.push(&NEON);
        if has!("dotprod") {
            v.push(&DOTPROD);
            if has!("i8mm") {
                v.push(&I8MM);
            }
        }
    }
    v
}

#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
}

#[cfg(target_arch = "x86_64")]
fn detect_avx2() -> Option<&'static Kernels> {
    has_avx2().then_some(&AVX2)
}

#[cfg(all(target_arch = "x86_64", tern_avx512))]
fn has_avx512() -> bool {
    has_avx2()
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512vnni")
}

#[cfg(all(target_arch = "x86_64", tern_avx512))]
fn detect_avx512() -> Option<&'static Kernels> {
    has_avx512().then_some(&AVX512)
}

/// The AVX-VNNI set in the encoding this CPU runs: VEX where it has AVX-VNNI, else EVEX where it
/// has AVX-512 VNNI.
#[cfg(all(target_arch = "x86_64", tern_avx512))]
fn detect_avxvnni() -> Option<&'static Kernels> {
    if has_avx2() && is_x86_feature_detected!("avxvnni") {
        Some(&AVXVNNI_VEX)
    } else {
        has_avx512().then_some(&AVXVNNI_EVEX)
    }
}

/// Every set this CPU can run, best last.
pub fn available_kernels() -> Vec<&'static Kernels> {
    #[allow(unused_mut)]
    let mut v = vec![&REFERENCE];
    #[cfg(target_arch = "x86_64")]
    v.extend(detect_avx2());
    #[cfg(all(target_arch = "x86_64", tern_avx512))]
    v.extend(detect_avxvnni());
    #[cfg(all(target_arch = "x86_64", tern_avx512))]
    v.extend(detect_avx512());
    #[cfg(target_arch = "aarch64")]
    v.extend(detect_aarch64());
    v
}

pub fn reference_kernels() -> &'static Kernels {
    &REFERENCE
}

/// The set named `want` if this CPU runs it; otherwise (or for an unknown or absent name) the
/// best available.
fn select(want: Option<&str>) -> &'static Kernels {
    let avail = available_kernels();
    let best = avail.last().copied().unwrap_or(&REFERENCE);
    match want {
        Some(name) => avail.iter().copied().find(|k| k.isa.eq_ignore_ascii_case(name.trim())).unwrap_or(best),
        None => best,
    }
}

/// The best kernel set for this CPU, chosen once. `TERN_KERNELS=reference|avx2|avxvnni|avx512|
/// neon|dotprod|i8mm` forces one (falling back to the best available when the CPU lacks it).
pub fn kernels() -> &'static Kernels {
    static CHOSEN: OnceLock<&'static Kernels> = OnceLock::new();
    CHOSEN.get_or_init(|| select(std::env::var("TERN_KERNELS").ok().as_deref()))
}

#[cfg(test)]
pub(super) fn select_for_test(want: Option<&str>) -> &'static Kernels {
    select(want)
}
