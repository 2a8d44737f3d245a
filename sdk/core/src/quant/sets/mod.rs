//! The kernel sets, one [`Kernels`] value per file, and the byte-level adaptors they share.
//!
//! Every set starts from the reference set's tables (expanded from the type table in
//! `types`) and replaces the entries it has kernels for, so a new type runs everywhere (on
//! the reference kernels) as soon as it is in the table, and a set lists only what it has.
//!
//! The byte-level functions are the boundary to untrusted sizes: each checks lengths in O(1)
//! and views the bytes as blocks. Misaligned input (never produced by GGUF's aligned tensor
//! data or by [`ActBuf`](super::ActBuf)) is copied to an aligned buffer first, so results never
//! depend on where the bytes happen to live.
//!
//! A SIMD set's `unsafe` calls are sound because its `Kernels` value is handed out only by
//! `dispatch`, after checking the CPU features its kernel modules are compiled for.

use std::borrow::Cow;

use half::f16;

use super::blocks::*;
use super::dispatch::Kernels;
use super::packed::Packing;
use super::reference as r;
use super::types::{reference_tables as ref_tables, Reference, Tensor};
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

// ---------------------------------------------------------------------------------------------
// Byte-level adaptors

/// `bytes` as blocks, copied to an aligned buffer when they are not aligned for `T`.
fn blocks_of<T: Block>(bytes: &[u8]) -> Cow<'_, [T]> {
    match as_blocks::<T>(bytes) {
        Some(b) => Cow::Borrowed(b),
        None => {
            let mut v = vec![T::zeroed(); bytes.len() / size_of::<T>()];
            let len = v.len() * size_of::<T>();
            as_bytes_mut(&mut v).copy_from_slice(&bytes[..len]);
            Cow::Owned(v)
        }
    }
}

/// The first `n` elements' worth of `T` blocks in `bytes`, or `None` if there are fewer or `n`
/// is not a whole number of blocks.
fn prefix<T: Block>(n: usize, bytes: &[u8]) -> Option<&[u8]> {
    if n % T::ELEMS != 0 {
        return None;
    }
    bytes.get(..(n / T::ELEMS).checked_mul(size_of::<T>())?)
}

/// [`VecDotFn`](super::VecDotFn)'s checks, then `f` on the blocks of type `T`.
#[inline]
pub(super) fn vec_dot_with<T: Tensor>(n: usize, w: &[u8], a: &[u8], f: impl Fn(&[T::Block], &[T::Act]) -> f32) -> f32 {
    let (Some(w), Some(a)) = (prefix::<T::Block>(n, w), prefix::<T::Act>(n, a)) else {
        return 0.0;
    };
    f(&blocks_of::<T::Block>(w), &blocks_of::<T::Act>(a))
}

/// [`MatVecFn`](super::MatVecFn)'s checks, then `f` on the rows' blocks and the activation's.
#[inline]
pub(super) fn mat_vec_with<T: Tensor>(
    n: usize,
    w: &[u8],
    a: &[u8],
    out: &mut [f32],
    f: impl Fn(&[T::Block], &[T::Act], &mut [f32]),
) {
    let rows = out.len();
    if n % T::Block::ELEMS != 0 {
        return;
    }
    let (Some(total), Some(a)) = (n.checked_mul(rows), prefix::<T::Act>(n, a)) else {
        return;
    };
    let Some(w) = prefix::<T::Block>(total, w) else {
        return;
    };
    if n == 0 {
        out.fill(0.0);
        return;
    }
    f(&blocks_of::<T::Block>(w), &blocks_of::<T::Act>(a), out)
}

/// Checks sizes for [`MatMatFn`](super::MatMatFn) and hands `f` exactly `n_rows` weight rows
/// and `n_tok` activation rows as blocks (`n_rows`, `n_tok` > 0 and `n` > 0 by then).
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn mat_mat_with<T: Tensor>(
    n: usize,
    w: &[u8],
    n_rows: usize,
    a: &[u8],
    n_tok: usize,
    out: &mut [f32],
    stride: usize,
    f: impl Fn(&[T::Block], &[T::Act], usize, usize, &mut [f32], usize),
) {
    if n % T::Block::ELEMS != 0 || n_rows == 0 || n_tok == 0 || (n_tok > 1 && stride < n_rows) {
        return;
    }
    // The last output written is out[(n_tok - 1) * stride + n_rows - 1].
    let Some(need) = (n_tok - 1).checked_mul(stride).and_then(|v| v.checked_add(n_rows)) else {
        return;
    };
    let (Some(w_elems), Some(a_elems)) = (n.checked_mul(n_rows), n.checked_mul(n_tok)) else {
        return;
    };
    let (Some(w), Some(a)) = (prefix::<T::Block>(w_elems, w), prefix::<T::Act>(a_elems, a)) else {
        return;
    };
    let Some(out) = out.get_mut(..need) else {
        return;
    };
    if n == 0 {
        for t in 0..n_tok {
            if let Some(o) = out.get_mut(t * stride..t * stride + n_rows) {
                o.fill(0.0);
            }
        }
        return;
    }
    f(&blocks_of::<T::Block>(w), &blocks_of::<T::Act>(a), n_rows, n_tok, out, stride)
}

