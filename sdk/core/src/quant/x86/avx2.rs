//! AVX2 + FMA + F16C kernels (ggml's x86 techniques: nibble unpacking into one 256-bit
//! register, `maddubs`/`madd` integer dot products, the sign trick for signed x signed).
//!
//! Every function here is `unsafe` only because of `#[target_feature]`: the caller must have
//! checked that the CPU supports `avx2`, `fma` and `f16c`. All memory access goes through the
//! typed block slices, so given that, they are sound for any input.
//!
//! Exactness: the integer part of every block is exact; only the f32 accumulation order
//! differs from `reference`. Quantization is byte-identical to `reference`.
//!
//! Activation quants must lie in [-127, 127] (all our quantizers guarantee it): the sign trick
//! cannot represent `-(-128)`.

// The one safety condition (CPU features) is stated once, above, not per function.
#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

use half::{bf16, f16};

use super::avx2_attn::exp_ps;
use crate::quant::blocks::*;
use crate::quant::in_pieces;

// ---------------------------------------------------------------------------------------------
// Helpers

/// One f16 scale to f32. Written as asm because LLVM, seeing only lane 0 used, turns the
/// intrinsic form into a `vpinsrw` merging into whatever register is free, usually the
/// accumulator: that false dependency serialised every block behind the previous FMA.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn fp16(h: f16) -> f32 {
    let r: __m128;
    std::arch::asm!(
        "vmovd {r}, {b:e}",
        "vcvtph2ps {r}, {r}",
        b = in(reg) h.to_bits() as u32,
        r = out(xmm_reg) r,
        options(pure, nomem, nostack, preserves_flags),
    );
    _mm_cvtss_f32(r)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hsum_ps(x: __m256) -> f32 {
    let mut r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    _mm_cvtss_f32(r)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hsum_epi32(x: __m256i) -> i32 {
    let mut r = _mm_add_epi32(_mm256_extracti128_si256(x, 1), _mm256_castsi256_si128(x));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0b01_00_11_10));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0b10_11_00_01));
    _mm_cvtsi128_si32(r)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load32(p: &[i8; 32]) -> __m256i {
    _mm256_loadu_si256(p.as_ptr().cast())
}

/// 16 packed bytes -> 32 bytes: low nibbles in lanes 0..16, high nibbles in 16..32, which is
/// exactly ggml's element order for the 32-element formats.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn nibbles32(qs: &[u8; 16]) -> __m256i {
    let lo = _mm_loadu_si128(qs.as_ptr().cast());
    let hi = _mm_srli_epi16(lo, 4);
    _mm256_and_si256(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(0x0F))
}

/// Bit `k` of `bits` -> byte `k` = 0xFF or 0x00.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bits_to_bytes32(bits: u32) -> __m256i {
    let shuf = _mm256_set_epi64x(0x0303_0303_0303_0303, 0x0202_0202_0202_0202, 0x0101_0101_0101_0101, 0);
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(bits as i32), shuf);
    // Every byte gets all bits set except the one it tests; it is 0xFF iff that bit was set.
    let mask = _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe);
    _mm256_cmpeq_epi8(_mm256_or_si256(bytes, mask), _mm256_set1_epi64x(-1))
}

/// Sums of adjacent products of signed bytes, as 8 x i32. `maddubs` wants one unsigned
/// operand, so move the sign of `x` onto `y` (exact while `y` avoids -128).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_i8(x: __m256i, y: __m256i) -> __m256i {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1))
}

/// As [`dot_i8`] with `x` already unsigned (0..=127 fits every format used here).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_u8_i8(x: __m256i, y: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1))
}

/// f16 scales of two consecutive blocks of both operands -> the two products `w.d * a.d`, each
/// broadcast. One conversion for four scales keeps the vector ports free for the dot products.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scale_pair(w0: f16, w1: f16, a0: f16, a1: f16) -> (__m256, __m256) {
    let bits =
        w0.to_bits() as u64 | (w1.to_bits() as u64) << 16 | (a0.to_bits() as u64) << 32 | (a1.to_bits() as u64) << 48;
    let v = _mm_cvtph_ps(_mm_cvtsi64_si128(bits as i64));
    let p = _mm_mul_ps(v, _mm_movehl_ps(v, v));
    (_mm256_broadcastss_ps(p), _mm256_broadcastss_ps(_mm_movehdup_ps(p)))
}

/// Sum over blocks of `d_w * d_a * int_dot(x, y)`, where `$int_dot` yields 8 x i32 partial
/// sums for the block pair `$x`, `$y`. Blocks go two at a time into two accumulators so
/// consecutive FMAs do not wait on each other. A macro rather than a closure so the body
/// inlines with the caller's target features.
macro_rules! dot_blocks {
    ($w:expr, $a:expr, |$x:ident, $y:ident| $int_dot:expr) => {{
        let nb = $w.len().min($a.len());
        let (w, a) = (&$w[..nb], &$a[..nb]);
        let mut acc0 = _mm256_setzero_ps();
        let mut acc1 = _mm256_setzero_ps();
        let mut pw = w.chunks_exact(2);
        let mut pa = a.chunks_exact(2);
        for (bw, ba) in (&mut pw).zip(&mut pa) {
            let (d0, d1) = scale_pair(bw[0].d, bw[1].d, ba[0].d, ba[1].d);
            let p0 = {
                let ($x, $y) = (&bw[0], &ba[0]);
                $int_dot
            };
            let p1 = {
                let ($x, $y) = (&bw[1], &ba[1]);
                $int_dot
            };
            acc0 = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps(p0), acc0);
            acc1 = _mm256_fmadd_ps(d1, _mm256_cvtepi32_ps(p1), acc1);
        }
        if let (Some($x), Some($y)) = (pw.remainder().first(), pa.remainder().first()) {
            let d = _mm256_set1_ps(fp16($x.d) * fp16($y.d));
            acc0 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps($int_dot), acc0);
        }
        hsum_ps(_mm256_add_ps(acc0, acc1))
    }};
}

