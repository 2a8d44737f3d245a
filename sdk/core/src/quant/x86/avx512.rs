//! AVX-512 (F, BW, VL) + VNNI kernels on weights packed into 16-row tiles ([`super::tile16`]).
//!
//! One kernel per weight type serves decode and prefill: `mat_mat_*` runs tiles × tokens through
//! a micro-kernel generic over the token count `E` (8 or 4 at a time, then the rest at once).
//! Every instance performs, per (row, token) and block in order, the same operations: an exact
//! integer dot product (`vpdpbusd`, any order), then `acc = fma(d_w * d_a, float(isum), acc)`
//! (plus the format's offset term), so a token's results are bit-identical whatever `E`, tile
//! or thread it lands in.
//!
//! Every function is `unsafe` because of `#[target_feature]` (the caller has checked the CPU)
//! and because it reads through raw pointers whose extents the byte-level wrappers in
//! `dispatch` have checked: `tiles` holds `ceil(n_rows / 16)` tiles of `tile_bytes(ty, cols)`,
//! `act` `n_tok` rows of `PackedAct::row_bytes(cols)`, `out` reaches
//! `(n_tok - 1) * stride + n_rows` with `stride >= n_rows` when `n_tok > 1`.
//!
//! Activation quants lie in [-127, 127], so `vpdpbusd`'s u8 × i8 pairs never overflow i16 pair sums.

#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

use super::tile16;
use super::tiles::{drive, each_q6k_slice, prefetch, BlockLayout};
use super::tiles::IQ4NL_BIASED;
use crate::quant::packed::ActRow;
use crate::quant::GgmlType;

/// Four quants at `p` broadcast to every lane (folds into `vpdpbusd`'s `{1to16}` operand).
#[inline(always)]
unsafe fn bcast4(p: *const u8) -> __m512i {
    _mm512_set1_epi32(p.cast::<i32>().read_unaligned())
}

#[inline(always)]
unsafe fn load(p: *const u8) -> __m512i {
    _mm512_loadu_si512(p.cast())
}

/// 16 f16 scales at `p` -> f32.
#[inline(always)]
unsafe fn scales16(p: *const u8) -> __m512 {
    _mm512_cvtph_ps(_mm256_loadu_si256(p.cast()))
}

/// How far past the block in use a micro-kernel of one token requests the weights (this set's
/// own distances; the AVX2 sets keep [`PREFETCH_DISTANCE`](super::tiles::PREFETCH_DISTANCE)).
/// On a Zen 5 EPYC, 2 threads, `pass_cost` alternated with 2048 bytes for both: one-token
/// passes 0 to -4% (SmolLM2, Gemma 3, Qwen2.5), 9-token passes -9 to -15%; 6144 bytes did as
/// well as 4096 on one token, 16384 worse than 8192 on nine. (On the AVX-512 Xeon where 2048
/// was chosen, 4096 had done no better on one to eight tokens.)
const ONE_TOKEN_DISTANCE: usize = 4096;
/// The same for micro-kernels of several tokens, where requesting further ahead paid (the
/// figures above), though not for one token.
const BATCH_DISTANCE: usize = 8192;

/// Requests the weights past the tile block of `size` bytes at `p` (in this tile or the next;
/// past the last tile they are never read), at the distance for `E` tokens.
#[inline(always)]
unsafe fn request_ahead<const E: usize>(p: *const u8, size: usize) {
    prefetch(p.wrapping_add(if E == 1 { ONE_TOKEN_DISTANCE } else { BATCH_DISTANCE }), size);
}

/// Lanes of the tile that are real rows.
#[inline(always)]
fn row_mask(valid: usize) -> __mmask16 {
    if valid >= 16 {
        0xFFFF
    } else {
        ((1u32 << valid) - 1) as __mmask16
    }
}

// ---------------------------------------------------------------------------------------------
// 32-element formats