/// Generic token loop: one `mat_vec` call per activation row. `a` holds `n_tok` rows.
pub(super) fn per_token<W: Block, A: Block>(
    w: &[W],
    a: &[A],
    n_rows: usize,
    n_tok: usize,
    out: &mut [f32],
    stride: usize,
    mat_vec: impl Fn(&[W], &[A], &mut [f32]),
) {
    let nb = a.len() / n_tok.max(1);
    if nb == 0 {
        return;
    }
    for (t, at) in a.chunks_exact(nb).take(n_tok).enumerate() {
        if let Some(o) = out.get_mut(t * stride..t * stride + n_rows) {
            mat_vec(w, at, o);
        }
    }
}

/// [`QuantizeFn`](super::QuantizeFn)'s checks, then `f` into blocks of `A`.
#[inline]
pub(super) fn quantize_with<A: Block>(x: &[f32], out: &mut [u8], f: impl Fn(&[f32], &mut [A])) {
    let Some(len) = prefix::<A>(x.len(), out).map(<[u8]>::len) else {
        return;
    };
    let out = &mut out[..len];
    match as_blocks_mut::<A>(out) {
        Some(blocks) => f(x, blocks),
        None => {
            let mut tmp = vec![A::zeroed(); out.len() / size_of::<A>()];
            f(x, &mut tmp);
            out.copy_from_slice(as_bytes(&tmp));
        }
    }
}

/// [`DequantizeFn`](super::DequantizeFn)'s checks, then `f` on the blocks of `W`.
#[inline]
pub(super) fn dequantize_with<W: Block>(w: &[u8], out: &mut [f32], f: impl Fn(&[W], &mut [f32])) {
    if let Some(w) = prefix::<W>(out.len(), w) {
        f(&blocks_of::<W>(w), out)
    }
}

/// Generic row loop: `out[r] = dot(row r, a)`.
pub(super) fn rows<W: Block, A: Block>(w: &[W], a: &[A], out: &mut [f32], dot: impl Fn(&[W], &[A]) -> f32) {
    if a.is_empty() {
        out.fill(0.0);
        return;
    }
    for (o, row) in out.iter_mut().zip(w.chunks_exact(a.len())) {
        *o = dot(row, a);
    }
}

// The reference kernels of every weight type, generic over the type table's markers.

pub(super) fn vec_dot_ref<T: Reference>(n: usize, w: &[u8], a: &[u8]) -> f32 {
    vec_dot_with::<T>(n, w, a, T::DOT)
}

pub(super) fn mat_vec_ref<T: Reference>(n: usize, w: &[u8], a: &[u8], out: &mut [f32]) {
    mat_vec_with::<T>(n, w, a, out, |w, a, o| rows(w, a, o, T::DOT))
}

pub(super) fn mat_mat_ref<T: Reference>(
    n: usize,
    w: &[u8],
    n_rows: usize,
    a: &[u8],
    n_tok: usize,
    out: &mut [f32],
    stride: usize,
) {
    mat_mat_with::<T>(n, w, n_rows, a, n_tok, out, stride, |w, a, nr, nt, o, s| {
        per_token(w, a, nr, nt, o, s, |w, a, o| rows(w, a, o, T::DOT))
    })
}

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
                $crate::quant::sets::vec_dot_with::<ty::$T>(n, w, a, |w, a| unsafe { simd::$dot(w, a) })
            }
            dot
        });
        $k.mat_vec[GgmlType::$T.slot()] = Some({
            fn mat_vec(n: usize, w: &[u8], a: &[u8], out: &mut [f32]) {
                $crate::quant::sets::mat_vec_with::<ty::$T>(n, w, a, out, |w, a, o| unsafe { simd::$mv(w, a, o) })
            }
            mat_vec
        });
        $k.mat_mat[GgmlType::$T.slot()] = Some({
            fn mat_mat(n: usize, w: &[u8], n_rows: usize, a: &[u8], n_tok: usize, out: &mut [f32], stride: usize) {
                $crate::quant::sets::mat_mat_with::<ty::$T>(n, w, n_rows, a, n_tok, out, stride, |w, a, nr, nt, o, s| {
                    $crate::quant::sets::per_token(w, a, nr, nt, o, s, |w, a, o| unsafe { simd::$mv(w, a, o) })
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
                $crate::quant::sets::mat_mat_with::<ty::$T>(n, w, n_rows, a, n_tok, out, stride, |w, a, nr, nt, o, s| unsafe {
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
            $crate::quant::sets::quantize_with::<BlockQ8_0>(x, out, |x, o| unsafe { simd::quantize_row_q8_0(x, o) })
        }
        #[allow(dead_code)]
        fn quant_q8_1(x: &[f32], out: &mut [u8]) {
            $crate::quant::sets::quantize_with::<BlockQ8_1>(x, out, |x, o| unsafe { simd::quantize_row_q8_1(x, o) })
        }
        fn quant_q8_k(x: &[f32], out: &mut [u8]) {
            $crate::quant::sets::quantize_with::<BlockQ8K>(x, out, |x, o| unsafe { simd::quantize_row_q8_k(x, o) })
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
                    fn mm(cols: usize, tiles: &[u8], n_rows: usize, act: &[u8], n_tok: usize, out: &mut [f32], stride: usize) {
                        if $crate::quant::sets::packed_mat_mat_bytes(&PACKING, GgmlType::$T, cols, tiles, n_rows, act, n_tok, out, stride) {
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
    out: &[f32],
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
        (n_tok - 1).checked_mul(stride).and_then(|v| v.checked_add(n_rows)).is_some_and(|need| out.len() >= need);
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
