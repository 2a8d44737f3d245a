//! The ARMv8.6 i8mm set: for several tokens (prefill), `smmla` multiplies a 2 × 8 block of two
//! weight rows by one of two tokens' activations, so one instruction yields four (row, token)
//! sums. It runs on ggml's layout: the two rows' and two tokens' bytes are interleaved in
//! registers. One token, and the odd row or token of a product, run the dotprod kernels, whose
//! names this module re-exports. Run only where `i8mm` (and `dotprod`) are detected.
//!
//! Each tile lane repeats [`super::vec_dot_q32`]'s (or the k-quants') f32 steps for its pair,
//! so a token's result is the one it gets alone.
//!
//! On repacked weights ([`super::tile8`] at width 8: a row pair's 8 quants per vector) one
//! kernel per type serves decode and prefill, on token pairs (a single token paired with
//! itself); Q5_0, Q5_1, Q5_K and IQ4_NL run the dotprod set's tiles.

use std::arch::aarch64::*;

pub use super::dotprod::*;
use super::tile8::{BlockLayout, TileWalk, ROWS};
use super::{fp16, fp16x8, load_i8x32, q4k_min_sum, q4k_quants, q6k_quants, Act32, Block32, KQuant};
use crate::quant::blocks::*;
use crate::quant::packed::{ActRow as Act, OutRows};
use crate::quant::GgmlType;

/// `acc + a · bᵀ` for the 2 × 8 signed byte matrices `a` and `b` (one row per 8-byte half):
/// lanes (a0·b0, a0·b1, a1·b0, a1·b1).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn smmla(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // No stable intrinsic on our minimum Rust; the directive scopes the extension to this asm.
    std::arch::asm!(
        ".arch_extension i8mm",
        "smmla {acc:v}.4s, {a:v}.16b, {b:v}.16b",
        acc = inout(vreg) acc,
        a = in(vreg) a,
        b = in(vreg) b,
        options(pure, nomem, nostack, preserves_flags),
    );
    acc
}

/// Low (`HI = false`) or high 8 bytes of `a`, then those of `b`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn halves<const HI: bool>(a: int8x16_t, b: int8x16_t) -> int8x16_t {
    let (a, b) = (vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b));
    vreinterpretq_s8_s64(if HI { vzip2q_s64(a, b) } else { vzip1q_s64(a, b) })
}

/// `acc` plus the 16-byte dot products of rows `x0`, `x1` with tokens `y0`, `y1`, as lanes
/// (x0·y0, x0·y1, x1·y0, x1·y1).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn tile16(acc: int32x4_t, x: (int8x16_t, int8x16_t), y: (int8x16_t, int8x16_t)) -> int32x4_t {
    let acc = smmla(acc, halves::<false>(x.0, x.1), halves::<false>(y.0, y.1));
    smmla(acc, halves::<true>(x.0, x.1), halves::<true>(y.0, y.1))
}

type Bytes32 = (int8x16_t, int8x16_t);

/// [`tile16`] over 32 bytes per row and token, from zero.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn tile32(x0: Bytes32, x1: Bytes32, y0: Bytes32, y1: Bytes32) -> int32x4_t {
    tile16(tile16(vdupq_n_s32(0), (x0.0, x1.0), (y0.0, y1.0)), (x0.1, x1.1), (y0.1, y1.1))
}

/// A per-row value in the tile's lanes: (r0, r0, r1, r1).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn by_row(r0: f32, r1: f32) -> float32x4_t {
    vld1q_f32([r0, r0, r1, r1].as_ptr())
}

/// A per-token value in the tile's lanes: (t0, t1, t0, t1).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn by_token(t0: f32, t1: f32) -> float32x4_t {
    vld1q_f32([t0, t1, t0, t1].as_ptr())
}