/// Micro-kernel of a 32-element format: `$decode` yields a block's 8 weight vectors (unsigned
/// quants) and the activation offset each one multiplies; `$d` names the scale array;
/// `$shift` is log2 of the format's
/// quant offset (q - 2^shift), taken off exactly through the activation block sums; `$m`
/// whether the format adds `m * s` (Q4_1).
macro_rules! q32_micro {
    ($name:ident, $ty:expr, d: $d:ident, shift: $shift:expr, m: $m:expr, |$qs:ident, $hb:ident| $decode:expr) => {
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        unsafe fn $name<const E: usize>(
            tile: *const u8,
            nb: usize,
            o: &BlockLayout,
            a: [ActRow; E],
            out: [*mut f32; E],
            valid: usize,
        ) {
            let mut acc = [_mm512_setzero_ps(); E];
            for b in 0..nb {
                let $qs = tile.add(o.size * b);
                let $hb = $qs.add(o.a);
                request_ahead::<E>($qs, o.size);
                let groups: [(__m512i, usize); 8] = $decode;
                let mut isum = [_mm512_setzero_si512(); E];
                for (w, off) in groups {
                    for e in 0..E {
                        isum[e] = _mm512_dpbusd_epi32(isum[e], w, bcast4(a[e].qs.add(32 * b + off)));
                    }
                }
                let dw = scales16(tile.add(o.size * b + o.$d));
                for e in 0..E {
                    let mut i = isum[e];
                    if $shift > 0 {
                        let s = a[e].sum.add(4 * b).cast::<i32>().read_unaligned();
                        i = _mm512_sub_epi32(i, _mm512_set1_epi32(s << $shift));
                    }
                    let d = _mm512_mul_ps(dw, _mm512_set1_ps(a[e].d(b)));
                    acc[e] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(i), acc[e]);
                    if $m {
                        let s = _mm512_set1_ps(a[e].extra.add(4 * b).cast::<f32>().read_unaligned());
                        acc[e] = _mm512_fmadd_ps(scales16(tile.add(o.size * b + o.b)), s, acc[e]);
                    }
                }
            }
            for e in 0..E {
                _mm512_mask_storeu_ps(out[e], row_mask(valid), acc[e]);
            }
        }
    };
}

/// The 4 nibble vectors of a block: low nibbles multiply activations `4v..`, high ones `16 + 4v..`.
#[inline(always)]
unsafe fn nibble_groups(qs: *const u8) -> [(__m512i, usize); 8] {
    let m4 = _mm512_set1_epi8(0x0F);
    let v: [__m512i; 4] = std::array::from_fn(|i| load(qs.add(64 * i)));
    let lo = |i: usize| _mm512_and_si512(v[i], m4);
    let hi = |i: usize| _mm512_and_si512(_mm512_srli_epi16(v[i], 4), m4);
    [(lo(0), 0), (hi(0), 16), (lo(1), 4), (hi(1), 20), (lo(2), 8), (hi(2), 24), (lo(3), 12), (hi(3), 28)]
}

q32_micro!(micro_q4_0, GgmlType::Q4_0, d: a, shift: 3, m: false, |qs, _hb| nibble_groups(qs));
q32_micro!(micro_q4_1, GgmlType::Q4_1, d: a, shift: 0, m: true, |qs, _hb| nibble_groups(qs));
q32_micro!(micro_q8_0, GgmlType::Q8_0, d: a, shift: 7, m: false, |qs, _hb| {
    std::array::from_fn(|g| (load(qs.add(64 * g)), 4 * g))
});
q32_micro!(micro_q5_0, GgmlType::Q5_0, d: b, shift: 4, m: false, |qs, hb| q5_groups(qs, hb));
q32_micro!(micro_q5_1, GgmlType::Q5_1, d: c, shift: 0, m: true, |qs, hb| q5_groups(qs, hb));

// IQ4_NL: the nibbles looked up in ggml's grid plus 128 (unsigned for `vpdpbusd`; the 128
// comes off exactly through the activation block sums, as Q8_0's).
q32_micro!(micro_iq4_nl, GgmlType::IQ4_NL, d: a, shift: 7, m: false, |qs, _hb| {
    let grid = _mm512_broadcast_i32x4(_mm_loadu_si128(IQ4NL_BIASED.as_ptr().cast()));
    nibble_groups(qs).map(|(w, off)| (_mm512_shuffle_epi8(grid, w), off))
});

/// [`nibble_groups`] with each quant's fifth bit, from the two masks per nibble vector at `hb`.
#[inline(always)]
unsafe fn q5_groups(qs: *const u8, hb: *const u8) -> [(__m512i, usize); 8] {
    let mut g = nibble_groups(qs);
    let sixteen = _mm512_set1_epi8(16);
    for (i, (w, _)) in g.iter_mut().enumerate() {
        let k: __mmask64 = hb.add(8 * i).cast::<u64>().read_unaligned();
        *w = _mm512_mask_add_epi8(*w, k, *w, sixteen);
    }
    g
}

// ---------------------------------------------------------------------------------------------
// k-quants

/// Q4_K: per sub-block an exact dot product times its 6-bit scale, summed in i32 as ggml does;
/// the mins through the activation's 32-element sums (`vpdpwssd` on scale pairs).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn micro_q4_k<const E: usize>(
    tile: *const u8,
    nb: usize,
    o: &BlockLayout,
    a: [ActRow; E],
    out: [*mut f32; E],
    valid: usize,
) {
    micro_q45_k::<E, false>(tile, nb, o, a, out, valid)
}

