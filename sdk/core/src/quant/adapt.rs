//! The byte-level boundary of every kernel: a tensor type at the type level ([`Tensor`],
//! [`Reference`]) and the adaptors that check a call's sizes against untrusted byte slices and
//! view them as that type's blocks. Kernel sets (`sets`) wrap their kernels in these; the type
//! table (`types`) builds the reference set's tables from them.
//!
//! Each adaptor checks lengths in O(1). Misaligned input (never produced by GGUF's aligned
//! tensor data or by [`ActBuf`](super::ActBuf)) is copied to an aligned buffer first, so
//! results never depend on where the bytes happen to live.

use std::borrow::Cow;

use super::blocks::*;
use super::GgmlType;

/// A tensor type at the type level: its block, and the block of the activation format its dot
/// products consume (its own for activation formats). Implemented by the type table's
/// `types::ty` markers.
pub trait Tensor: 'static {
    const TYPE: GgmlType;
    type Block: Block;
    type Act: Block;
}

/// A weight type's scalar reference functions.
pub trait Reference: Tensor {
    const DOT: fn(&[Self::Block], &[Self::Act]) -> f32;
}

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
