//! The kernel sets, one [`Kernels`] value per file.
//!
//! Every set starts from the reference set's tables (expanded from the type table in
//! `types`) and replaces the entries it has kernels for, so a new type runs everywhere (on
//! the reference kernels) as soon as it is in the table, and a set lists only what it has.
//! The byte-level adaptors the sets wrap their kernels in are in `adapt`.
//!
//! A SIMD set's `unsafe` calls are sound because its `Kernels` value is handed out only by
//! `dispatch`, after checking the CPU features its kernel modules are compiled for.

use half::f16;

use super::blocks::*;
use super::dispatch::Kernels;
use super::packed::Packing;
use super::reference as r;
use super::types::reference_tables as ref_tables;
use super::{GgmlType, KvHeadRows};

pub(super) mod reference;

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2;
#[cfg(all(target_arch = "x86_64", tern_avx512))]
pub(super) mod avx512;
#[cfg(all(target_arch = "x86_64", tern_avx512))]
pub(super) mod avxvnni;

#[cfg(target_arch = "aarch64")]
pub(super) mod dotprod;
#[cfg(target_arch = "aarch64")]
pub(super) mod i8mm;
#[cfg(target_arch = "aarch64")]
pub(super) mod neon;

/// The reference set with another name: what every set starts from.
pub(super) const fn base(isa: &'static str) -> Kernels {
    Kernels {
        isa,
        dot: ref_tables::DOT,
        mat_vec: ref_tables::MAT_VEC,
        mat_mat: ref_tables::MAT_MAT,
        quant: ref_tables::QUANTIZE,
        deq: ref_tables::DEQUANTIZE,
        f16_dot: r::vec_dot_f16_f32,
        f16_axpy: r::axpy_f16_f32,
        silu_mul: r::silu_mul,
        gelu_mul: r::gelu_mul,
        attn_chunk: |q, heads, rows, slots, scale, scores, out| {
            if attn_chunk_ok(q, heads, rows, slots, scores, out) {
                r::attn_chunk(q, heads, rows, slots, scale, scores, out)
            }
        },
        packing: None,
    }
}

// ---------------------------------------------------------------------------------------------
// Building a SIMD set

/// In a const block building `$k`: the dot product and row loop of each listed type from the
/// set's kernel module `simd` (in scope where this expands), and a `mat_mat` that runs the row
/// loop once per token (replace it with [`simd_mat_mat!`] where the module has a dedicated one).
macro_rules! simd_rows {
    ($k:ident; $($T:ident => $dot:ident, $mv:ident;)*) => {$(
        $k.dot[GgmlType::$T.slot()] = Some({
            fn dot(n: usize, w: &[u8], a: &[u8]) -> f32 {
                $crate::quant::adapt::vec_dot_with::<ty::$T>(n, w, a, |w, a| unsafe { simd::$dot(w, a) })
            }
            dot
        });
        $k.mat_vec[GgmlType::$T.slot()] = Some({
            fn mat_vec(n: usize, w: &[u8], a: &[u8], out: &mut [f32]) {
                $crate::quant::adapt::mat_vec_with::<ty::$T>(n, w, a, out, |w, a, o| unsafe { simd::$mv(w, a, o) })
            }
            mat_vec
        });
        $k.mat_mat[GgmlType::$T.slot()] = Some({
            fn mat_mat(n: usize, w: &[u8], n_rows: usize, a: &[u8], n_tok: usize, out: &mut [f32], stride: usize) {
                $crate::quant::adapt::mat_mat_with::<ty::$T>(n, w, n_rows, a, n_tok, out, stride, |w, a, nr, nt, o, s| {
                    $crate::quant::adapt::per_token(w, a, nr, nt, o, s, |w, a, o| unsafe { simd::$mv(w, a, o) })
                })
            }
            mat_mat
        });
    )*};
}
pub(super) use simd_rows;