// ---------------------------------------------------------------------------------------------
// Dot products over 32-element blocks

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn vec_dot_q4_0_q8_0(w: &[BlockQ4_0], a: &[BlockQ8_0]) -> f32 {
    dot_blocks!(w, a, |x, y| {
        let qx = _mm256_sub_epi8(nibbles32(&x.qs), _mm256_set1_epi8(8));
        dot_i8(qx, load32(&y.qs))
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn vec_dot_q4_1_q8_1(w: &[BlockQ4_1], a: &[BlockQ8_1]) -> f32 {
    let nb = w.len().min(a.len());
    let (w, a) = (&w[..nb], &a[..nb]);
    let mut acc0 = _mm256_setzero_ps();
    let mut acc1 = _mm256_setzero_ps();
    // Lanes 2 and 3 collect the offsets m * s; lanes 0 and 1 are scratch.
    let mut acc_ms = _mm_setzero_ps();
    let mut pw = w.chunks_exact(2);
    let mut pa = a.chunks_exact(2);
    for (bw, ba) in (&mut pw).zip(&mut pa) {
        let (x0, x1, y0, y1) = (&bw[0], &bw[1], &ba[0], &ba[1]);
        let bx = x0.d.to_bits() as u64
            | (x1.d.to_bits() as u64) << 16
            | (x0.m.to_bits() as u64) << 32
            | (x1.m.to_bits() as u64) << 48;
        let by = y0.d.to_bits() as u64
            | (y1.d.to_bits() as u64) << 16
            | (y0.s.to_bits() as u64) << 32
            | (y1.s.to_bits() as u64) << 48;
        // [d_x0, d_x1, m_0, m_1] * [d_y0, d_y1, s_0, s_1]
        let v = _mm256_cvtph_ps(_mm_set_epi64x(by as i64, bx as i64));
        let p = _mm_mul_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        acc_ms = _mm_add_ps(acc_ms, p);
        let p0 = dot_u8_i8(nibbles32(&x0.qs), load32(&y0.qs));
        let p1 = dot_u8_i8(nibbles32(&x1.qs), load32(&y1.qs));
        acc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(p), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(p)), _mm256_cvtepi32_ps(p1), acc1);
    }
    let mut summs = {
        let hi = _mm_movehl_ps(acc_ms, acc_ms);
        _mm_cvtss_f32(_mm_add_ss(hi, _mm_movehdup_ps(hi)))
    };
    if let (Some(x), Some(y)) = (pw.remainder().first(), pa.remainder().first()) {
        summs += fp16(x.m) * fp16(y.s);
        let d = _mm256_set1_ps(fp16(x.d) * fp16(y.d));
        let p = dot_u8_i8(nibbles32(&x.qs), load32(&y.qs));
        acc0 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc0);
    }
    hsum_ps(_mm256_add_ps(acc0, acc1)) + summs
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn vec_dot_q5_0_q8_0(w: &[BlockQ5_0], a: &[BlockQ8_0]) -> f32 {
    dot_blocks!(w, a, |x, y| {
        // q - 16 as a signed byte is the nibble with 0xF0 or'ed in where the 5th bit is clear.
        let hi = _mm256_andnot_si256(bits_to_bytes32(u32::from_le_bytes(x.qh)), _mm256_set1_epi8(0xF0u8 as i8));
        dot_i8(_mm256_or_si256(nibbles32(&x.qs), hi), load32(&y.qs))
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn vec_dot_q8_0_q8_0(w: &[BlockQ8_0], a: &[BlockQ8_0]) -> f32 {
    dot_blocks!(w, a, |x, y| dot_i8(load32(&x.qs), load32(&y.qs)))
}

// ---------------------------------------------------------------------------------------------
// k-quants

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn vec_dot_q4_k_q8_k(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0x0F);
    let mut acc = _mm256_setzero_ps();
    let mut acc_m = _mm_setzero_ps();
    for (x, y) in w.iter().zip(a) {
        let d = fp16(x.d) * y.d;
        let dmin = -fp16(x.dmin) * y.d;
        let sm = q4k_scales_mins(&x.scales);
        // 16 x i16: scales in lanes 0..8, mins in 8..16.
        let mins_scales = _mm256_cvtepu8_epi16(_mm_loadu_si128(sm.as_ptr().cast()));

        // Mins: sum over sub-blocks of min[j] * (bsums[2j] + bsums[2j+1]).
        let bsums = _mm256_loadu_si256(y.bsums.as_ptr().cast());
        let q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
        let prod = _mm_madd_epi16(_mm256_extracti128_si256(mins_scales, 1), q8s);
        acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m);

        let sc128 = _mm256_castsi256_si128(mins_scales);
        let scales = _mm256_set_m128i(sc128, sc128);
        let mut sumi = _mm256_setzero_si256();
        for g in 0..QK_K / 64 {
            // Broadcast the i16 scale of sub-block 2g (low nibbles) and 2g+1 (high nibbles).
            let lo_idx = (4 * g as i16) | ((4 * g as i16 + 1) << 8);
            let hi_idx = (4 * g as i16 + 2) | ((4 * g as i16 + 3) << 8);
            let scale_l = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(lo_idx));
            let scale_h = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(hi_idx));
            let q4bits = _mm256_loadu_si256(x.qs[32 * g..].as_ptr().cast());
            let q4l = _mm256_and_si256(q4bits, m4);
            let q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
            let q8l = _mm256_loadu_si256(y.qs[64 * g..].as_ptr().cast());
            let q8h = _mm256_loadu_si256(y.qs[64 * g + 32..].as_ptr().cast());
            let pl = _mm256_madd_epi16(scale_l, _mm256_maddubs_epi16(q4l, q8l));
            let ph = _mm256_madd_epi16(scale_h, _mm256_maddubs_epi16(q4h, q8h));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
    hsum_ps(acc) + _mm_cvtss_f32(acc_m)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn vec_dot_q6_k_q8_k(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(3);
    let mut acc = _mm256_setzero_ps();
    for (x, y) in w.iter().zip(a) {
        let d = fp16(x.d) * y.d;
        let scales = _mm_loadu_si128(x.scales.as_ptr().cast());
        // The quants are used unsigned (0..64); the -32 comes back once per block through the
        // activation sums: 32 * sum_g scale[g] * bsums[g].
        let bsums = _mm256_loadu_si256(y.bsums.as_ptr().cast());
        let corr = _mm256_madd_epi16(_mm256_cvtepi8_epi16(scales), bsums);
        let mut sumi = _mm256_setzero_si256();
        for h in 0..QK_K / 128 {
            let ql1 = _mm256_loadu_si256(x.ql[64 * h..].as_ptr().cast());
            let ql2 = _mm256_loadu_si256(x.ql[64 * h + 32..].as_ptr().cast());
            let qh = _mm256_loadu_si256(x.qh[32 * h..].as_ptr().cast());
            let q = [
                _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4)),
                _mm256_or_si256(
                    _mm256_and_si256(ql2, m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql2, 4), m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4),
                ),
            ];
            for (k, &qk) in q.iter().enumerate() {
                // 32 elements span two 16-element scale groups: lanes 0..8 of the i16 products
                // take scale 2s, lanes 8..16 scale 2s+1.
                let s = 8 * h + 2 * k;
                let idx = _mm_set_epi64x(0x0101_0101_0101_0101 * (s as i64 + 1), 0x0101_0101_0101_0101 * s as i64);
                let scale = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, idx));
                let q8 = _mm256_loadu_si256(y.qs[128 * h + 32 * k..].as_ptr().cast());
                let p = _mm256_madd_epi16(scale, _mm256_maddubs_epi16(qk, q8));
                sumi = _mm256_add_epi32(sumi, p);
            }
        }
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(corr, 5));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_ps(acc)
}

