//! Byte-level kernel tables and run-time CPU selection.
//!
//! The byte-level functions are the boundary to untrusted sizes: each checks lengths in O(1)
//! and views the bytes as blocks. Misaligned input (never produced by GGUF's aligned tensor
//! data or by [`ActBuf`](super::ActBuf)) is copied to an aligned buffer first, so results never
//! depend on where the bytes happen to live.

use std::borrow::Cow;
use std::sync::OnceLock;

use half::{bf16, f16};

use super::blocks::*;
use super::packed::Packing;
use super::reference as r;
use super::{AttnChunkFn, DequantizeFn, GgmlType, KvHeadRows, MatMatFn, MatVecFn, QuantizeFn, VecDotFn};

/// One slot per `GgmlType`.
const N_TYPES: usize = 11;

const fn slot(t: GgmlType) -> usize {
    use GgmlType::*;
    match t {
        F32 => 0,
        F16 => 1,
        BF16 => 2,
        Q4_0 => 3,
        Q4_1 => 4,
        Q5_0 => 5,
        Q8_0 => 6,
        Q8_1 => 7,
        Q4_K => 8,
        Q6_K => 9,
        Q8_K => 10,
    }
}

/// A set of kernels for one instruction set. Only obtainable through [`kernels`],
/// [`reference_kernels`] and [`available_kernels`], which hand out a SIMD set only after
/// checking the CPU supports it: that is what makes its safe function pointers sound.
pub struct Kernels {
    /// Instruction set name: `"reference"`, `"avx2"`, `"avxvnni"`, `"avx512"`, `"neon"`,
    /// `"dotprod"` or `"i8mm"`.
    pub isa: &'static str,
    dot: [Option<VecDotFn>; N_TYPES],
    mat_vec: [Option<MatVecFn>; N_TYPES],
    mat_mat: [Option<MatMatFn>; N_TYPES],
    quant: [Option<QuantizeFn>; N_TYPES],
    deq: [Option<DequantizeFn>; N_TYPES],
    f16_dot: fn(&[f16], &[f32]) -> f32,
    f16_axpy: fn(f32, &[f16], &mut [f32]),
    silu_mul: fn(&mut [f32], &[f32]),
    attn_chunk: AttnChunkFn,
    packing: Option<&'static Packing>,
}

impl Kernels {
    /// Dot product of one row of weight type `w` with an activation row in
    /// `w.activation_type()`. `None` for activation-only types.
    pub fn vec_dot(&self, w: GgmlType) -> Option<VecDotFn> {
        self.dot[slot(w)]
    }

    /// Matrix-vector product over consecutive rows (one call per matrix or thread share).
    pub fn mat_vec(&self, w: GgmlType) -> Option<MatVecFn> {
        self.mat_vec[slot(w)]
    }