#[inline]
#[target_feature(enable = "neon")]
unsafe fn by_row_i32(r0: i32, r1: i32) -> int32x4_t {
    vld1q_s32([r0, r0, r1, r1].as_ptr())
}

#[inline]
#[target_feature(enable = "neon")]
unsafe fn lanes(v: float32x4_t) -> [f32; 4] {
    let mut out = [0.0; 4];
    vst1q_f32(out.as_mut_ptr(), v);
    out
}

/// Rows `w0`, `w1` against tokens `a0`, `a1`, each lane as [`super::vec_dot_q32`] sums its pair.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn tile_q32<W: Block32>(w0: &[W], w1: &[W], a0: &[W::Act], a1: &[W::Act]) -> [f32; 4] {
    let mut acc = [vdupq_n_f32(0.0); 2];
    let mut off = vdupq_n_f32(0.0);
    for (i, (((x0, x1), y0), y1)) in w0.iter().zip(w1).zip(a0).zip(a1).enumerate() {
        let p = tile32(x0.quants(), x1.quants(), load_i8x32(y0.qs()), load_i8x32(y1.qs()));
        let d = vmulq_f32(by_row(x0.d(), x1.d()), by_token(y0.d(), y1.d()));
        acc[i % 2] = vfmaq_f32(acc[i % 2], vcvtq_f32_s32(p), d);
        if W::OFFSET {
            off = vfmaq_f32(off, by_row(x0.offset(), x1.offset()), by_token(y0.s(), y1.s()));
        }
    }
    lanes(vaddq_f32(vaddq_f32(acc[0], acc[1]), off))
}

/// As [`super::vec_dot_q4_k_q8_k`], for a 2 × 2 tile.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn tile_q4_k(w0: &[BlockQ4K], w1: &[BlockQ4K], a0: &[BlockQ8K], a1: &[BlockQ8K]) -> [f32; 4] {
    let mut sumf = vdupq_n_f32(0.0);
    for (((x0, x1), y0), y1) in w0.iter().zip(w1).zip(a0).zip(a1) {
        let (sm0, sm1) = (q4k_scales_mins(&x0.scales), q4k_scales_mins(&x1.scales));
        let summ = [q4k_min_sum(&sm0, y0), q4k_min_sum(&sm0, y1), q4k_min_sum(&sm1, y0), q4k_min_sum(&sm1, y1)];
        let mut sumi = vdupq_n_s32(0);
        for g in 0..QK_K / 64 {
            let ((lo0, hi0), (lo1, hi1)) = (q4k_quants(x0, g), q4k_quants(x1, g));
            let (q0, q1) = (&y0.qs[64 * g..], &y1.qs[64 * g..]);
            let pl = tile32(lo0, lo1, load_i8x32(q0), load_i8x32(q1));
            let ph = tile32(hi0, hi1, load_i8x32(&q0[32..]), load_i8x32(&q1[32..]));
            sumi = vmlaq_s32(sumi, pl, by_row_i32(sm0[2 * g] as i32, sm1[2 * g] as i32));
            sumi = vmlaq_s32(sumi, ph, by_row_i32(sm0[2 * g + 1] as i32, sm1[2 * g + 1] as i32));
        }
        let yd = by_token(y0.d, y1.d);
        let d = vmulq_f32(by_row(fp16(x0.d), fp16(x1.d)), yd);
        let dmin = vmulq_f32(by_row(fp16(x0.dmin), fp16(x1.dmin)), yd);
        let mins = vcvtq_f32_s32(vld1q_s32(summ.as_ptr()));
        sumf = vaddq_f32(sumf, vsubq_f32(vmulq_f32(d, vcvtq_f32_s32(sumi)), vmulq_f32(dmin, mins)));
    }
    lanes(sumf)
}