// ---------------------------------------------------------------------------------------------
// Float weights

/// Shared loop: `$load(i)` gives 8 weights as f32 from element `i`, `$one(i)` one weight.
/// Four accumulators cover the FMA latency.
macro_rules! dot_f32_lanes {
    ($w:expr, $a:expr, |$i:ident| $load:expr, |$j:ident| $one:expr) => {{
        let n = $w.len().min($a.len());
        let a = &$a[..n];
        let ap = a.as_ptr();
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        while i + 32 <= n {
            for (k, acc) in acc.iter_mut().enumerate() {
                let $i = i + 8 * k;
                *acc = _mm256_fmadd_ps($load, _mm256_loadu_ps(ap.add($i)), *acc);
            }
            i += 32;
        }
        while i + 8 <= n {
            let $i = i;
            acc[0] = _mm256_fmadd_ps($load, _mm256_loadu_ps(ap.add($i)), acc[0]);
            i += 8;
        }
        let mut sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
        for $j in i..n {
            sum += $one * a[$j];
        }
        sum
    }};
}

// The loads below stay in bounds: the vector loops only read 8 lanes at `i + 8 <= n`, with
// `n` at most both lengths.

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn vec_dot_f32_f32(w: &[f32], a: &[f32]) -> f32 {
    dot_f32_lanes!(w, a, |i| _mm256_loadu_ps(w.as_ptr().add(i)), |j| w[j])
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn vec_dot_f16_f32(w: &[f16], a: &[f32]) -> f32 {
    dot_f32_lanes!(w, a, |i| _mm256_cvtph_ps(_mm_loadu_si128(w.as_ptr().add(i).cast())), |j| fp16(w[j]))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn axpy_f16_f32(a: f32, x: &[f16], y: &mut [f32]) {
    let n = x.len().min(y.len());
    let va = _mm256_set1_ps(a);
    let (xp, yp) = (x.as_ptr(), y.as_mut_ptr());
    let mut i = 0;
    while i + 8 <= n {
        let xv = _mm256_cvtph_ps(_mm_loadu_si128(xp.add(i).cast()));
        _mm256_storeu_ps(yp.add(i), _mm256_fmadd_ps(va, xv, _mm256_loadu_ps(yp.add(i))));
        i += 8;
    }
    for j in i..n {
        y[j] += a * fp16(x[j]);
    }
}

/// `gate[i] = silu(gate[i]) * up[i]` (see the reference), 8 at a time.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn silu_mul(gate: &mut [f32], up: &[f32]) {
    in_pieces::<8>(gate, up, |g, u| {
        let x = _mm256_loadu_ps(g.as_ptr());
        let e = exp_ps(_mm256_xor_ps(x, _mm256_set1_ps(-0.0)));
        let s = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0), e));
        _mm256_storeu_ps(g.as_mut_ptr(), _mm256_mul_ps(s, _mm256_loadu_ps(u.as_ptr())));
    })
}

/// `gate[i] = gelu(gate[i]) * up[i]` through the reference's f16 table (see the reference), 8
/// at a time: inputs rounded to f16 by `vcvtps2ph`, their table entries gathered as 32-bit
/// words (the low half is the entry; the table has one entry of slack at its end).
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gelu_mul(gate: &mut [f32], up: &[f32]) {
    let table = crate::quant::reference::gelu_table().as_ptr().cast::<i32>();
    in_pieces::<8>(gate, up, |g, u| {
        let x = _mm256_loadu_ps(g.as_ptr());
        let bits = _mm256_cvtepu16_epi32(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x));
        let words = _mm256_and_si256(_mm256_i32gather_epi32::<2>(table, bits), _mm256_set1_epi32(0xFFFF));
        // 8 x u32 -> 8 x u16 in order (packs work per 128-bit lane).
        let packed = _mm256_permute4x64_epi64::<0b10_00>(_mm256_packus_epi32(words, words));
        let y = _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
        let low = _mm256_cmp_ps::<_CMP_LE_OQ>(x, _mm256_set1_ps(-10.0));
        let high = _mm256_cmp_ps::<_CMP_GE_OQ>(x, _mm256_set1_ps(10.0));
        let y = _mm256_blendv_ps(_mm256_andnot_ps(low, y), x, high);
        _mm256_storeu_ps(g.as_mut_ptr(), _mm256_mul_ps(y, _mm256_loadu_ps(u.as_ptr())));
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn vec_dot_bf16_f32(w: &[bf16], a: &[f32]) -> f32 {
    // bf16 is the top half of an f32.
    dot_f32_lanes!(
        w,
        a,
        |i| _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128(w.as_ptr().add(i).cast())),
            16
        )),
        |j| w[j].to_f32()
    )
}

// ---------------------------------------------------------------------------------------------
// Activation quantization (byte-identical to `reference`)