    /// Matrix-matrix product: several weight rows against several activation rows (prefill).
    /// Present wherever `mat_vec` is; types without a dedicated kernel loop over `mat_vec`.
    pub fn mat_mat(&self, w: GgmlType) -> Option<MatMatFn> {
        self.mat_mat[slot(w)]
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
    pub fn silu_mul(&self) -> fn(&mut [f32], &[f32]) {
        self.silu_mul
    }

    /// f32 row -> activation format `act` (`Q8_0`, `Q8_1`, `Q8_K`, or `F32`, which copies).
    pub fn quantize(&self, act: GgmlType) -> Option<QuantizeFn> {
        self.quant[slot(act)]
    }

    /// One row of `w` -> f32 (all types, activation formats included).
    pub fn dequantize(&self, w: GgmlType) -> Option<DequantizeFn> {
        self.deq[slot(w)]
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

#[inline]
fn dot_bytes<W: Block, A: Block>(n: usize, w: &[u8], a: &[u8], f: impl Fn(&[W], &[A]) -> f32) -> f32 {
    let (Some(w), Some(a)) = (prefix::<W>(n, w), prefix::<A>(n, a)) else {
        return 0.0;
    };
    f(&blocks_of::<W>(w), &blocks_of::<A>(a))
}

#[inline]
fn mat_vec_bytes<W: Block, A: Block>(
    n: usize,
    w: &[u8],
    a: &[u8],
    out: &mut [f32],
    f: impl Fn(&[W], &[A], &mut [f32]),
) {
    let rows = out.len();
    if n % W::ELEMS != 0 {
        return;
    }
    let (Some(total), Some(a)) = (n.checked_mul(rows), prefix::<A>(n, a)) else {
        return;
    };
    let Some(w) = prefix::<W>(total, w) else {
        return;
    };
    if n == 0 {
        out.fill(0.0);
        return;
    }
    f(&blocks_of::<W>(w), &blocks_of::<A>(a), out)
}

/// Checks sizes for [`MatMatFn`] and hands `f` exactly `n_rows` weight rows and `n_tok`
/// activation rows as blocks (`n_rows`, `n_tok` > 0 and `n` > 0 by then).
#[allow(clippy::too_many_arguments)]
#[inline]
fn mat_mat_bytes<W: Block, A: Block>(
    n: usize,
    w: &[u8],
    n_rows: usize,
    a: &[u8],
    n_tok: usize,
    out: &mut [f32],
    stride: usize,
    f: impl Fn(&[W], &[A], usize, usize, &mut [f32], usize),
) {
    if n % W::ELEMS != 0 || n_rows == 0 || n_tok == 0 || (n_tok > 1 && stride < n_rows) {
        return;
    }
    // The last output written is out[(n_tok - 1) * stride + n_rows - 1].
    let Some(need) = (n_tok - 1).checked_mul(stride).and_then(|v| v.checked_add(n_rows)) else {
        return;
    };
    let (Some(w_elems), Some(a_elems)) = (n.checked_mul(n_rows), n.checked_mul(n_tok)) else {
        return;
    };
    let (Some(w), Some(a)) = (prefix::<W>(w_elems, w), prefix::<A>(a_elems, a)) else {
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
    f(&blocks_of::<W>(w), &blocks_of::<A>(a), n_rows, n_tok, out, stride)
}

/// Generic token loop: one `mat_vec` call per activation row. `a` holds `n_tok` rows.
fn per_token<W: Block, A: Block>(
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

#[inline]
fn quant_bytes<A: Block>(x: &[f32], out: &mut [u8], f: impl Fn(&[f32], &mut [A])) {
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

#[inline]
fn deq_bytes<W: Block>(w: &[u8], out: &mut [f32], f: impl Fn(&[W], &mut [f32])) {
    if let Some(w) = prefix::<W>(out.len(), w) {
        f(&blocks_of::<W>(w), out)
    }
}

/// Generic row loop for the reference set.
fn rows<W: Block, A: Block>(w: &[W], a: &[A], out: &mut [f32], dot: impl Fn(&[W], &[A]) -> f32) {
    if a.is_empty() {
        out.fill(0.0);
        return;
    }
    for (o, row) in out.iter_mut().zip(w.chunks_exact(a.len())) {
        *o = dot(row, a);
    }
}

/// Declares the byte-level `fn` items of one kernel set (they must be plain `fn`s to fit the
/// pointer types). Each `=> expr` is called with the typed block slices.
macro_rules! byte_fns {
    (
        dot { $($dname:ident: $W:ty, $A:ty => $dot:expr;)* }
        mat_vec { $($mname:ident: $MW:ty, $MA:ty => $mv:expr;)* }
        mat_mat { $($mmname:ident: $MMW:ty, $MMA:ty => $mm:expr;)* }
        quant { $($qname:ident: $Q:ty => $quant:expr;)* }
        deq { $($xname:ident: $X:ty => $deq:expr;)* }
    ) => {
        $(pub(super) fn $dname(n: usize, w: &[u8], a: &[u8]) -> f32 {
            dot_bytes::<$W, $A>(n, w, a, $dot)
        })*
        $(pub(super) fn $mname(n: usize, w: &[u8], a: &[u8], out: &mut [f32]) {
            mat_vec_bytes::<$MW, $MA>(n, w, a, out, $mv)
        })*
        $(pub(super) fn $mmname(
            n: usize, w: &[u8], n_rows: usize, a: &[u8], n_tok: usize, out: &mut [f32], stride: usize,
        ) {
            mat_mat_bytes::<$MMW, $MMA>(n, w, n_rows, a, n_tok, out, stride, $mm)
        })*
        $(pub(super) fn $qname(x: &[f32], out: &mut [u8]) {
            quant_bytes::<$Q>(x, out, $quant)
        })*
        $(pub(super) fn $xname(w: &[u8], out: &mut [f32]) {
            deq_bytes::<$X>(w, out, $deq)
        })*
    };
}

mod reference_fns {
    use super::*;

    byte_fns! {
        dot {
            dot_f32: f32, f32 => r::vec_dot_f32_f32;
            dot_f16: f16, f32 => r::vec_dot_f16_f32;
            dot_bf16: bf16, f32 => r::vec_dot_bf16_f32;
            dot_q4_0: BlockQ4_0, BlockQ8_0 => r::vec_dot_q4_0_q8_0;
            dot_q4_1: BlockQ4_1, BlockQ8_1 => r::vec_dot_q4_1_q8_1;
            dot_q5_0: BlockQ5_0, BlockQ8_0 => r::vec_dot_q5_0_q8_0;
            dot_q8_0: BlockQ8_0, BlockQ8_0 => r::vec_dot_q8_0_q8_0;
            dot_q4_k: BlockQ4K, BlockQ8K => r::vec_dot_q4_k_q8_k;
            dot_q6_k: BlockQ6K, BlockQ8K => r::vec_dot_q6_k_q8_k;
        }
        mat_vec {
            mv_f32: f32, f32 => |w, a, o| rows(w, a, o, r::vec_dot_f32_f32);
            mv_f16: f16, f32 => |w, a, o| rows(w, a, o, r::vec_dot_f16_f32);
            mv_bf16: bf16, f32 => |w, a, o| rows(w, a, o, r::vec_dot_bf16_f32);
            mv_q4_0: BlockQ4_0, BlockQ8_0 => |w, a, o| rows(w, a, o, r::vec_dot_q4_0_q8_0);
            mv_q4_1: BlockQ4_1, BlockQ8_1 => |w, a, o| rows(w, a, o, r::vec_dot_q4_1_q8_1);
            mv_q5_0: BlockQ5_0, BlockQ8_0 => |w, a, o| rows(w, a, o, r::vec_dot_q5_0_q8_0);
            mv_q8_0: BlockQ8_0, BlockQ8_0 => |w, a, o| rows(w, a, o, r::vec_dot_q8_0_q8_0);
            mv_q4_k: BlockQ4K, BlockQ8K => |w, a, o| rows(w, a, o, r::vec_dot_q4_k_q8_k);
            mv_q6_k: BlockQ6K, BlockQ8K => |w, a, o| rows(w, a, o, r::vec_dot_q6_k_q8_k);
        }
        mat_mat {
            mm_f32: f32, f32 => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| rows(w, a, o, r::vec_dot_f32_f32));
            mm_f16: f16, f32 => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| rows(w, a, o, r::vec_dot_f16_f32));
            mm_bf16: bf16, f32 => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| rows(w, a, o, r::vec_dot_bf16_f32));
            mm_q4_0: BlockQ4_0, BlockQ8_0 => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| rows(w, a, o, r::vec_dot_q4_0_q8_0));
            mm_q4_1: BlockQ4_1, BlockQ8_1 => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| rows(w, a, o, r::vec_dot_q4_1_q8_1));
            mm_q5_0: BlockQ5_0, BlockQ8_0 => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| rows(w, a, o, r::vec_dot_q5_0_q8_0));
            mm_q8_0: BlockQ8_0, BlockQ8_0 => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| rows(w, a, o, r::vec_dot_q8_0_q8_0));
            mm_q4_k: BlockQ4K, BlockQ8K => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| rows(w, a, o, r::vec_dot_q4_k_q8_k));
            mm_q6_k: BlockQ6K, BlockQ8K => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| rows(w, a, o, r::vec_dot_q6_k_q8_k));
        }
        quant {
            quant_f32: f32 => r::quantize_row_f32;
            quant_q8_0: BlockQ8_0 => r::quantize_row_q8_0;
            quant_q8_1: BlockQ8_1 => r::quantize_row_q8_1;
            quant_q8_k: BlockQ8K => r::quantize_row_q8_k;
        }
        deq {
            deq_f32: f32 => r::dequantize_row_f32;
            deq_f16: f16 => r::dequantize_row_f16;
            deq_bf16: bf16 => r::dequantize_row_bf16;
            deq_q4_0: BlockQ4_0 => r::dequantize_row_q4_0;
            deq_q4_1: BlockQ4_1 => r::dequantize_row_q4_1;
            deq_q5_0: BlockQ5_0 => r::dequantize_row_q5_0;
            deq_q8_0: BlockQ8_0 => r::dequantize_row_q8_0;
            deq_q8_1: BlockQ8_1 => r::dequantize_row_q8_1;
            deq_q4_k: BlockQ4K => r::dequantize_row_q4_k;
            deq_q6_k: BlockQ6K => r::dequantize_row_q6_k;
            deq_q8_k: BlockQ8K => r::dequantize_row_q8_k;
        }
    }
}