/// As [`super::vec_dot_q6_k_q8_k`], for a 2 × 2 tile.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn tile_q6_k(w0: &[BlockQ6K], w1: &[BlockQ6K], a0: &[BlockQ8K], a1: &[BlockQ8K]) -> [f32; 4] {
    let mut sumf = vdupq_n_f32(0.0);
    for (((x0, x1), y0), y1) in w0.iter().zip(w1).zip(a0).zip(a1) {
        let mut sumi = vdupq_n_s32(0);
        for h in 0..QK_K / 128 {
            for c in 0..2 {
                let (q0, q1) = (q6k_quants(x0, h, c), q6k_quants(x1, h, c));
                for k in 0..4 {
                    let at = 128 * h + 32 * k + 16 * c;
                    let y = (vld1q_s8(y0.qs[at..][..16].as_ptr()), vld1q_s8(y1.qs[at..][..16].as_ptr()));
                    let p = tile16(vdupq_n_s32(0), (q0[k], q1[k]), y);
                    let s = 8 * h + 2 * k + c;
                    sumi = vmlaq_s32(sumi, p, by_row_i32(x0.scales[s] as i32, x1.scales[s] as i32));
                }
            }
        }
        let d = vmulq_f32(by_row(fp16(x0.d), fp16(x1.d)), by_token(y0.d, y1.d));
        sumf = vaddq_f32(sumf, vmulq_f32(d, vcvtq_f32_s32(sumi)));
    }
    lanes(sumf)
}

/// As [`super::vec_dot_kq`], for a 2 × 2 tile.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn tile_kq<W: KQuant>(w0: &[W], w1: &[W], a0: &[BlockQ8K], a1: &[BlockQ8K]) -> [f32; 4] {
    let mut sumf = vdupq_n_f32(0.0);
    for (((x0, x1), y0), y1) in w0.iter().zip(w1).zip(a0).zip(a1) {
        let (sc0, sc1) = (x0.scales(), x1.scales());
        let mut sumi = vdupq_n_s32(0);
        for h in 0..2 {
            let (q0, q1) = (x0.quants(h), x1.quants(h));
            for (i, q) in q0.into_iter().zip(q1).enumerate() {
                let s = 8 * h + i;
                let y = (vld1q_s8(y0.qs[16 * s..][..16].as_ptr()), vld1q_s8(y1.qs[16 * s..][..16].as_ptr()));
                let p = tile16(vdupq_n_s32(0), q, y);
                sumi = vmlaq_s32(sumi, p, by_row_i32(sc0[s], sc1[s]));
            }
        }
        let yd = by_token(y0.d, y1.d);
        let d = vmulq_f32(by_row(x0.d(), x1.d()), yd);
        if W::MINS {
            let dmin = vmulq_f32(by_row(x0.dmin(), x1.dmin()), yd);
            let summ = [x0.min_sum(y0), x0.min_sum(y1), x1.min_sum(y0), x1.min_sum(y1)];
            let mins = vcvtq_f32_s32(vld1q_s32(summ.as_ptr()));
            sumf = vaddq_f32(sumf, vsubq_f32(vmulq_f32(d, vcvtq_f32_s32(sumi)), vmulq_f32(dmin, mins)));
        } else {
            sumf = vaddq_f32(sumf, vmulq_f32(d, vcvtq_f32_s32(sumi)));
        }
    }
    lanes(sumf)
}