/// Q5_K: Q4_K with each quant's fifth bit taken from the tile's qh vectors.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn micro_q5_k<const E: usize>(
    tile: *const u8,
    nb: usize,
    o: &BlockLayout,
    a: [ActRow; E],
    out: [*mut f32; E],
    valid: usize,
) {
    micro_q45_k::<E, true>(tile, nb, o, a, out, valid)
}

/// The Q4_K and (`Q5`) Q5_K micro-kernel: the same sums, Q5_K's quants one bit wider.
#[inline(always)]
unsafe fn micro_q45_k<const E: usize, const Q5: bool>(
    tile: *const u8,
    nb: usize,
    o: &BlockLayout,
    a: [ActRow; E],
    out: [*mut f32; E],
    valid: usize,
) {
    let m4 = _mm512_set1_epi8(0x0F);
    let b4 = _mm512_set1_epi8(0x10);
    let lo16 = _mm512_set1_epi32(0xFFFF);
    let mut acc = [_mm512_setzero_ps(); E];
    for b in 0..nb {
        let qs = tile.add(o.size * b);
        request_ahead::<E>(qs, o.size);
        let mut sumi = [_mm512_setzero_si512(); E];
        let mut summ = [_mm512_setzero_si512(); E];
        for p in 0..4 {
            let mins = _mm512_cvtepu8_epi16(_mm256_loadu_si256(qs.add(o.b + 32 * p).cast()));
            for e in 0..E {
                summ[e] = _mm512_dpwssd_epi32(summ[e], mins, bcast4(a[e].extra.add(16 * b + 4 * p)));
            }
        }
        for g in 0..4 {
            let sc = _mm512_cvtepu8_epi16(_mm256_loadu_si256(qs.add(o.a + 32 * g).cast()));
            let (sc_lo, sc_hi) = (_mm512_and_si512(sc, lo16), _mm512_srli_epi32(sc, 16));
            let mut il = [_mm512_setzero_si512(); E];
            let mut ih = [_mm512_setzero_si512(); E];
            for h in 0..8 {
                let raw = load(qs.add(512 * g + 64 * h));
                let mut lo = _mm512_and_si512(raw, m4);
                let mut hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
                if Q5 {
                    // Bits 2g and 2g + 1 of the qh bytes to bit 4 (bits never cross a byte:
                    // the shift right is at most 6, then 4 or 3 left, masked to bit 4).
                    let bits = _mm512_srl_epi16(load(qs.add(2048 + 64 * h)), _mm_cvtsi32_si128(2 * g as i32));
                    lo = _mm512_ternarylogic_epi32(lo, _mm512_slli_epi16(bits, 4), b4, 0xF8);
                    hi = _mm512_ternarylogic_epi32(hi, _mm512_slli_epi16(bits, 3), b4, 0xF8);
                }
                for e in 0..E {
                    let q8 = a[e].qs.add(256 * b + 64 * g + 4 * h);
                    il[e] = _mm512_dpbusd_epi32(il[e], lo, bcast4(q8));
                    ih[e] = _mm512_dpbusd_epi32(ih[e], hi, bcast4(q8.add(32)));
                }
            }
            for e in 0..E {
                let s = _mm512_add_epi32(_mm512_mullo_epi32(il[e], sc_lo), _mm512_mullo_epi32(ih[e], sc_hi));
                sumi[e] = _mm512_add_epi32(sumi[e], s);
            }
        }
        let dw = scales16(qs.add(o.c));
        let dminw = scales16(qs.add(o.d));
        for e in 0..E {
            let da = _mm512_set1_ps(a[e].d(b));
            acc[e] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(sumi[e]), acc[e]);
            acc[e] = _mm512_fnmadd_ps(_mm512_mul_ps(dminw, da), _mm512_cvtepi32_ps(summ[e]), acc[e]);
        }
    }
    for e in 0..E {
        _mm512_mask_storeu_ps(out[e], row_mask(valid), acc[e]);
    }
}