/// Builds a table from `(type, fn)` pairs (const so the kernel sets can be statics).
macro_rules! table {
    ($ty:ty; $($t:ident => $f:expr),* $(,)?) => {{
        let mut t: [Option<$ty>; N_TYPES] = [None; N_TYPES];
        $(t[slot(GgmlType::$t)] = Some($f);)*
        t
    }};
}

/// Dequantization is not on the hot path (embedding rows, debugging): every set shares the
/// reference one.
const DEQUANTIZE: [Option<DequantizeFn>; N_TYPES] = {
    use reference_fns::*;
    table! { DequantizeFn;
        F32 => deq_f32, F16 => deq_f16, BF16 => deq_bf16, Q4_0 => deq_q4_0, Q4_1 => deq_q4_1,
        Q5_0 => deq_q5_0, Q8_0 => deq_q8_0, Q8_1 => deq_q8_1, Q4_K => deq_q4_k, Q6_K => deq_q6_k,
        Q8_K => deq_q8_k,
    }
};

static REFERENCE: Kernels = {
    use reference_fns::*;
    Kernels {
        isa: "reference",
        dot: table! { VecDotFn;
            F32 => dot_f32, F16 => dot_f16, BF16 => dot_bf16, Q4_0 => dot_q4_0, Q4_1 => dot_q4_1,
            Q5_0 => dot_q5_0, Q8_0 => dot_q8_0, Q4_K => dot_q4_k, Q6_K => dot_q6_k,
        },
        mat_vec: table! { MatVecFn;
            F32 => mv_f32, F16 => mv_f16, BF16 => mv_bf16, Q4_0 => mv_q4_0, Q4_1 => mv_q4_1,
            Q5_0 => mv_q5_0, Q8_0 => mv_q8_0, Q4_K => mv_q4_k, Q6_K => mv_q6_k,
        },
        mat_mat: table! { MatMatFn;
            F32 => mm_f32, F16 => mm_f16, BF16 => mm_bf16, Q4_0 => mm_q4_0, Q4_1 => mm_q4_1,
            Q5_0 => mm_q5_0, Q8_0 => mm_q8_0, Q4_K => mm_q4_k, Q6_K => mm_q6_k,
        },
        quant: table! { QuantizeFn; F32 => quant_f32, Q8_0 => quant_q8_0, Q8_1 => quant_q8_1, Q8_K => quant_q8_k },
        deq: DEQUANTIZE,
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
};

/// Whether an [`AttnChunkFn`] call's buffers have the sizes it reads and writes.
fn attn_chunk_ok(q: &[f32], heads: usize, rows: KvHeadRows<'_>, slots: &[u32], scores: &[f32], out: &[f32]) -> bool {
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
fn simd_attn_chunk(
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

/// A SIMD kernel set: byte-level wrappers over `crate::quant::$simd` and its table. The
/// `unsafe` calls are sound because the table is handed out only by `$detect`, which checks the
/// CPU features the module's functions are compiled for. `$special` lists dedicated `mat_mat`
/// kernels that replace the per-token loop over `mat_vec`; `$packing` the set's repacked layout;
/// `$attn` its attention chunk.
macro_rules! simd_set {
    ($fns:ident, $table:ident, $($simd:ident)::+, $isa:literal, { $($special:ident => $sfn:path),* $(,)? }, $packing:expr, $attn:expr) => {
        mod $fns {
            use super::*;
            use crate::quant::$($simd)::+ as simd;

            byte_fns! {
                dot {
                    dot_f32: f32, f32 => |w, a| unsafe { simd::vec_dot_f32_f32(w, a) };
                    dot_f16: f16, f32 => |w, a| unsafe { simd::vec_dot_f16_f32(w, a) };
                    dot_bf16: bf16, f32 => |w, a| unsafe { simd::vec_dot_bf16_f32(w, a) };
                    dot_q4_0: BlockQ4_0, BlockQ8_0 => |w, a| unsafe { simd::vec_dot_q4_0_q8_0(w, a) };
                    dot_q4_1: BlockQ4_1, BlockQ8_1 => |w, a| unsafe { simd::vec_dot_q4_1_q8_1(w, a) };
                    dot_q5_0: BlockQ5_0, BlockQ8_0 => |w, a| unsafe { simd::vec_dot_q5_0_q8_0(w, a) };
                    dot_q8_0: BlockQ8_0, BlockQ8_0 => |w, a| unsafe { simd::vec_dot_q8_0_q8_0(w, a) };
                    dot_q4_k: BlockQ4K, BlockQ8K => |w, a| unsafe { simd::vec_dot_q4_k_q8_k(w, a) };
                    dot_q6_k: BlockQ6K, BlockQ8K => |w, a| unsafe { simd::vec_dot_q6_k_q8_k(w, a) };
                }
                mat_vec {
                    mv_f32: f32, f32 => |w, a, o| unsafe { simd::mat_vec_f32_f32(w, a, o) };
                    mv_f16: f16, f32 => |w, a, o| unsafe { simd::mat_vec_f16_f32(w, a, o) };
                    mv_bf16: bf16, f32 => |w, a, o| unsafe { simd::mat_vec_bf16_f32(w, a, o) };
                    mv_q4_0: BlockQ4_0, BlockQ8_0 => |w, a, o| unsafe { simd::mat_vec_q4_0_q8_0(w, a, o) };
                    mv_q4_1: BlockQ4_1, BlockQ8_1 => |w, a, o| unsafe { simd::mat_vec_q4_1_q8_1(w, a, o) };
                    mv_q5_0: BlockQ5_0, BlockQ8_0 => |w, a, o| unsafe { simd::mat_vec_q5_0_q8_0(w, a, o) };
                    mv_q8_0: BlockQ8_0, BlockQ8_0 => |w, a, o| unsafe { simd::mat_vec_q8_0_q8_0(w, a, o) };
                    mv_q4_k: BlockQ4K, BlockQ8K => |w, a, o| unsafe { simd::mat_vec_q4_k_q8_k(w, a, o) };
                    mv_q6_k: BlockQ6K, BlockQ8K => |w, a, o| unsafe { simd::mat_vec_q6_k_q8_k(w, a, o) };
                }
                mat_mat {
                    mm_f32: f32, f32 => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| unsafe { simd::mat_vec_f32_f32(w, a, o) });
                    mm_f16: f16, f32 => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| unsafe { simd::mat_vec_f16_f32(w, a, o) });
                    mm_bf16: bf16, f32 => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| unsafe { simd::mat_vec_bf16_f32(w, a, o) });
                    mm_q4_0: BlockQ4_0, BlockQ8_0 => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| unsafe { simd::mat_vec_q4_0_q8_0(w, a, o) });
                    mm_q4_1: BlockQ4_1, BlockQ8_1 => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| unsafe { simd::mat_vec_q4_1_q8_1(w, a, o) });
                    mm_q5_0: BlockQ5_0, BlockQ8_0 => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| unsafe { simd::mat_vec_q5_0_q8_0(w, a, o) });
                    mm_q8_0: BlockQ8_0, BlockQ8_0 => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| unsafe { simd::mat_vec_q8_0_q8_0(w, a, o) });
                    mm_q4_k: BlockQ4K, BlockQ8K => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| unsafe { simd::mat_vec_q4_k_q8_k(w, a, o) });
                    mm_q6_k: BlockQ6K, BlockQ8K => |w, a, nr, nt, o, s| per_token(w, a, nr, nt, o, s, |w, a, o| unsafe { simd::mat_vec_q6_k_q8_k(w, a, o) });
                }
                quant {
                    quant_q8_0: BlockQ8_0 => |x, o| unsafe { simd::quantize_row_q8_0(x, o) };
                    quant_q8_1: BlockQ8_1 => |x, o| unsafe { simd::quantize_row_q8_1(x, o) };
                    quant_q8_k: BlockQ8K => |x, o| unsafe { simd::quantize_row_q8_k(x, o) };
                }
                deq {}
            }
        }

        static $table: Kernels = {
            use $fns::*;
            Kernels {
                isa: $isa,
                dot: table! { VecDotFn;
                    F32 => dot_f32, F16 => dot_f16, BF16 => dot_bf16, Q4_0 => dot_q4_0, Q4_1 => dot_q4_1,
                    Q5_0 => dot_q5_0, Q8_0 => dot_q8_0, Q4_K => dot_q4_k, Q6_K => dot_q6_k,
                },
                mat_vec: table! { MatVecFn;
                    F32 => mv_f32, F16 => mv_f16, BF16 => mv_bf16, Q4_0 => mv_q4_0, Q4_1 => mv_q4_1,
                    Q5_0 => mv_q5_0, Q8_0 => mv_q8_0, Q4_K => mv_q4_k, Q6_K => mv_q6_k,
                },
                mat_mat: {
                    // Not mutated when a set has no dedicated kernels.
                    #[allow(unused_mut)]
                    let mut t = table! { MatMatFn;
                        F32 => mm_f32, F16 => mm_f16, BF16 => mm_bf16, Q4_0 => mm_q4_0, Q4_1 => mm_q4_1,
                        Q5_0 => mm_q5_0, Q8_0 => mm_q8_0, Q4_K => mm_q4_k, Q6_K => mm_q6_k,
                    };
                    $(t[slot(GgmlType::$special)] = Some($sfn);)*
                    t
                },
                quant: table! { QuantizeFn;
                    F32 => reference_fns::quant_f32, Q8_0 => quant_q8_0, Q8_1 => quant_q8_1, Q8_K => quant_q8_k,
                },
                deq: DEQUANTIZE,
                f16_dot: |x, y| unsafe { crate::quant::$($simd)::+::vec_dot_f16_f32(x, y) },
                f16_axpy: |a, x, y| unsafe { crate::quant::$($simd)::+::axpy_f16_f32(a, x, y) },
                silu_mul: |g, u| unsafe { crate::quant::$($simd)::+::silu_mul(g, u) },
                attn_chunk: $attn,
                packing: $packing,
            }
        };
    };
}