/// In a const block building `$k`: dedicated multi-token kernels (`simd::$mm`) of the listed
/// types, in place of the per-token loop.
macro_rules! simd_mat_mat {
    ($k:ident; $($T:ident => $mm:ident;)*) => {$(
        $k.mat_mat[GgmlType::$T.slot()] = Some({
            fn mat_mat(n: usize, w: &[u8], n_rows: usize, a: &[u8], n_tok: usize, out: &mut [f32], stride: usize) {
                $crate::quant::adapt::mat_mat_with::<ty::$T>(n, w, n_rows, a, n_tok, out, stride, |w, a, nr, nt, o, s| unsafe {
                    simd::$mm(w, a, nr, nt, o, s)
                })
            }
            mat_mat
        });
    )*};
}
pub(super) use simd_mat_mat;

/// Module-level `quant_q8_0`, `quant_q8_1`, `quant_q8_k` over `simd`'s quantizers, and
/// `quantizers(k)`, which puts them (and the f16 row kernels and SwiGLU's product of `simd`)
/// into a set being built.
macro_rules! simd_common {
    () => {
        fn quant_q8_0(x: &[f32], out: &mut [u8]) {
            $crate::quant::adapt::quantize_with::<BlockQ8_0>(x, out, |x, o| unsafe { simd::quantize_row_q8_0(x, o) })
        }
        #[allow(dead_code)]
        fn quant_q8_1(x: &[f32], out: &mut [u8]) {
            $crate::quant::adapt::quantize_with::<BlockQ8_1>(x, out, |x, o| unsafe { simd::quantize_row_q8_1(x, o) })
        }
        fn quant_q8_k(x: &[f32], out: &mut [u8]) {
            $crate::quant::adapt::quantize_with::<BlockQ8K>(x, out, |x, o| unsafe { simd::quantize_row_q8_k(x, o) })
        }

        const fn common(mut k: Kernels) -> Kernels {
            k.quant[GgmlType::Q8_0.slot()] = Some(quant_q8_0);
            k.quant[GgmlType::Q8_1.slot()] = Some(quant_q8_1);
            k.quant[GgmlType::Q8_K.slot()] = Some(quant_q8_k);
            k.f16_dot = |x, y| unsafe { simd::vec_dot_f16_f32(x, y) };
            k.f16_axpy = |a, x, y| unsafe { simd::axpy_f16_f32(a, x, y) };
            k.silu_mul = |g, u| unsafe { simd::silu_mul(g, u) };
            k
        }
    };
}
pub(super) use simd_common;

/// A set's [`Packing`]: its tile layout module `tile` (`ROWS`, `tile_bytes`, `$pack`), its
/// packed kernels `k::$kernel` per listed type, and the quantizers of its activation rows
/// (`$q8x32` writes Q8x32 rows, `$q8_k` is a Q8_K quantizer). Each wrapper checks a call's
/// extents ([`packed_mat_mat_bytes`]) before the kernel runs.
macro_rules! packing {
    ($pack:ident, $q8x32:expr, $q8_k:expr; $($T:ident => $kernel:ident;)*) => {
        pub(in crate::quant) static PACKING: Packing = Packing {
            layout: LAYOUT,
            tile_rows: tile::ROWS,
            tile_bytes: tile::tile_bytes,
            pack_tile: tile::$pack,
            act: $crate::quant::packed::PackedAct::of,
            quantize_act,
            mat_mat: packed_mat_mat,
        };

        fn quantize_act(ty: GgmlType, x: &[f32], out: &mut [u8]) {
            use $crate::quant::packed::PackedAct;
            let Some(need) = PackedAct::of(ty).and_then(|a| a.row_bytes(x.len())) else { return };
            let Some(out) = out.get_mut(..need) else { return };
            match PackedAct::of(ty) {
                Some(PackedAct::Q8x32) => ($q8x32)(x, out),
                Some(PackedAct::Q8xK) => $crate::quant::packed::quantize_q8xk(x, out, $q8_k),
                None => {}
            }
        }

        fn packed_mat_mat(ty: GgmlType) -> Option<$crate::quant::packed::PackedMatMatFn> {
            match ty {
                $(GgmlType::$T => Some({
                    fn mm(cols: usize, tiles: &[u8], n_rows: usize, act: &[u8], n_tok: usize, out: $crate::quant::packed::OutRows<'_>, stride: usize) {
                        if $crate::quant::sets::packed_mat_mat_bytes(&PACKING, GgmlType::$T, cols, tiles, n_rows, act, n_tok, out.len(), stride) {
                            // SAFETY: CPU features checked before the set is handed out; extents above.
                            unsafe { k::$kernel(cols, tiles, n_rows, act, n_tok, out, stride) }
                        }
                    }
                    mm
                }),)*
                _ => None,
            }
        }
    };
}
pub(super) use packing;