/// Largest |x| over 32 floats (NaNs ignored like `f32::max`: `max_ps` returns its second
/// operand when the first is NaN).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn abs_max32(v: &[__m256; 4]) -> f32 {
    let sign = _mm256_set1_ps(-0.0);
    let mut m = _mm256_setzero_ps();
    for &x in v {
        m = _mm256_max_ps(_mm256_andnot_ps(sign, x), m);
    }
    let m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    let m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    let m1 = _mm_max_ss(m2, _mm_movehdup_ps(m2));
    _mm_cvtss_f32(m1)
}

/// `round()` (half away from zero), as integers: truncate, then step away from zero when the
/// dropped fraction is at least one half.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn round_away(v: __m256) -> __m256i {
    let sign = _mm256_set1_ps(-0.0);
    let t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    let frac = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
    let step = _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0));
    let up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5), _CMP_GE_OQ);
    _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, step)))
}

/// Four vectors of 8 x i32 -> 32 saturated i8 in element order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn pack_i8(i: [__m256i; 4]) -> __m256i {
    let p01 = _mm256_packs_epi32(i[0], i[1]);
    let p23 = _mm256_packs_epi32(i[2], i[3]);
    let p = _mm256_packs_epi16(p01, p23);
    // Packs work per 128-bit lane; put the dwords back in order.
    _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load4(x: &[f32]) -> [__m256; 4] {
    let x = &x[..32];
    let p = x.as_ptr();
    [_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)), _mm256_loadu_ps(p.add(16)), _mm256_loadu_ps(p.add(24))]
}

/// Quantizes 32 floats as Q8_0 does; returns (f16 bits of d, packed quants, quants as i32).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_block(x: &[f32]) -> (f32, __m256i, [__m256i; 4]) {
    let v = load4(x);
    let d = abs_max32(&v) / 127.0;
    let id = _mm256_set1_ps(if d != 0.0 { 1.0 / d } else { 0.0 });
    let q = [
        round_away(_mm256_mul_ps(v[0], id)),
        round_away(_mm256_mul_ps(v[1], id)),
        round_away(_mm256_mul_ps(v[2], id)),
        round_away(_mm256_mul_ps(v[3], id)),
    ];
    (d, pack_i8(q), q)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn to_f16(x: f32) -> f16 {
    f16::from_bits(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT), 0) as u16)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_row_q8_0(x: &[f32], out: &mut [BlockQ8_0]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let (d, packed, _) = q8_block(xb);
        y.d = to_f16(d);
        _mm256_storeu_si256(y.qs.as_mut_ptr().cast(), packed);
    }
}

/// Quantizes 32 floats as Q8_1 does; returns (d, packed quants, sum of the quants, s).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_1_block(x: &[f32]) -> (f16, __m256i, i32, f16) {
    let (d, packed, q) = q8_block(x);
    let sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    (to_f16(d), packed, sum, to_f16(sum as f32 * d))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_row_q8_1(x: &[f32], out: &mut [BlockQ8_1]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let (d, packed, _, s) = q8_1_block(xb);
        (y.d, y.s) = (d, s);
        _mm256_storeu_si256(y.qs.as_mut_ptr().cast(), packed);
    }
}

/// `packed::quantize_q8x32` with [`quantize_row_q8_1`], each block written straight into the
/// packed row (quants, then the f16-rounded scales, the quants' sums and `s` as arrays; see
/// `packed::ActOffsets`) instead of stored as a block and read back byte by byte. `out` must
/// hold the whole row; shorter rows are left.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_q8x32(x: &[f32], out: &mut [u8]) {
    use crate::quant::packed::{ActOffsets, PackedAct};
    let Some(need) = PackedAct::Q8x32.row_bytes(x.len()) else { return };
    let Some(out) = out.get_mut(..need) else { return };
    let o = ActOffsets::new(PackedAct::Q8x32, x.len());
    for (b, xb) in x.chunks_exact(QK).enumerate() {
        let (d, packed, sum, s) = q8_1_block(xb);
        _mm256_storeu_si256(out[b * QK..(b + 1) * QK].as_mut_ptr().cast(), packed);
        out[o.d + 4 * b..o.d + 4 * b + 4].copy_from_slice(&d.to_f32().to_le_bytes());
        out[o.sum + 4 * b..o.sum + 4 * b + 4].copy_from_slice(&sum.to_le_bytes());
        out[o.extra + 4 * b..o.extra + 4 * b + 4].copy_from_slice(&s.to_f32().to_le_bytes());
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_row_q8_k(x: &[f32], out: &mut [BlockQ8K]) {
    let sign = _mm256_set1_ps(-0.0);
    for (xb, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        let mut m = _mm256_setzero_ps();
        for c in xb.chunks_exact(8) {
            m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(c.as_ptr())), m);
        }
        let m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
        let m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        let amax = _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
        if amax == 0.0 {
            *y = BlockQ8K::zeroed();
            continue;
        }
        // The reference keeps the sign of the first element reaching `amax`.
        let max = xb.iter().copied().find(|v| v.abs() == amax).unwrap_or(amax);
        let iscale = -127.0 / max;
        let vs = _mm256_set1_ps(iscale);
        let lim = _mm256_set1_epi32(127);
        for (xc, qc) in xb.chunks_exact(32).zip(y.qs.chunks_exact_mut(32)) {
            let v = load4(xc);
            let mut q = [_mm256_setzero_si256(); 4];
            for k in 0..4 {
                // Round half to even, as ggml's `nearest_int`.
                let r = _mm256_round_ps(_mm256_mul_ps(v[k], vs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(r), lim);
            }
            _mm256_storeu_si256(qc.as_mut_ptr().cast(), pack_i8(q));
        }
        for (s, q) in y.bsums.iter_mut().zip(y.qs.chunks_exact(16)) {
            *s = q.iter().map(|&v| v as i16).sum();
        }
        y.d = 1.0 / iscale;
    }
}

// ---------------------------------------------------------------------------------------------
// Row loops: one call per matrix (or per thread's share) keeps the kernels inlined and the
// per-row overhead to the horizontal sum.