/// `out[t * stride + r] = row r · token t` for `n_rows` rows of `w` and `n_tok` token rows of
/// `a` (equal block counts): `tile` on each 2 × 2 tile, `dot` on the odd row and token left.
#[allow(clippy::too_many_arguments)]
#[inline]
fn tiles<W, A>(
    w: &[W],
    a: &[A],
    n_rows: usize,
    n_tok: usize,
    out: &mut [f32],
    stride: usize,
    tile: impl Fn(&[W], &[W], &[A], &[A]) -> [f32; 4],
    dot: impl Fn(&[W], &[A]) -> f32,
) {
    let nb = a.len() / n_tok.max(1);
    if nb == 0 {
        return;
    }
    let mut put = |t: usize, r: usize, v: f32| {
        if let Some(o) = out.get_mut(t * stride + r) {
            *o = v;
        }
    };
    let last_tok = a.get((n_tok - 1) * nb..n_tok * nb).filter(|_| n_tok % 2 == 1);
    for (rp, wp) in w.chunks_exact(2 * nb).take(n_rows / 2).enumerate() {
        let (w0, w1) = wp.split_at(nb);
        let r = 2 * rp;
        for (tp, ap) in a.chunks_exact(2 * nb).take(n_tok / 2).enumerate() {
            let (a0, a1) = ap.split_at(nb);
            let [v00, v01, v10, v11] = tile(w0, w1, a0, a1);
            let t = 2 * tp;
            put(t, r, v00);
            put(t + 1, r, v01);
            put(t, r + 1, v10);
            put(t + 1, r + 1, v11);
        }
        if let Some(at) = last_tok {
            put(n_tok - 1, r, dot(w0, at));
            put(n_tok - 1, r + 1, dot(w1, at));
        }
    }
    if let Some(wr) = w.get((n_rows - 1) * nb..n_rows * nb).filter(|_| n_rows % 2 == 1) {
        for (t, at) in a.chunks_exact(nb).take(n_tok).enumerate() {
            put(t, n_rows - 1, dot(wr, at));
        }
    }
}

macro_rules! mat_mat {
    ($($name:ident($W:ty, $A:ty) => $tile:expr, $dot:ident;)*) => {$(
        /// Several weight rows against several tokens in 2 × 2 tiles; each (row, token) sum
        /// equals the one-token kernel's.
        #[target_feature(enable = "neon")]
        pub unsafe fn $name(w: &[$W], a: &[$A], n_rows: usize, n_tok: usize, out: &mut [f32], stride: usize) {
            tiles(w, a, n_rows, n_tok, out, stride, |w0, w1, a0, a1| unsafe { $tile(w0, w1, a0, a1) }, |w, a| unsafe {
                $dot(w, a)
            })
        }
    )*};
}

mat_mat! {
    mat_mat_q4_0_q8_0(BlockQ4_0, BlockQ8_0) => tile_q32::<BlockQ4_0>, vec_dot_q4_0_q8_0;
    mat_mat_q4_1_q8_1(BlockQ4_1, BlockQ8_1) => tile_q32::<BlockQ4_1>, vec_dot_q4_1_q8_1;
    mat_mat_q5_0_q8_0(BlockQ5_0, BlockQ8_0) => tile_q32::<BlockQ5_0>, vec_dot_q5_0_q8_0;
    mat_mat_q8_0_q8_0(BlockQ8_0, BlockQ8_0) => tile_q32::<BlockQ8_0>, vec_dot_q8_0_q8_0;
    mat_mat_q4_k_q8_k(BlockQ4K, BlockQ8K) => tile_q4_k, vec_dot_q4_k_q8_k;
    mat_mat_q6_k_q8_k(BlockQ6K, BlockQ8K) => tile_q6_k, vec_dot_q6_k_q8_k;
    mat_mat_q5_1_q8_1(BlockQ5_1, BlockQ8_1) => tile_q32::<BlockQ5_1>, vec_dot_q5_1_q8_1;
    mat_mat_iq4_nl_q8_0(BlockIq4Nl, BlockQ8_0) => tile_q32::<BlockIq4Nl>, vec_dot_iq4_nl_q8_0;
    mat_mat_q2_k_q8_k(BlockQ2K, BlockQ8K) => tile_kq::<BlockQ2K>, vec_dot_q2_k_q8_k;
    mat_mat_q3_k_q8_k(BlockQ3K, BlockQ8K) => tile_kq::<BlockQ3K>, vec_dot_q3_k_q8_k;
    mat_mat_q5_k_q8_k(BlockQ5K, BlockQ8K) => tile_kq::<BlockQ5K>, vec_dot_q5_k_q8_k;
    mat_mat_iq4_xs_q8_k(BlockIq4Xs, BlockQ8K) => tile_kq::<BlockIq4Xs>, vec_dot_iq4_xs_q8_k;
}

