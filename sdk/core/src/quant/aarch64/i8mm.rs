//! The ARMv8.6 i8mm set: for several tokens (prefill), `smmla` multiplies a 2 × 8 block of two
//! weight rows by one of two tokens' activations, so one instruction yields four (row, token)
//! sums. It runs on ggml's layout: the two rows' and two tokens' bytes are interleaved in
//! registers. One token, and the odd row or token of a product, run the dotprod kernels, whose
//! names this module re-exports. Run only where `i8mm` (and `dotprod`) are detected.
//!
//! Each tile lane repeats [`super::vec_dot_q32`]'s (or the k-quants') f32 steps for its pair,
//! so a token's result is the one it gets alone.

use std::arch::aarch64::*;

pub use super::dotprod::*;
use super::{fp16, load_i8x32, q4k_min_sum, q4k_quants, q6k_quants, Act32, Block32};
use crate::quant::blocks::*;

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
}