macro_rules! mat_vec {
    ($($name:ident => $dot:ident($W:ty, $A:ty);)*) => {$(
        /// `out[r] = dot(row r, a)` for consecutive rows of `a.len()` blocks each.
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $name(w: &[$W], a: &[$A], out: &mut [f32]) {
            if a.is_empty() {
                out.fill(0.0);
                return;
            }
            for (o, row) in out.iter_mut().zip(w.chunks_exact(a.len())) {
                *o = $dot(row, a);
            }
        }
    )*};
}

mat_vec! {
    mat_vec_q4_0_q8_0 => vec_dot_q4_0_q8_0(BlockQ4_0, BlockQ8_0);
    mat_vec_q4_1_q8_1 => vec_dot_q4_1_q8_1(BlockQ4_1, BlockQ8_1);
    mat_vec_q5_0_q8_0 => vec_dot_q5_0_q8_0(BlockQ5_0, BlockQ8_0);
    mat_vec_q8_0_q8_0 => vec_dot_q8_0_q8_0(BlockQ8_0, BlockQ8_0);
    mat_vec_q4_k_q8_k => vec_dot_q4_k_q8_k(BlockQ4K, BlockQ8K);
    mat_vec_q6_k_q8_k => vec_dot_q6_k_q8_k(BlockQ6K, BlockQ8K);
    mat_vec_f32_f32 => vec_dot_f32_f32(f32, f32);
    mat_vec_f16_f32 => vec_dot_f16_f32(f16, f32);
    mat_vec_bf16_f32 => vec_dot_bf16_f32(bf16, f32);
}

// ---------------------------------------------------------------------------------------------
// Multi-token kernels (prefill): each weight block is decoded once and applied to four
// activation rows, so the decode cost and the weight traffic are shared. Per token and block
// the integer math and the scale product are those of the single-token kernel; only the f32
// accumulation order differs.

/// Drives a 1-row x 4-token tile over `n_rows` rows and `n_tok` activation rows of `nb` blocks
/// each; `out[t * stride + r]`. `$four` computes the four dots of `$row` with `$y` (four token
/// rows); leftover tokens go through the single-token `$dot`. A macro so the body inlines with
/// the caller's target features.
macro_rules! tile4 {
    ($w:expr, $a:expr, $n_rows:expr, $n_tok:expr, $out:expr, $stride:expr, $dot:ident,
     |$row:ident, $y:ident| $four:expr) => {{
        let (w, a, out, stride, n_rows, n_tok) = ($w, $a, $out, $stride, $n_rows, $n_tok);
        let nb = a.len() / n_tok.max(1);
        if nb == 0 {
            return;
        }
        let n_tok = n_tok.min(a.len() / nb);
        let n_rows = n_rows.min(w.len() / nb);
        let tok = |t: usize| &a[t * nb..(t + 1) * nb];
        // Rows go in small groups so a group's weights and one quad of activation rows stay
        // in L1 while the group is swept over every quad.
        const GROUP: usize = 16;
        for r0 in (0..n_rows).step_by(GROUP) {
            let group = w[r0 * nb..(r0 + GROUP).min(n_rows) * nb].chunks_exact(nb);
            let mut t = 0;
            while t + 4 <= n_tok {
                let $y = [tok(t), tok(t + 1), tok(t + 2), tok(t + 3)];
                for (i, $row) in group.clone().enumerate() {
                    let res: [f32; 4] = $four;
                    for (j, v) in res.into_iter().enumerate() {
                        if let Some(o) = out.get_mut((t + j) * stride + r0 + i) {
                            *o = v;
                        }
                    }
                }
                t += 4;
            }
            for t in t..n_tok {
                let at = tok(t);
                for (i, row) in group.clone().enumerate() {
                    if let Some(o) = out.get_mut(t * stride + r0 + i) {
                        *o = $dot(row, at);
                    }
                }
            }
        }
    }};
}

/// Lane `t` of `v` broadcast to all eight lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn lane(v: __m128, t: i32) -> __m256 {
    _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v), _mm256_set1_epi32(t))
}

/// The four tokens' f16 scales of block `b` -> 4 x f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16x4(h: [f16; 4]) -> __m128 {
    let bits = h[0].to_bits() as u64
        | (h[1].to_bits() as u64) << 16
        | (h[2].to_bits() as u64) << 32
        | (h[3].to_bits() as u64) << 48;
    _mm_cvtph_ps(_mm_cvtsi64_si128(bits as i64))
}

/// 4 x 32-element formats with a lone f16 scale and a signed dot against Q8_0: `$decode`
/// turns a weight block into 32 signed bytes, taken apart once for the sign trick. Per token,
/// blocks accumulate exactly as in the single-token kernel (`dot_blocks!`: even blocks into one
/// accumulator, odd into another), so every result is bit-identical to it.
macro_rules! mat_mat_32 {
    ($($name:ident => $dot:ident($W:ty), |$x:ident| $decode:expr;)*) => {$(
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $name(w: &[$W], a: &[BlockQ8_0], n_rows: usize, n_tok: usize, out: &mut [f32], stride: usize) {
            tile4!(w, a, n_rows, n_tok, out, stride, $dot, |row, y| {
                let mut acc = [[_mm256_setzero_ps(); 4]; 2];
                for (b, $x) in row.iter().enumerate() {
                    let (y0, y1, y2, y3) = (&y[0][b], &y[1][b], &y[2][b], &y[3][b]);
                    let d = _mm_mul_ps(f16x4([y0.d, y1.d, y2.d, y3.d]), _mm_set1_ps(fp16($x.d)));
                    let qx = $decode;
                    let ax = _mm256_sign_epi8(qx, qx);
                    let ys = [y0, y1, y2, y3];
                    let acc = &mut acc[b & 1];
                    for t in 0..4 {
                        let sy = _mm256_sign_epi8(load32(&ys[t].qs), qx);
                        let p = _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
                        acc[t] = _mm256_fmadd_ps(lane(d, t as i32), _mm256_cvtepi32_ps(p), acc[t]);
                    }
                }
                let mut res = [0f32; 4];
                for t in 0..4 {
                    res[t] = hsum_ps(_mm256_add_ps(acc[0][t], acc[1][t]));
                }
                res
            })
        }
    )*};
}