// ---------------------------------------------------------------------------------------------
// Kernels on 8-row tiles of 8-byte column groups (repacked weights, `super::tile8`, width 8)
//
// `smmla` multiplies a row pair's 8 quants by 8 quants of a token pair: per tile block, four
// accumulators (row pairs) per token pair, lanes (r0·t0, r0·t1, r1·t0, r1·t1). Tokens go in
// pairs; an odd last token is paired with itself. Every lane performs, per block in order,
// the same operations (an exact integer sum, then the same f32 steps), so a token's result
// does not depend on its pair, batch, tile or thread. Q5_0, Q5_1, Q5_K and IQ4_NL stay on the
// dotprod tiles.
// Extents as for the dotprod tile kernels, checked by the callers.

/// Four row pairs' accumulators of a tile block for one token pair.
type Pairs<T> = [T; 4];

/// Quants `at..at + 16` of tokens `a` as two `smmla` operands: elements `at..at + 8` of both
/// tokens, then `at + 8..at + 16`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn token_pair16(a: [&Act; 2], at: usize) -> [int8x16_t; 2] {
    let (x, y) = (vld1q_s8(a[0].qs.add(at).cast()), vld1q_s8(a[1].qs.add(at).cast()));
    [halves::<false>(x, y), halves::<true>(x, y)]
}

/// Elements `at..at + 32` of both tokens as four operands, one per 8 elements.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn token_pair32(a: [&Act; 2], at: usize) -> [int8x16_t; 4] {
    let ([o0, o1], [o2, o3]) = (token_pair16(a, at), token_pair16(a, at + 16));
    [o0, o1, o2, o3]
}

/// The four row pairs' vectors of the 64-byte group at `p`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn load_group8(p: *const u8) -> [uint8x16_t; 4] {
    std::array::from_fn(|i| vld1q_u8(p.add(16 * i)))
}

/// `acc[p] = smmla(acc[p], w[p], x)` for the four row pairs.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn smmla4(acc: &mut Pairs<int32x4_t>, w: [int8x16_t; 4], x: int8x16_t) {
    for (acc, w) in acc.iter_mut().zip(w) {
        *acc = smmla(*acc, w, x);
    }
}

/// A value per row (rows 0..4, 4..8) -> per row pair, in the lanes' order (r0, r0, r1, r1).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn f32_by_pair(v: [float32x4_t; 2]) -> Pairs<float32x4_t> {
    [vzip1q_f32(v[0], v[0]), vzip2q_f32(v[0], v[0]), vzip1q_f32(v[1], v[1]), vzip2q_f32(v[1], v[1])]
}

#[inline]
#[target_feature(enable = "neon")]
unsafe fn i32_by_pair(v: [int32x4_t; 2]) -> Pairs<int32x4_t> {
    [vzip1q_s32(v[0], v[0]), vzip2q_s32(v[0], v[0]), vzip1q_s32(v[1], v[1]), vzip2q_s32(v[1], v[1])]
}

/// 8 f16 (one per row) at `p` -> f32 per row pair.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn f16_by_pair(p: *const u8) -> Pairs<float32x4_t> {
    let (lo, hi) = fp16x8(vld1q_u16(p.cast()));
    f32_by_pair([lo, hi])
}

/// 8 bytes (one per row) at `p` -> i32 per row pair.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn u8_by_pair(p: *const u8) -> Pairs<int32x4_t> {
    let w = vmovl_u8(vld1_u8(p));
    i32_by_pair([vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(w))), vreinterpretq_s32_u32(vmovl_high_u16(w))])
}