/// Q6_K: 6-bit quants rebuilt from the nibble and top-bit vectors, used unsigned; the -32
/// comes back exactly as 32 × Σ scale × (sum of 16 activation quants).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn micro_q6_k<const E: usize>(
    tile: *const u8,
    nb: usize,
    o: &BlockLayout,
    a: [ActRow; E],
    out: [*mut f32; E],
    valid: usize,
) {
    let mut acc = [_mm512_setzero_ps(); E];
    for b in 0..nb {
        let ql = tile.add(o.size * b);
        request_ahead::<E>(ql, o.size);
        let scales = |p: usize| _mm512_cvtepi8_epi16(_mm256_loadu_si256(ql.add(o.a + 32 * p).cast()));
        let mut corr = [_mm512_setzero_si512(); E];
        for p in 0..8 {
            let sp = scales(p);
            for e in 0..E {
                corr[e] = _mm512_dpwssd_epi32(corr[e], sp, bcast4(a[e].sum.add(32 * b + 4 * p)));
            }
        }
        let mut sumi: [__m512i; E] =
            std::array::from_fn(|e| _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(corr[e], 5)));
        each_q6k_slice!(q6k_slice::<E>(ql, o, &a, b, &mut sumi));
        let dw = scales16(ql.add(o.b));
        for e in 0..E {
            let da = _mm512_set1_ps(a[e].d(b));
            acc[e] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(sumi[e]), acc[e]);
        }
    }
    for e in 0..E {
        _mm512_mask_storeu_ps(out[e], row_mask(valid), acc[e]);
    }
}

/// Adds the 32 elements `128H + 32K..` of every row of Q6_K block `b` at `ql` (two sub-blocks
/// of 16, each with its scale) to `sumi`.
#[inline(always)]
unsafe fn q6k_slice<const E: usize, const H: usize, const K: usize>(
    ql: *const u8,
    o: &BlockLayout,
    a: &[ActRow; E],
    b: usize,
    sumi: &mut [__m512i; E],
) {
    let m4 = _mm512_set1_epi8(0x0F);
    let m30 = _mm512_set1_epi8(0x30);
    let qh = ql.add(2048);
    let sp = _mm512_cvtepi8_epi16(_mm256_loadu_si256(ql.add(o.a + 32 * (4 * H + K)).cast()));
    let sc = [_mm512_srai_epi32(_mm512_slli_epi32(sp, 16), 16), _mm512_srai_epi32(sp, 16)];
    for (half, &sc) in sc.iter().enumerate() {
        let mut is = [_mm512_setzero_si512(); E];
        for l4 in 4 * half..4 * half + 4 {
            let low = load(ql.add(64 * (16 * H + 8 * (K & 1) + l4)));
            let nib = if K < 2 { _mm512_and_si512(low, m4) } else { _mm512_and_si512(_mm512_srli_epi16(low, 4), m4) };
            let top = load(qh.add(64 * (8 * H + l4)));
            let top = match K {
                0 => _mm512_slli_epi16(top, 4),
                1 => _mm512_slli_epi16(top, 2),
                2 => top,
                _ => _mm512_srli_epi16(top, 2),
            };
            // nib | (top & 0x30)
            let q = _mm512_ternarylogic_epi32(nib, top, m30, 0xF8);
            for e in 0..E {
                is[e] = _mm512_dpbusd_epi32(is[e], q, bcast4(a[e].qs.add(256 * b + 128 * H + 32 * K + 4 * l4)));
            }
        }
        for e in 0..E {
            sumi[e] = _mm512_add_epi32(sumi[e], _mm512_mullo_epi32(is[e], sc));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points (sizes checked by the caller, see the module documentation)

macro_rules! entry {
    ($($name:ident => $micro:ident, $ty:expr, $emax:literal, $tail:tt;)*) => {$(
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        pub unsafe fn $name(cols: usize, tiles: &[u8], n_rows: usize, act: &[u8], n_tok: usize, out: $crate::quant::packed::OutRows<'_>, stride: usize) {
            drive!(tile16, $micro, $emax, $tail, $ty, cols, tiles, n_rows, act, n_tok, out, stride)
        }
    )*};
}

entry! {
    mat_mat_q4_0 => micro_q4_0, GgmlType::Q4_0, 8, [7 6 5 4 3 2 1];
    mat_mat_q4_1 => micro_q4_1, GgmlType::Q4_1, 8, [7 6 5 4 3 2 1];
    mat_mat_q5_0 => micro_q5_0, GgmlType::Q5_0, 8, [7 6 5 4 3 2 1];
    mat_mat_q5_1 => micro_q5_1, GgmlType::Q5_1, 8, [7 6 5 4 3 2 1];
    mat_mat_q8_0 => micro_q8_0, GgmlType::Q8_0, 8, [7 6 5 4 3 2 1];
    mat_mat_iq4_nl => micro_iq4_nl, GgmlType::IQ4_NL, 8, [7 6 5 4 3 2 1];
    mat_mat_q4_k => micro_q4_k, GgmlType::Q4_K, 4, [3 2 1];
    mat_mat_q5_k => micro_q5_k, GgmlType::Q5_K, 4, [3 2 1];
    mat_mat_q6_k => micro_q6_k, GgmlType::Q6_K, 4, [3 2 1];
}