/// Byte-level wrappers of a module's dedicated multi-token kernels (`mat_mat_*` with the
/// reference's type suffixes), for a set's `$special` entries. Sound on the same terms as the
/// set that names them.
macro_rules! dedicated_mat_mat {
    ($(#[$attr:meta])* $fns:ident, $($simd:ident)::+) => {
        $(#[$attr])*
        mod $fns {
            use super::*;
            use crate::quant::$($simd)::+ as simd;

            byte_fns! {
                dot {}
                mat_vec {}
                mat_mat {
                    mm_q4_0: BlockQ4_0, BlockQ8_0 => |w, a, nr, nt, o, s| unsafe { simd::mat_mat_q4_0_q8_0(w, a, nr, nt, o, s) };
                    mm_q4_1: BlockQ4_1, BlockQ8_1 => |w, a, nr, nt, o, s| unsafe { simd::mat_mat_q4_1_q8_1(w, a, nr, nt, o, s) };
                    mm_q5_0: BlockQ5_0, BlockQ8_0 => |w, a, nr, nt, o, s| unsafe { simd::mat_mat_q5_0_q8_0(w, a, nr, nt, o, s) };
                    mm_q8_0: BlockQ8_0, BlockQ8_0 => |w, a, nr, nt, o, s| unsafe { simd::mat_mat_q8_0_q8_0(w, a, nr, nt, o, s) };
                    mm_q4_k: BlockQ4K, BlockQ8K => |w, a, nr, nt, o, s| unsafe { simd::mat_mat_q4_k_q8_k(w, a, nr, nt, o, s) };
                    mm_q6_k: BlockQ6K, BlockQ8K => |w, a, nr, nt, o, s| unsafe { simd::mat_mat_q6_k_q8_k(w, a, nr, nt, o, s) };
                }
                quant {}
                deq {}
            }
        }
    };
}

dedicated_mat_mat!(
    /// Dedicated AVX2 multi-token kernels: each weight block is decoded once for four tokens.
    #[cfg(target_arch = "x86_64")]
    avx2_mat_mat, x86::avx2
);

/// The attention chunk of the AVX2 and AVX-VNNI sets (see [`simd_attn_chunk`]).
#[cfg(target_arch = "x86_64")]
fn avx2_attn_chunk(
    q: &[f32],
    heads: usize,
    rows: KvHeadRows<'_>,
    slots: &[u32],
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
) {
    use crate::quant::x86::{avx2, avx2_attn};
    // SAFETY (all three): only the tables of sets that require AVX2, FMA and F16C point here,
    // and they are handed out after checking the CPU; `simd_attn_chunk` runs the kernel only
    // on checked sizes and a head size it handles.
    simd_attn_chunk(
        avx2_attn::handles_head_dim,
        |q, heads, rows, slots, scale, scores, out| unsafe {
            avx2_attn::attn_chunk(q, heads, rows, slots, scale, scores, out)
        },
        |x, y| unsafe { avx2::vec_dot_f16_f32(x, y) },
        |a, x, y| unsafe { avx2::axpy_f16_f32(a, x, y) },
        q,
        heads,
        rows,
        slots,
        scale,
        scores,
        out,
    )
}

#[cfg(target_arch = "x86_64")]
simd_set!(avx2_fns, AVX2, x86::avx2, "avx2", {
    Q4_0 => avx2_mat_mat::mm_q4_0, Q4_1 => avx2_mat_mat::mm_q4_1, Q5_0 => avx2_mat_mat::mm_q5_0,
    Q8_0 => avx2_mat_mat::mm_q8_0, Q4_K => avx2_mat_mat::mm_q4_k, Q6_K => avx2_mat_mat::mm_q6_k,
}, Some(&avx2_packed::PACKING), avx2_attn_chunk);

// The AVX-512 set: VNNI kernels on 16-row tiles when weights are repacked; on ggml's layout
// (repacking off) the AVX2 kernels, which every AVX-512 CPU runs.
#[cfg(all(target_arch = "x86_64", tern_avx512))]
simd_set!(avx512_fns, AVX512, x86::avx2, "avx512", {
    Q4_0 => avx2_mat_mat::mm_q4_0, Q4_1 => avx2_mat_mat::mm_q4_1, Q5_0 => avx2_mat_mat::mm_q5_0,
    Q8_0 => avx2_mat_mat::mm_q8_0, Q4_K => avx2_mat_mat::mm_q4_k, Q6_K => avx2_mat_mat::mm_q6_k,
}, Some(&avx512_packed::PACKING), |q, heads, rows, slots, scale, scores, out| {
    if !attn_chunk_ok(q, heads, rows, slots, scores, out) {
        return;
    }
    if q.len() / heads > crate::quant::x86::avx512_attn::MAX_HEAD_DIM {
        r::attn_chunk(q, heads, rows, slots, scale, scores, out)
    } else {
        // SAFETY: CPU features checked before this table is handed out; sizes and head size
        // just above.
        unsafe { crate::quant::x86::avx512_attn::attn_chunk(q, heads, rows, slots, scale, scores, out) }
    }
});

// The AVX-VNNI set: 256-bit `vpdpbusd` kernels on the AVX2 set's 8-row tiles when weights are
// repacked, the AVX2 kernels otherwise. Two tables of one set: the VEX encoding for AVX-VNNI
// CPUs, the EVEX one for AVX-512 CPUs (which lack AVX-VNNI but run the same operation).
#[cfg(all(target_arch = "x86_64", tern_avx512))]
simd_set!(avxvnni_vex_fns, AVXVNNI_VEX, x86::avx2, "avxvnni", {
    Q4_0 => avx2_mat_mat::mm_q4_0, Q4_1 => avx2_mat_mat::mm_q4_1, Q5_0 => avx2_mat_mat::mm_q5_0,
    Q8_0 => avx2_mat_mat::mm_q8_0, Q4_K => avx2_mat_mat::mm_q4_k, Q6_K => avx2_mat_mat::mm_q6_k,
}, Some(&avxvnni_vex_packed::PACKING), avx2_attn_chunk);

#[cfg(all(target_arch = "x86_64", tern_avx512))]
simd_set!(avxvnni_evex_fns, AVXVNNI_EVEX, x86::avx2, "avxvnni", {
    Q4_0 => avx2_mat_mat::mm_q4_0, Q4_1 => avx2_mat_mat::mm_q4_1, Q5_0 => avx2_mat_mat::mm_q5_0,
    Q8_0 => avx2_mat_mat::mm_q8_0, Q4_K => avx2_mat_mat::mm_q4_k, Q6_K => avx2_mat_mat::mm_q6_k,
}, Some(&avxvnni_evex_packed::PACKING), avx2_attn_chunk);

/// Inside a [`packed_set!`] module: each `$wrapper` checks a call's extents, then runs
/// `k::$kernel`; `mat_mat` maps each type to its wrapper.
macro_rules! packed_wrappers {
    ($($wrapper:ident => $kernel:ident, $ty:ident;)*) => {
        $(fn $wrapper(cols: usize, tiles: &[u8], n_rows: usize, act: &[u8], n_tok: usize, out: &mut [f32], stride: usize) {
            if packed_mat_mat_bytes(&PACKING, GgmlType::$ty, cols, tiles, n_rows, act, n_tok, out, stride) {
                // SAFETY: CPU features checked before the table is handed out; extents above.
                unsafe { k::$kernel(cols, tiles, n_rows, act, n_tok, out, stride) }
            }
        })*

        fn mat_mat(ty: GgmlType) -> Option<PackedMatMatFn> {
            match ty {
                $(GgmlType::$ty => Some($wrapper),)*
                _ => None,
            }
        }
    };
}

/// Safe wrappers of a set's packed kernels (`$tile`: the layout's `ROWS` and `tile_bytes`, and
/// `$pack` in it; `$kern`: `mat_mat_*` per type; `$fns`: the set's quantizers; `$q8x32`, where
/// given, a quantizer that writes Q8x32 rows itself instead of laying out `$fns`' Q8_1 blocks).
/// Sound because the tables that point here are handed out after checking the CPU features
/// both modules are compiled for, and [`packed_mat_mat_bytes`] checks the extents the kernels
/// read and write.
macro_rules! packed_set {
    ($(#[$attr:meta])* $name:ident, $fns:ident, $layout:literal, $($tile:ident)::+, $pack:ident, $($kern:ident)::+) => {
        packed_set!($(#[$attr])* $name, $fns, $layout, $($tile)::+, $pack, $($kern)::+,
            |x: &[f32], out: &mut [u8]| crate::quant::packed::quantize_q8x32(x, out, $fns::quant_q8_1));
    };
    ($(#[$attr:meta])* $name:ident, $fns:ident, $layout:literal, $($tile:ident)::+, $pack:ident, $($kern:ident)::+, $q8x32:expr) => {
        $(#[$attr])*
        mod $name {
            use super::*;
            use crate::quant::packed::{quantize_q8xk, PackedAct, PackedMatMatFn};
            use crate::quant::$($kern)::+ as k;
            use crate::quant::$($tile)::+ as tile;

            pub static PACKING: Packing = Packing {
                layout: $layout,
                tile_rows: tile::ROWS,
                tile_bytes: tile::tile_bytes,
                pack_tile: tile::$pack,
                act: PackedAct::of,
                quantize_act,
                mat_mat,
            };

            fn quantize_act(ty: GgmlType, x: &[f32], out: &mut [u8]) {
                let Some(need) = PackedAct::of(ty).and_then(|a| a.row_bytes(x.len())) else { return };
                let Some(out) = out.get_mut(..need) else { return };
                match PackedAct::of(ty) {
                    Some(PackedAct::Q8x32) => ($q8x32)(x, out),
                    Some(PackedAct::Q8xK) => quantize_q8xk(x, out, $fns::quant_q8_k),
                    None => {}
                }
            }

            packed_wrappers! {
                mm_q4_0 => mat_mat_q4_0, Q4_0;
                mm_q4_1 => mat_mat_q4_1, Q4_1;
                mm_q5_0 => mat_mat_q5_0, Q5_0;
                mm_q8_0 => mat_mat_q8_0, Q8_0;
                mm_q4_k => mat_mat_q4_k, Q4_K;
                mm_q6_k => mat_mat_q6_k, Q6_K;
            }
        }
    };
}

/// The x86 sets' Q8x32 activation rows, written by the AVX2 quantizer in one pass. Sound for
/// every x86 set: each is handed out only where `has_avx2` holds.
#[cfg(target_arch = "x86_64")]
const X86_Q8X32: fn(&[f32], &mut [u8]) = |x, out| unsafe { crate::quant::x86::avx2::quantize_q8x32(x, out) };

packed_set!(
    /// The AVX2 set's `vpmaddubsw` kernels on 8-row tiles.
    #[cfg(target_arch = "x86_64")]
    avx2_packed, avx2_fns, "x86-avx2-8", x86::tile8, pack_tile, x86::avx2_packed,
    X86_Q8X32
);

packed_set!(
    /// The AVX-512 set's VNNI kernels on 16-row tiles.
    #[cfg(all(target_arch = "x86_64", tern_avx512))]
    avx512_packed, avx512_fns, "x86-vnni-16", x86::tile16, pack_tile, x86::avx512,
    X86_Q8X32
);

packed_set!(
    /// The AVX-VNNI set's 256-bit `vpdpbusd` kernels on 8-row tiles, VEX-encoded.
    #[cfg(all(target_arch = "x86_64", tern_avx512))]
    avxvnni_vex_packed, avxvnni_vex_fns, "x86-vnni256-8", x86::tile8, pack_tile, x86::vnni256::vex,
    X86_Q8X32
);

packed_set!(
    /// The same kernels EVEX-encoded, for AVX-512 CPUs.
    #[cfg(all(target_arch = "x86_64", tern_avx512))]
    avxvnni_evex_packed, avxvnni_evex_fns, "x86-vnni256-8", x86::tile8, pack_tile, x86::vnni256::evex,
    X86_Q8X32
);

/// Whether a packed kernel call's buffers have the extents it reads and writes (see
/// [`PackedMatMatFn`](super::packed::PackedMatMatFn)). Calls with nothing to do are refused too.
#[allow(clippy::too_many_arguments, dead_code)]
fn packed_mat_mat_bytes(
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

/// The attention chunk of the aarch64 sets (see [`simd_attn_chunk`]).
#[cfg(target_arch = "aarch64")]
fn neon_attn_chunk(
    q: &[f32],
    heads: usize,
    rows: KvHeadRows<'_>,
    slots: &[u32],
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
) {
    use crate::quant::aarch64::{attn, neon};
    // SAFETY (all three): NEON is part of every aarch64 target; `simd_attn_chunk` runs the
    // kernel only on checked sizes and a head size it handles.
    simd_attn_chunk(
        attn::handles_head_dim,
        |q, heads, rows, slots, scale, scores, out| unsafe {
            attn::attn_chunk(q, heads, rows, slots, scale, scores, out)
        },
        |x, y| unsafe { neon::vec_dot_f16_f32(x, y) },
        |a, x, y| unsafe { neon::axpy_f16_f32(a, x, y) },
        q,
        heads,
        rows,
        slots,
        scale,
        scores,
        out,
    )
}

#[cfg(target_arch = "aarch64")]
simd_set!(neon_fns, NEON, aarch64::neon, "neon", {}, None, neon_attn_chunk);

#[cfg(target_arch = "aarch64")]
simd_set!(dotprod_fns, DOTPROD, aarch64::dotprod, "dotprod", {}, Some(&dotprod_packed::PACKING), neon_attn_chunk);

packed_set!(
    /// The dotprod set's `sdot` kernels on 8-row tiles of 4-byte column groups.
    #[cfg(target_arch = "aarch64")]
    dotprod_packed, dotprod_fns, "arm-sdot-8", aarch64::tile8, pack_tile, aarch64::dotprod
);

dedicated_mat_mat!(
    /// `smmla` multi-token kernels: 2 weight rows × 2 tokens per instruction.
    #[cfg(target_arch = "aarch64")]
    i8mm_mat_mat, aarch64::i8mm
);

// The i8mm set: `smmla` GEMM on ggml's layout (repacking off) and on 8-row tiles of 8-byte
// column groups.
#[cfg(target_arch = "aarch64")]
simd_set!(i8mm_fns, I8MM, aarch64::i8mm, "i8mm", {
    Q4_0 => i8mm_mat_mat::mm_q4_0, Q4_1 => i8mm_mat_mat::mm_q4_1, Q5_0 => i8mm_mat_mat::mm_q5_0,
    Q8_0 => i8mm_mat_mat::mm_q8_0, Q4_K => i8mm_mat_mat::mm_q4_k, Q6_K => i8mm_mat_mat::mm_q6_k,
}, Some(&i8mm_packed::PACKING), neon_attn_chunk);

packed_set!(
    /// The i8mm set's `smmla` kernels on 8-row tiles of 8-byte column groups (Q5_0: the dotprod
    /// set's tiles and kernel, which its CPUs run).
    #[cfg(target_arch = "aarch64")]
    i8mm_packed, i8mm_fns, "arm-smmla-8", aarch64::tile8, pack_tile_mmla, aarch64::i8mm
);

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