#[inline]
#[target_feature(enable = "neon")]
unsafe fn i8_by_pair(p: *const u8) -> Pairs<int32x4_t> {
    let w = vmovl_s8(vld1_s8(p.cast()));
    i32_by_pair([vmovl_s16(vget_low_s16(w)), vmovl_high_s16(w)])
}

/// A weight type's kernel on one tile for one token pair.
trait PairKernel {
    const TY: GgmlType;
    unsafe fn tile(tile: *const u8, nb: usize, o: &BlockLayout, a: [&Act; 2]) -> Pairs<float32x4_t>;
}

/// Runs `K` over every tile and token pair.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn drive_pairs<K: PairKernel>(
    cols: usize,
    tiles: &[u8],
    n_rows: usize,
    act: &[u8],
    n_tok: usize,
    mut out: OutRows<'_>,
    stride: usize,
) {
    let Some(walk) = TileWalk::new(K::TY, cols, tiles, n_rows, act) else { return };
    for (tile, r0, valid) in walk.tiles() {
        for t in (0..n_tok).step_by(2) {
            let tok = [t, (t + 1).min(n_tok - 1)];
            let acc = K::tile(tile.as_ptr(), walk.nb, &walk.o, [&walk.act(tok[0]), &walk.act(tok[1])]);
            for (p, v) in acc.into_iter().enumerate() {
                for (l, &x) in lanes(v).iter().enumerate() {
                    let r = 2 * p + l / 2;
                    if r < valid {
                        out.segment(tok[l % 2] * stride + r0 + r, 1)[0] = x;
                    }
                }
            }
        }
    }
}

/// A token value in the lanes' order (t0, t1, t0, t1).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn by_token_i32(t0: i32, t1: i32) -> int32x4_t {
    vld1q_s32([t0, t1, t0, t1].as_ptr())
}

// 32-element formats

/// How a 32-element format's tile block (width 8) reads.
trait Q32Pairs {
    const TY: GgmlType;
    /// log2 of the quant offset taken off exactly through the activation block sums (0: none).
    const SHIFT: i32 = 0;
    /// Whether the block adds `m · s` (Q4_1).
    const M: bool = false;
    /// The quants that multiply elements `8c..8c + 8`, per row pair, as signed bytes.
    unsafe fn quants(blk: *const u8) -> [Pairs<int8x16_t>; 4];
}

/// Per block: the exact integer sums (less the offset), then `acc = fma(float(isum), d_w · d_a,
/// acc)` and, for Q4_1, `acc = fma(m, s, acc)`, in every lane.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn tile_q32_pairs<T: Q32Pairs>(tile: *const u8, nb: usize, o: &BlockLayout, a: [&Act; 2]) -> Pairs<float32x4_t> {
    let mut acc = [vdupq_n_f32(0.0); 4];
    for b in 0..nb {
        let blk = tile.add(o.size * b);
        let mut isum = [vdupq_n_s32(0); 4];
        for (w, x) in T::quants(blk).into_iter().zip(token_pair32(a, 32 * b)) {
            smmla4(&mut isum, w, x);
        }
        let off =
            if T::SHIFT > 0 { by_token_i32(a[0].sum(b) << T::SHIFT, a[1].sum(b) << T::SHIFT) } else { vdupq_n_s32(0) };
        let da = by_token(a[0].d(b), a[1].d(b));
        let dw = f16_by_pair(blk.add(o.d));
        let (mw, s) = if T::M { (f16_by_pair(blk.add(o.m)), by_token(a[0].s(b), a[1].s(b))) } else { (dw, da) };
        for p in 0..4 {
            acc[p] = vfmaq_f32(acc[p], vcvtq_f32_s32(vsubq_s32(isum[p], off)), vmulq_f32(dw[p], da));
            if T::M {
                acc[p] = vfmaq_f32(acc[p], mw[p], s);
            }
        }
    }
    acc
}