mat_mat_32! {
    mat_mat_q4_0_q8_0 => vec_dot_q4_0_q8_0(BlockQ4_0), |x| _mm256_sub_epi8(nibbles32(&x.qs), _mm256_set1_epi8(8));
    mat_mat_q5_0_q8_0 => vec_dot_q5_0_q8_0(BlockQ5_0), |x| {
        let hi = _mm256_andnot_si256(bits_to_bytes32(u32::from_le_bytes(x.qh)), _mm256_set1_epi8(0xF0u8 as i8));
        _mm256_or_si256(nibbles32(&x.qs), hi)
    };
    mat_mat_q8_0_q8_0 => vec_dot_q8_0_q8_0(BlockQ8_0), |x| load32(&x.qs);
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn mat_mat_q4_1_q8_1(
    w: &[BlockQ4_1],
    a: &[BlockQ8_1],
    n_rows: usize,
    n_tok: usize,
    out: &mut [f32],
    stride: usize,
) {
    tile4!(w, a, n_rows, n_tok, out, stride, vec_dot_q4_1_q8_1, |row, y| {
        // Same accumulation per token as `vec_dot_q4_1_q8_1`: even and odd blocks of each pair
        // apart (both for d * dot and for the offsets m * s), a lone last block added after.
        let mut acc = [[_mm256_setzero_ps(); 4]; 2];
        // Lane t: the offsets m * s of token t.
        let mut acc_ms = [_mm_setzero_ps(); 2];
        let mut last_ms = _mm_setzero_ps();
        let pairs = row.len() & !1;
        for (b, x) in row.iter().enumerate() {
            let ys = [&y[0][b], &y[1][b], &y[2][b], &y[3][b]];
            let xdm = _mm_cvtph_ps(_mm_cvtsi32_si128((x.d.to_bits() as u32 | (x.m.to_bits() as u32) << 16) as i32));
            let d = _mm_mul_ps(f16x4([ys[0].d, ys[1].d, ys[2].d, ys[3].d]), _mm_broadcastss_ps(xdm));
            let ms = _mm_mul_ps(f16x4([ys[0].s, ys[1].s, ys[2].s, ys[3].s]), _mm_shuffle_ps(xdm, xdm, 0b01_01_01_01));
            let par = b & 1;
            if b < pairs {
                acc_ms[par] = _mm_add_ps(acc_ms[par], ms);
            } else {
                last_ms = ms;
            }
            let qx = nibbles32(&x.qs);
            for t in 0..4 {
                let p = dot_u8_i8(qx, load32(&ys[t].qs));
                acc[par][t] = _mm256_fmadd_ps(lane(d, t as i32), _mm256_cvtepi32_ps(p), acc[par][t]);
            }
        }
        let (mut ms, mut lm) = ([0f32; 4], [0f32; 4]);
        _mm_storeu_ps(ms.as_mut_ptr(), _mm_add_ps(acc_ms[0], acc_ms[1]));
        _mm_storeu_ps(lm.as_mut_ptr(), last_ms);
        let mut res = [0f32; 4];
        for t in 0..4 {
            if pairs < row.len() {
                ms[t] += lm[t];
            }
            res[t] = hsum_ps(_mm256_add_ps(acc[0][t], acc[1][t])) + ms[t];
        }
        res
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn mat_mat_q4_k_q8_k(
    w: &[BlockQ4K],
    a: &[BlockQ8K],
    n_rows: usize,
    n_tok: usize,
    out: &mut [f32],
    stride: usize,
) {
    let m4 = _mm256_set1_epi8(0x0F);
    tile4!(w, a, n_rows, n_tok, out, stride, vec_dot_q4_k_q8_k, |row, y| {
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut acc_m = [_mm_setzero_ps(); 4];
        for (b, x) in row.iter().enumerate() {
            let ys = [&y[0][b], &y[1][b], &y[2][b], &y[3][b]];
            let (dx, dminx) = (fp16(x.d), -fp16(x.dmin));
            let sm = q4k_scales_mins(&x.scales);
            let mins_scales = _mm256_cvtepu8_epi16(_mm_loadu_si128(sm.as_ptr().cast()));
            let mins = _mm256_extracti128_si256(mins_scales, 1);
            for t in 0..4 {
                let bsums = _mm256_loadu_si256(ys[t].bsums.as_ptr().cast());
                let q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
                let prod = _mm_madd_epi16(mins, q8s);
                acc_m[t] = _mm_fmadd_ps(_mm_set1_ps(dminx * ys[t].d), _mm_cvtepi32_ps(prod), acc_m[t]);
            }
            let sc128 = _mm256_castsi256_si128(mins_scales);
            let scales = _mm256_set_m128i(sc128, sc128);
            let mut sumi = [_mm256_setzero_si256(); 4];
            for g in 0..QK_K / 64 {
                let lo_idx = (4 * g as i16) | ((4 * g as i16 + 1) << 8);
                let hi_idx = (4 * g as i16 + 2) | ((4 * g as i16 + 3) << 8);
                let scale_l = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(lo_idx));
                let scale_h = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(hi_idx));
                let q4bits = _mm256_loadu_si256(x.qs[32 * g..].as_ptr().cast());
                let q4l = _mm256_and_si256(q4bits, m4);
                let q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
                for t in 0..4 {
                    let q8l = _mm256_loadu_si256(ys[t].qs[64 * g..].as_ptr().cast());
                    let q8h = _mm256_loadu_si256(ys[t].qs[64 * g + 32..].as_ptr().cast());
                    let pl = _mm256_madd_epi16(scale_l, _mm256_maddubs_epi16(q4l, q8l));
                    let ph = _mm256_madd_epi16(scale_h, _mm256_maddubs_epi16(q4h, q8h));
                    sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(pl, ph));
                }
            }
            for t in 0..4 {
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * ys[t].d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
            }
        }
        let mut res = [0f32; 4];
        for t in 0..4 {
            let mut m = _mm_add_ps(acc_m[t], _mm_movehl_ps(acc_m[t], acc_m[t]));
            m = _mm_add_ss(m, _mm_movehdup_ps(m));
            res[t] = hsum_ps(acc[t]) + _mm_cvtss_f32(m);
        }
        res
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn mat_mat_q6_k_q8_k(
    w: &[BlockQ6K],
    a: &[BlockQ8K],
    n_rows: usize,
    n_tok: usize,
    out: &mut [f32],
    stride: usize,
) {
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(3);
    tile4!(w, a, n_rows, n_tok, out, stride, vec_dot_q6_k_q8_k, |row, y| {
        let mut acc = [_mm256_setzero_ps(); 4];
        for (b, x) in row.iter().enumerate() {
            let ys = [&y[0][b], &y[1][b], &y[2][b], &y[3][b]];
            let dx = fp16(x.d);
            let scales = _mm_loadu_si128(x.scales.as_ptr().cast());
            let scales16 = _mm256_cvtepi8_epi16(scales);
            let mut sumi = [_mm256_setzero_si256(); 4];
            for t in 0..4 {
                // The -32 offset, as in the single-token kernel: 32 * sum_g scale[g] * bsums[g].
                let bsums = _mm256_loadu_si256(ys[t].bsums.as_ptr().cast());
                sumi[t] = _mm256_sub_epi32(sumi[t], _mm256_slli_epi32(_mm256_madd_epi16(scales16, bsums), 5));
            }
            for h in 0..QK_K / 128 {
                let ql1 = _mm256_loadu_si256(x.ql[64 * h..].as_ptr().cast());
                let ql2 = _mm256_loadu_si256(x.ql[64 * h + 32..].as_ptr().cast());
                let qh = _mm256_loadu_si256(x.qh[32 * h..].as_ptr().cast());
                let q = [
                    _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4)),
                    _mm256_or_si256(
                        _mm256_and_si256(ql2, m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16(ql2, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4),
                    ),
                ];
                for (k, &qk) in q.iter().enumerate() {
                    let s = 8 * h + 2 * k;
                    let idx = _mm_set_epi64x(0x0101_0101_0101_0101 * (s as i64 + 1), 0x0101_0101_0101_0101 * s as i64);
                    let scale = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, idx));
                    for t in 0..4 {
                        let q8 = _mm256_loadu_si256(ys[t].qs[128 * h + 32 * k..].as_ptr().cast());
                        let p = _mm256_madd_epi16(scale, _mm256_maddubs_epi16(qk, q8));
                        sumi[t] = _mm256_add_epi32(sumi[t], p);
                    }
                }
            }
            for t in 0..4 {
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * ys[t].d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
            }
        }
        [hsum_ps(acc[0]), hsum_ps(acc[1]), hsum_ps(acc[2]), hsum_ps(acc[3])]
    })
}

// ---------------------------------------------------------------------------------------------
// The types added to the table after the first ones: Q5_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q5_K.
// Integer parts exact, as above; only the f32 accumulation order differs from `reference`.

/// ggml's IQ4 grid in both 128-bit lanes, for `vpshufb` lookups by nibble.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq4nl_grid() -> __m256i {
    let t = _mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast());
    _mm256_set_m128i(t, t)
}