/// Whether a packed kernel call's buffers have the extents it reads and writes (see
/// [`PackedMatMatFn`](super::packed::PackedMatMatFn)). Calls with nothing to do are refused too.
#[allow(clippy::too_many_arguments, dead_code)]
pub(super) fn packed_mat_mat_bytes(
    p: &Packing,
    ty: GgmlType,
    cols: usize,
    tiles: &[u8],
    n_rows: usize,
    act: &[u8],
    n_tok: usize,
    out_len: usize,
    stride: usize,
) -> bool {
    let (Some(tb), Some(ab)) = ((p.tile_bytes)(ty, cols), p.act_row_bytes(ty, cols)) else {
        return false;
    };
    if n_rows == 0 || n_tok == 0 || (n_tok > 1 && stride < n_rows) {
        return false;
    }
    let tiles_ok = n_rows.div_ceil(p.tile_rows).checked_mul(tb).is_some_and(|need| tiles.len() >= need);
    let act_ok = n_tok.checked_mul(ab).is_some_and(|need| act.len() >= need);
    let out_ok =
        (n_tok - 1).checked_mul(stride).and_then(|v| v.checked_add(n_rows)).is_some_and(|need| out_len >= need);
    tiles_ok && act_ok && out_ok
}

// ---------------------------------------------------------------------------------------------
// Attention chunks

/// Whether an [`AttnChunkFn`](super::AttnChunkFn) call's buffers have the sizes it reads and
/// writes.
pub(super) fn attn_chunk_ok(
    q: &[f32],
    heads: usize,
    rows: KvHeadRows<'_>,
    slots: &[u32],
    scores: &[f32],
    out: &[f32],
) -> bool {
    if heads == 0 || q.is_empty() || q.len() % heads != 0 {
        return false;
    }
    let hd = q.len() / heads;
    // Elements (or scales) `stride * slot + width` must fit in `len` for every slot.
    let fits = |stride: usize, width: usize, len: usize| {
        slots
            .iter()
            .all(|&s| (s as usize).checked_mul(stride).and_then(|o| o.checked_add(width)).is_some_and(|end| end <= len))
    };
    let rows_ok = match rows {
        KvHeadRows::F16 { keys, values, stride } => fits(stride, hd, keys.len().min(values.len())),
        KvHeadRows::Int8Fp8 {
            keys,
            key_scales,
            values,
            value_scales,
            stride,
            key_scale_stride,
            value_scale_stride,
        } => {
            hd % super::KEY_GROUP == 0
                && fits(stride, hd, keys.len().min(values.len()))
                && fits(key_scale_stride, hd / super::KEY_GROUP, key_scales.len())
                && fits(value_scale_stride, 1, value_scales.len())
        }
    };
    heads.checked_mul(slots.len()).is_some_and(|need| scores.len() >= need)
        && heads.checked_mul(hd + 2).is_some_and(|need| out.len() >= need)
        && rows_ok
}

/// A set's attention chunk: its own `kernel` where it handles the head size (`handles`), else
/// the reference's plan over the set's f16 row kernels; nothing when the sizes do not check out
/// ([`attn_chunk_ok`], which the kernel relies on).
#[allow(dead_code)] // not every target has a SIMD attention kernel
#[allow(clippy::too_many_arguments)]
pub(super) fn simd_attn_chunk(
    handles: fn(usize) -> bool,
    kernel: impl Fn(&[f32], usize, KvHeadRows<'_>, &[u32], f32, &mut [f32], &mut [f32]),
    dot: impl Fn(&[f16], &[f32]) -> f32,
    axpy: impl Fn(f32, &[f16], &mut [f32]),
    q: &[f32],
    heads: usize,
    rows: KvHeadRows<'_>,
    slots: &[u32],
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
) {
    if !attn_chunk_ok(q, heads, rows, slots, scores, out) {
        return;
    }
    if handles(q.len() / heads) {
        kernel(q, heads, rows, slots, scale, scores, out)
    } else {
        r::attn_chunk_rows(dot, axpy, q, heads, rows, slots, scale, scores, out)
    }
}