/// Elements `8c..8c + 8` of a nibble block: the low nibbles of its two groups, then the high.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn nibble_pairs(blk: *const u8) -> [Pairs<int8x16_t>; 4] {
    let m4 = vdupq_n_u8(0x0F);
    let g = [load_group8(blk), load_group8(blk.add(64))];
    std::array::from_fn(|c| {
        g[c % 2].map(|x| vreinterpretq_s8_u8(if c < 2 { vandq_u8(x, m4) } else { vshrq_n_u8(x, 4) }))
    })
}

struct PairsQ40;
struct PairsQ41;
struct PairsQ80;

impl Q32Pairs for PairsQ40 {
    const TY: GgmlType = GgmlType::Q4_0;
    const SHIFT: i32 = 3;
    unsafe fn quants(blk: *const u8) -> [Pairs<int8x16_t>; 4] {
        nibble_pairs(blk)
    }
}

impl Q32Pairs for PairsQ41 {
    const TY: GgmlType = GgmlType::Q4_1;
    const M: bool = true;
    unsafe fn quants(blk: *const u8) -> [Pairs<int8x16_t>; 4] {
        nibble_pairs(blk)
    }
}

impl Q32Pairs for PairsQ80 {
    const TY: GgmlType = GgmlType::Q8_0;
    unsafe fn quants(blk: *const u8) -> [Pairs<int8x16_t>; 4] {
        std::array::from_fn(|c| load_group8(blk.add(64 * c)).map(|x| vreinterpretq_s8_u8(x)))
    }
}

macro_rules! q32_pair_kernel {
    ($($t:ty),*) => {$(
        impl PairKernel for $t {
            const TY: GgmlType = <$t as Q32Pairs>::TY;
            unsafe fn tile(tile: *const u8, nb: usize, o: &BlockLayout, a: [&Act; 2]) -> Pairs<float32x4_t> {
                tile_q32_pairs::<$t>(tile, nb, o, a)
            }
        }
    )*};
}

q32_pair_kernel!(PairsQ40, PairsQ41, PairsQ80);

// k-quants

/// Q4_K: per sub-block an exact sum times its 6-bit scale, in i32; the mins through the
/// activation's 32-element sums.
struct PairsQ4K;

impl PairKernel for PairsQ4K {
    const TY: GgmlType = GgmlType::Q4_K;

    #[inline]
    unsafe fn tile(tile: *const u8, nb: usize, o: &BlockLayout, a: [&Act; 2]) -> Pairs<float32x4_t> {
        let m4 = vdupq_n_u8(0x0F);
        let mut acc = [vdupq_n_f32(0.0); 4];
        for b in 0..nb {
            let blk = tile.add(o.size * b);
            let mut sumi = [vdupq_n_s32(0); 4];
            let mut summ = [vdupq_n_s32(0); 4];
            for j in 0..8 {
                let mins = u8_by_pair(blk.add(o.sc + ROWS * (8 + j)));
                let s = by_token_i32(a[0].sum32(b, j) as i32, a[1].sum32(b, j) as i32);
                for (sm, mn) in summ.iter_mut().zip(mins) {
                    *sm = vmlaq_s32(*sm, mn, s);
                }
            }
            for g in 0..4 {
                let (x_lo, x_hi) = (token_pair32(a, 256 * b + 64 * g), token_pair32(a, 256 * b + 64 * g + 32));
                let mut il = [vdupq_n_s32(0); 4];
                let mut ih = [vdupq_n_s32(0); 4];
                for c in 0..4 {
                    let raw = load_group8(blk.add(64 * (4 * g + c)));
                    smmla4(&mut il, raw.map(|x| vreinterpretq_s8_u8(vandq_u8(x, m4))), x_lo[c]);
                    smmla4(&mut ih, raw.map(|x| vreinterpretq_s8_u8(vshrq_n_u8(x, 4))), x_hi[c]);
                }
                let (sl, sh) =
                    (u8_by_pair(blk.add(o.sc + ROWS * 2 * g)), u8_by_pair(blk.add(o.sc + ROWS * (2 * g + 1))));
                for p in 0..4 {
                    sumi[p] = vmlaq_s32(vmlaq_s32(sumi[p], il[p], sl[p]), ih[p], sh[p]);
                }
            }
            let da = by_token(a[0].d(b), a[1].d(b));
            let (dw, dminw) = (f16_by_pair(blk.add(o.d)), f16_by_pair(blk.add(o.m)));
            for p in 0..4 {
                acc[p] = vfmaq_f32(acc[p], vcvtq_f32_s32(sumi[p]), vmulq_f32(dw[p], da));
                acc[p] = vfmsq_f32(acc[p], vcvtq_f32_s32(summ[p]), vmulq_f32(dminw[p], da));
            }
        }
        acc
    }
}