/// The 32 quants of a Q5_1 block, 0..32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_1_quants(x: &BlockQ5_1) -> __m256i {
    let hi = _mm256_and_si256(bits_to_bytes32(u32::from_le_bytes(x.qh)), _mm256_set1_epi8(0x10));
    _mm256_or_si256(nibbles32(&x.qs), hi)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn vec_dot_q5_1_q8_1(w: &[BlockQ5_1], a: &[BlockQ8_1]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut summs = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        summs += fp16(x.m) * fp16(y.s);
        let d = _mm256_set1_ps(fp16(x.d) * fp16(y.d));
        let p = dot_u8_i8(q5_1_quants(x), load32(&y.qs));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
    }
    hsum_ps(acc) + summs
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn vec_dot_iq4_nl_q8_0(w: &[BlockIq4Nl], a: &[BlockQ8_0]) -> f32 {
    let grid = iq4nl_grid();
    dot_blocks!(w, a, |x, y| dot_i8(_mm256_shuffle_epi8(grid, nibbles32(&x.qs)), load32(&y.qs)))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn vec_dot_iq4_xs_q8_k(w: &[BlockIq4Xs], a: &[BlockQ8K]) -> f32 {
    let grid = iq4nl_grid();
    let mut acc = _mm256_setzero_ps();
    for (x, y) in w.iter().zip(a) {
        let mut sumi = _mm256_setzero_si256();
        for j in 0..QK_K / 32 {
            let qs: &[u8; 16] = x.qs[16 * j..16 * j + 16].try_into().unwrap_or(&[0; 16]);
            let q = _mm256_shuffle_epi8(grid, nibbles32(qs));
            let q8 = _mm256_loadu_si256(y.qs[32 * j..].as_ptr().cast());
            // |q| * (q8 with q's sign): pair sums at most 2 * 127 * 127, inside i16.
            let p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(q8, q));
            let ls = _mm256_set1_epi16(iq4xs_scale(x, j) as i16 - 32);
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, ls));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16(x.d) * y.d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_ps(acc)
}

