//! AVX-512 quantizer of activation rows into the packed Q8x32 layout (`packed::ActOffsets`),
//! with the bits of the scalar Q8_1 quantizer. Blocks go 16 at a time: each block's quants take
//! two vectors, and the 16 blocks' maxima, scales, sums and `s` are formed lane-wise, one vector
//! each, and stored as the layout's arrays in one write each (the AVX2 quantizer reduces and
//! stores every block's scalars on its own, which costs it more than its quants).
//!
//! `unsafe` for `#[target_feature]`; the caller (`sets::avx512`) hands this set out only on CPUs
//! that have AVX-512 F/BW/VL.

use std::arch::x86_64::*;

use crate::quant::packed::{ActOffsets, PackedAct};

const QK: usize = 32;

/// Blocks whose scalars share one vector.
const GROUP: usize = 16;

/// Fills a [`PackedAct::Q8x32`] row from `x` (`x.len()` a multiple of 32): quants
/// `round(x / d)` half away from zero, `d = amax / 127` rounded to f16, the quants' sum and
/// `s = d * sum` rounded to f16, as `quantize_row_q8_1` makes them. `out` must hold the whole
/// row; shorter rows are left.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(crate) unsafe fn quantize_q8x32(x: &[f32], out: &mut [u8]) {
    let Some(need) = PackedAct::Q8x32.row_bytes(x.len()) else { return };
    let Some(out) = out.get_mut(..need) else { return };
    let o = ActOffsets::new(PackedAct::Q8x32, x.len());
    let nb = x.len() / QK;
    let (xp, op) = (x.as_ptr(), out.as_mut_ptr());
    for b0 in (0..nb).step_by(GROUP) {
        let m = (nb - b0).min(GROUP);
        let block = |j: usize| xp.add((b0 + j) * QK);

        // Lane j: block j's largest magnitude (blocks past the row count as zero).
        let mut maxima = [_mm512_setzero_ps(); GROUP];
        for (j, mx) in maxima.iter_mut().enumerate().take(m) {
            let lo = _mm512_abs_ps(_mm512_loadu_ps(block(j)));
            let hi = _mm512_abs_ps(_mm512_loadu_ps(block(j).add(16)));
            // max(x, m) keeps m when x is NaN, as the scalar and AVX2 maxima do.
            *mx = _mm512_max_ps(hi, _mm512_max_ps(lo, _mm512_setzero_ps()));
        }
        let amax = lanes_of(&maxima, |a, b| _mm512_max_ps(a, b));
        let d = _mm512_div_ps(amax, _mm512_set1_ps(127.0));
        let id = _mm512_maskz_div_ps(_mm512_cmpneq_ps_mask(d, _mm512_setzero_ps()), _mm512_set1_ps(1.0), d);
        let mut ids = [0f32; GROUP];
        _mm512_storeu_ps(ids.as_mut_ptr(), id);

        // Quants, and lane-wise partial sums of each block's.
        let mut sums = [_mm512_setzero_ps(); GROUP];
        for (j, sum) in sums.iter_mut().enumerate().take(m) {
            let id = _mm512_set1_ps(ids[j]);
            let lo = round_away(_mm512_mul_ps(_mm512_loadu_ps(block(j)), id));
            let hi = round_away(_mm512_mul_ps(_mm512_loadu_ps(block(j).add(16)), id));
            let q = op.add((b0 + j) * QK);
            _mm_storeu_si128(q.cast(), _mm512_cvtsepi32_epi8(lo));
            _mm_storeu_si128(q.add(16).cast(), _mm512_cvtsepi32_epi8(hi));
            *sum = _mm512_castsi512_ps(_mm512_add_epi32(lo, hi));
        }
        let sum = _mm512_castps_si512(lanes_of(&sums, |a, b| {
            _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)))
        }));

        let d16 = round_f16(d);
        let s16 = round_f16(_mm512_mul_ps(_mm512_cvtepi32_ps(sum), d));
        let keep = if m == GROUP { 0xFFFF } else { ((1u32 << m) - 1) as __mmask16 };
        _mm512_mask_storeu_ps(op.add(o.d + 4 * b0).cast(), keep, d16);
        _mm512_mask_storeu_epi32(op.add(o.sum + 4 * b0).cast(), keep, sum);
        _mm512_mask_storeu_ps(op.add(o.extra + 4 * b0).cast(), keep, s16);
    }
}

/// `round()` (half away from zero), as integers: truncate, then step away from zero when the
/// dropped fraction is at least one half (the AVX2 quantizer's `round_away`, on 16 lanes).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn round_away(v: __m512) -> __m512i {
    let t = _mm512_roundscale_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(v);
    let frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
    // ±1.0 by the sign of v, in integer operations (the float ones are AVX-512 DQ).
    let sign = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(i32::MIN));
    let step = _mm512_castsi512_ps(_mm512_or_si512(sign, _mm512_set1_epi32(0x3F80_0000)));
    let up = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(frac, _mm512_set1_ps(0.5));
    _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, step))
}

/// `x` rounded to f16 and back, to nearest even as the scalar quantizer's conversion.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn round_f16(x: __m512) -> __m512 {
    _mm512_cvtph_ps(_mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x))
}

/// Lane `j` of the result: `op` folded over the 16 lanes of `v[j]`. Four halving rounds over
/// pairs of vectors (15 shuffle pairs in all instead of a full reduction per vector); `op` must
/// not depend on the order it is applied in (a maximum, an integer sum).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn lanes_of(v: &[__m512; GROUP], op: impl Fn(__m512, __m512) -> __m512) -> __m512 {
    // Round 1, 256-bit halves: (x.lo ∘ x.hi, y.lo ∘ y.hi) for inputs 2p (x) and 2p + 1 (y).
    let a: [__m512; 8] = std::array::from_fn(|p| {
        let (x, y) = (v[2 * p], v[2 * p + 1]);
        op(_mm512_shuffle_f32x4::<0b01_00_01_00>(x, y), _mm512_shuffle_f32x4::<0b11_10_11_10>(x, y))
    });
    // Round 2, 128-bit quarters: quarter k holds input 4p + k's four partial results.
    let b: [__m512; 4] = std::array::from_fn(|p| {
        let (x, y) = (a[2 * p], a[2 * p + 1]);
        op(_mm512_shuffle_f32x4::<0b10_00_10_00>(x, y), _mm512_shuffle_f32x4::<0b11_01_11_01>(x, y))
    });
    // Round 3, pairs within quarters: lanes 4k, 4k + 1 from input 8p + k, 4k + 2, 4k + 3 from
    // input 8p + 4 + k.
    let c: [__m512; 2] = std::array::from_fn(|p| {
        let (x, y) = (b[2 * p], b[2 * p + 1]);
        op(_mm512_shuffle_ps::<0b01_00_01_00>(x, y), _mm512_shuffle_ps::<0b11_10_11_10>(x, y))
    });
    // Round 4: lane 4k + e holds input k + 4e.
    let r = op(_mm512_shuffle_ps::<0b10_00_10_00>(c[0], c[1]), _mm512_shuffle_ps::<0b11_01_11_01>(c[0], c[1]));
    // Back to lane j holding input j: lane 4k + e (input k + 4e) goes to lane k + 4e.
    _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r)
}