/// Q6_K: 6-bit quants rebuilt from the nibble and top-bit groups, less 32, as signed bytes; per
/// 16-element sub-block an exact sum times its scale, in i32.
struct PairsQ6K;

impl PairKernel for PairsQ6K {
    const TY: GgmlType = GgmlType::Q6_K;

    #[inline]
    unsafe fn tile(tile: *const u8, nb: usize, o: &BlockLayout, a: [&Act; 2]) -> Pairs<float32x4_t> {
        let (m4, m30, m32) = (vdupq_n_u8(0x0F), vdupq_n_u8(0x30), vdupq_n_s8(32));
        let mut acc = [vdupq_n_f32(0.0); 4];
        for b in 0..nb {
            let blk = tile.add(o.size * b);
            let qh = blk.add(o.qh);
            let mut sumi = [vdupq_n_s32(0); 4];
            for h in 0..2 {
                for k in 0..4 {
                    // Bits 2k..2k + 2 of qh to bits 4..6.
                    let shift = vdupq_n_s8(4 - 2 * k as i8);
                    let x = token_pair32(a, 256 * b + 128 * h + 32 * k);
                    for half in 0..2 {
                        let mut is = [vdupq_n_s32(0); 4];
                        for (c, &xc) in x.iter().enumerate().skip(2 * half).take(2) {
                            let low = load_group8(blk.add(64 * (8 * h + 4 * (k & 1) + c)));
                            let top = load_group8(qh.add(64 * (4 * h + c)));
                            let w: Pairs<int8x16_t> = std::array::from_fn(|p| {
                                let nib = if k < 2 { vandq_u8(low[p], m4) } else { vshrq_n_u8(low[p], 4) };
                                let q = vorrq_u8(nib, vandq_u8(vshlq_u8(top[p], shift), m30));
                                vsubq_s8(vreinterpretq_s8_u8(q), m32)
                            });
                            smmla4(&mut is, w, xc);
                        }
                        let sc = i8_by_pair(blk.add(o.sc + ROWS * (8 * h + 2 * k + half)));
                        for p in 0..4 {
                            sumi[p] = vmlaq_s32(sumi[p], is[p], sc[p]);
                        }
                    }
                }
            }
            let da = by_token(a[0].d(b), a[1].d(b));
            let dw = f16_by_pair(blk.add(o.d));
            for p in 0..4 {
                acc[p] = vfmaq_f32(acc[p], vcvtq_f32_s32(sumi[p]), vmulq_f32(dw[p], da));
            }
        }
        acc
    }
}

// The Q5_0, Q5_1, Q5_K and IQ4_NL tile kernels are the dotprod set's (re-exported above).
super::tile_entries! { drive_pairs:
    mat_mat_q4_0 => PairsQ40;
    mat_mat_q4_1 => PairsQ41;
    mat_mat_q8_0 => PairsQ80;
    mat_mat_q4_k => PairsQ4K;
    mat_mat_q6_k => PairsQ6K;
}