/// Scale bytes `s` (lanes 0..8) and `s + 1` (lanes 8..16) of `scales` as 16 x i16: the two
/// 16-element sub-blocks one 32-element product covers.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scale_pair16(scales: __m128i, s: usize) -> __m256i {
    let idx = _mm_set_epi64x(0x0101_0101_0101_0101 * (s as i64 + 1), 0x0101_0101_0101_0101 * s as i64);
    _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, idx))
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn vec_dot_q2_k_q8_k(w: &[BlockQ2K], a: &[BlockQ8K]) -> f32 {
    let m2 = _mm256_set1_epi8(3);
    let mut acc = _mm256_setzero_ps();
    let mut acc_m = _mm256_setzero_ps();
    for (x, y) in w.iter().zip(a) {
        let sc_all = _mm_loadu_si128(x.scales.as_ptr().cast());
        let scales = _mm_and_si128(sc_all, _mm_set1_epi8(0x0F));
        let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc_all, 4), _mm_set1_epi8(0x0F)));
        let bsums = _mm256_loadu_si256(y.bsums.as_ptr().cast());
        let summ = _mm256_madd_epi16(mins, bsums);
        let mut sumi = _mm256_setzero_si256();
        for h in 0..QK_K / 128 {
            let q2bits = _mm256_loadu_si256(x.qs[32 * h..].as_ptr().cast());
            for k in 0..4 {
                let q = _mm256_and_si256(_mm256_srl_epi16(q2bits, _mm_cvtsi32_si128(2 * k as i32)), m2);
                let q8 = _mm256_loadu_si256(y.qs[128 * h + 32 * k..].as_ptr().cast());
                let p = _mm256_maddubs_epi16(q, q8);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scale_pair16(scales, 8 * h + 2 * k), p));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16(x.d) * y.d), _mm256_cvtepi32_ps(sumi), acc);
        acc_m = _mm256_fmadd_ps(_mm256_set1_ps(-fp16(x.dmin) * y.d), _mm256_cvtepi32_ps(summ), acc_m);
    }
    hsum_ps(acc) + hsum_ps(acc_m)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn vec_dot_q3_k_q8_k(w: &[BlockQ3K], a: &[BlockQ8K]) -> f32 {
    let m2 = _mm256_set1_epi8(3);
    let one = _mm256_set1_epi8(1);
    let mut acc = _mm256_setzero_ps();
    for (x, y) in w.iter().zip(a) {
        let sc = q3k_scales(&x.scales);
        let scales = _mm_loadu_si128(sc.as_ptr().cast());
        // The quants go in unsigned (low bits | high bit << 2, 0..8); their -4 comes back
        // through the activation sums: 4 * sum_j scale[j] * bsums[j].
        let bsums = _mm256_loadu_si256(y.bsums.as_ptr().cast());
        let corr = _mm256_madd_epi16(_mm256_cvtepi8_epi16(scales), bsums);
        let hmask = _mm256_loadu_si256(x.hmask.as_ptr().cast());
        let mut sumi = _mm256_setzero_si256();
        for h in 0..QK_K / 128 {
            let q2bits = _mm256_loadu_si256(x.qs[32 * h..].as_ptr().cast());
            for k in 0..4 {
                let low = _mm256_and_si256(_mm256_srl_epi16(q2bits, _mm_cvtsi32_si128(2 * k as i32)), m2);
                let hb = _mm256_and_si256(_mm256_srl_epi16(hmask, _mm_cvtsi32_si128((4 * h + k) as i32)), one);
                let q = _mm256_or_si256(low, _mm256_slli_epi16(hb, 2));
                let q8 = _mm256_loadu_si256(y.qs[128 * h + 32 * k..].as_ptr().cast());
                let p = _mm256_maddubs_epi16(q, q8);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scale_pair16(scales, 8 * h + 2 * k), p));
            }
        }
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(corr, 2));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16(x.d) * y.d), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum_ps(acc)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn vec_dot_q5_k_q8_k(w: &[BlockQ5K], a: &[BlockQ8K]) -> f32 {
    let m4 = _mm256_set1_epi8(0x0F);
    let one = _mm256_set1_epi8(1);
    let mut acc = _mm256_setzero_ps();
    let mut acc_m = _mm_setzero_ps();
    for (x, y) in w.iter().zip(a) {
        let d = fp16(x.d) * y.d;
        let dmin = -fp16(x.dmin) * y.d;
        let sm = q4k_scales_mins(&x.scales);
        let mins_scales = _mm256_cvtepu8_epi16(_mm_loadu_si128(sm.as_ptr().cast()));
        let bsums = _mm256_loadu_si256(y.bsums.as_ptr().cast());
        let q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
        let prod = _mm_madd_epi16(_mm256_extracti128_si256(mins_scales, 1), q8s);
        acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m);

        let sc128 = _mm256_castsi256_si128(mins_scales);
        let scales = _mm256_set_m128i(sc128, sc128);
        let hbits = _mm256_loadu_si256(x.qh.as_ptr().cast());
        let mut sumi = _mm256_setzero_si256();
        for g in 0..QK_K / 64 {
            let lo_idx = (4 * g as i16) | ((4 * g as i16 + 1) << 8);
            let hi_idx = (4 * g as i16 + 2) | ((4 * g as i16 + 3) << 8);
            let scale_l = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(lo_idx));
            let scale_h = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(hi_idx));
            let q4bits = _mm256_loadu_si256(x.qs[32 * g..].as_ptr().cast());
            // Fifth bits: bit 2g of qh[l] for the low nibbles, bit 2g + 1 for the high ones.
            let h_l = _mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * g as i32)), one);
            let h_h = _mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * g as i32 + 1)), one);
            let q5l = _mm256_or_si256(_mm256_and_si256(q4bits, m4), _mm256_slli_epi16(h_l, 4));
            let q5h = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4), _mm256_slli_epi16(h_h, 4));
            let q8l = _mm256_loadu_si256(y.qs[64 * g..].as_ptr().cast());
            let q8h = _mm256_loadu_si256(y.qs[64 * g + 32..].as_ptr().cast());
            let pl = _mm256_madd_epi16(scale_l, _mm256_maddubs_epi16(q5l, q8l));
            let ph = _mm256_madd_epi16(scale_h, _mm256_maddubs_epi16(q5h, q8h));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
    hsum_ps(acc) + _mm_cvtss_f32(acc_m)
}

mat_vec! {
    mat_vec_q5_1_q8_1 => vec_dot_q5_1_q8_1(BlockQ5_1, BlockQ8_1);
    mat_vec_iq4_nl_q8_0 => vec_dot_iq4_nl_q8_0(BlockIq4Nl, BlockQ8_0);
    mat_vec_iq4_xs_q8_k => vec_dot_iq4_xs_q8_k(BlockIq4Xs, BlockQ8K);
    mat_vec_q2_k_q8_k => vec_dot_q2_k_q8_k(BlockQ2K, BlockQ8K);
    mat_vec_q3_k_q8_k => vec_dot_q3_k_q8_k(BlockQ3K, BlockQ8K);
    mat_vec_q5_k_q8_k => vec_dot_q5_k_q8_k(BlockQ5K, BlockQ8K);
}

mat_mat_32! {
    mat_mat_iq4_nl_q8_0 => vec_dot_iq4_nl_q8_0(BlockIq4Nl), |x| _mm256_shuffle_epi8(iq4nl_grid(), nibbles32(&x.qs));
}
