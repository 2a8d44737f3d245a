//! 256-bit VNNI kernels on weights packed into 8-row tiles ([`super::tile8`], the AVX2 packed
//! kernels' layout), for CPUs with AVX-VNNI but no AVX-512 (Alder Lake and later client cores).
//!
//! The kernels are those of [`super::avx2_packed`] with each integer dot product done by
//! `vpdpbusd`: u8 × i8 products summed in fours straight into i32, so the i16 chunking that
//! `vpmaddubsw` needs goes away; k-quant sub-block sums are multiplied by their scales in i32
//! (`vpmulld`). Q8_0 keeps the sign trick (`|w|` times `a` with `w`'s sign, since the tiles hold
//! its quants signed); `vpdpbusd` does not saturate, so `|-128|` read as 128 is exact. Per
//! (row, token) and block, every instance performs the same operations as the AVX2 kernels: an
//! exact integer dot product, then `acc = fma(d_w * d_a, float(isum), acc)` (plus the format's
//! offset term), so a token's results are bit-identical whatever `E`, tile or thread it lands
//! in, and equal to the AVX2 packed kernels'.
//!
//! The kernels are written once (`vnni256_kernels!`) and built twice: [`vex`], with AVX-VNNI's
//! VEX-encoded `vpdpbusd`, and [`evex`], the same 256-bit operation in its EVEX encoding
//! (AVX-512 VNNI + VL), so that CPUs with AVX-512 can run and test these kernels too.
//!
//! Every function is `unsafe` for the reasons and under the contract given in
//! [`super::avx2_packed`]'s documentation.

#![allow(clippy::missing_safety_doc)]

/// Micro-kernel of a 32-element format for target features `$features` and dot instruction
/// `$dot`: `$decode` yields a block's 8 weight vectors and the activation offset each one
/// multiplies; `$d` names the scale array; `$shift` is log2 of the format's quant offset
/// (q - 2^shift), taken off exactly through the activation block sums; `$signed` whether the
/// quants are signed (the sign trick); `$m` whether the format adds `m * s` (Q4_1).
macro_rules! q32_micro {
    ($features:literal, $dot:ident, $name:ident, d: $d:ident, shift: $shift:expr, signed: $signed:expr, m: $m:expr,
     |$qs:ident, $hb:ident| $decode:expr) => {
        #[target_feature(enable = $features)]
        unsafe fn $name<const E: usize>(
            tile: *const u8,
            nb: usize,
            o: &BlockLayout,
            a: [ActRow; E],
            out: [*mut f32; E],
            valid: usize,
        ) {
            let mut acc = [_mm256_setzero_ps(); E];
            for b in 0..nb {
                let $qs = tile.add(o.size * b);
                let $hb = $qs.add(o.a);
                prefetch_ahead($qs, o.size);
                let groups: [(__m256i, usize); 8] = $decode;
                let mut isum = [_mm256_setzero_si256(); E];
                for (w, off) in groups {
                    // Signed quants: |w| times the activations with w's sign.
                    let u = if $signed { _mm256_sign_epi8(w, w) } else { w };
                    for e in 0..E {
                        let mut y = bcast4(a[e].qs.add(32 * b + off));
                        if $signed {
                            y = _mm256_sign_epi8(y, w);
                        }
                        isum[e] = $dot(isum[e], u, y);
                    }
                }
                let m = if $m { Some(tile.add(o.size * b + o.b)) } else { None };
                q32_accumulate(&mut acc, &isum, &a, b, tile.add(o.size * b + o.$d), $shift, m);
            }
            store_tile(out, acc, valid);
        }
    };
}

/// Every kernel of the set, for target features `$features` (a string literal) and `$dot`, a
/// 256-bit `vpdpbusd` intrinsic those features enable. To be expanded inside a module.
macro_rules! vnni256_kernels {
    ($features:literal, $dot:ident) => {
        use std::arch::x86_64::*;

        use crate::quant::packed::ActRow;
        use crate::quant::x86::avx2_packed::{
            bcast4, load, nibble_groups, pairs_i8, pairs_u8, q32_accumulate, q4k_accumulate, q5_groups, q5k_fifth_bits,
            q6k_accumulate, q6k_offsets, q6k_quants, store_tile,
        };
        use crate::quant::x86::tile8;
        use crate::quant::x86::tiles::{drive, each_q6k_slice, prefetch_ahead, BlockLayout, IQ4NL_BIASED};
        use crate::quant::GgmlType;

        q32_micro!($features, $dot, micro_q4_0, d: a, shift: 3, signed: false, m: false, |qs, _hb| nibble_groups(qs));
        q32_micro!($features, $dot, micro_q4_1, d: a, shift: 0, signed: false, m: true, |qs, _hb| nibble_groups(qs));
        q32_micro!($features, $dot, micro_q8_0, d: a, shift: 0, signed: true, m: false, |qs, _hb| {
            std::array::from_fn(|g| (load(qs.add(32 * g)), 4 * g))
        });
        q32_micro!($features, $dot, micro_q5_0, d: b, shift: 4, signed: false, m: false, |qs, hb| q5_groups(qs, hb));
        q32_micro!($features, $dot, micro_iq4_nl, d: a, shift: 7, signed: false, m: false, |qs, _hb| {
            // ggml's grid plus 128 (unsigned for `vpdpbusd`, the 128 taken off exactly).
            let grid = _mm256_broadcastsi128_si256(_mm_loadu_si128(IQ4NL_BIASED.as_ptr().cast()));
            nibble_groups(qs).map(|(w, off)| (_mm256_shuffle_epi8(grid, w), off))
        });
        q32_micro!($features, $dot, micro_q5_1, d: c, shift: 0, signed: false, m: true, |qs, hb| q5_groups(qs, hb));

        /// Row `r`'s two sub-block scales of a `[row][2]` byte pair vector (`vpmovzx` / `vpmovsx`
        /// of 16 bytes) as i32 lanes: (first, second).
        #[inline(always)]
        unsafe fn scale_lanes(pairs: __m256i, signed: bool) -> (__m256i, __m256i) {
            if signed {
                (_mm256_srai_epi32(_mm256_slli_epi32(pairs, 16), 16), _mm256_srai_epi32(pairs, 16))
            } else {
                (_mm256_and_si256(pairs, _mm256_set1_epi32(0xFFFF)), _mm256_srli_epi32(pairs, 16))
            }
        }

        /// Q4_K: per sub-block an exact dot product times its 6-bit scale, summed in i32 as
        /// ggml does; the mins through the activation's 32-element sums.
        #[target_feature(enable = $features)]
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
        #[target_feature(enable = $features)]
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

        /// The Q4_K and (`Q5`) Q5_K micro-kernel.
        #[inline(always)]
        unsafe fn micro_q45_k<const E: usize, const Q5: bool>(
            tile: *const u8,
            nb: usize,
            o: &BlockLayout,
            a: [ActRow; E],
            out: [*mut f32; E],
            valid: usize,
        ) {
            let m4 = _mm256_set1_epi8(0x0F);
            let mut acc = [_mm256_setzero_ps(); E];
            for b in 0..nb {
                let qs = tile.add(o.size * b);
                prefetch_ahead(qs, o.size);
                let mut sumi = [_mm256_setzero_si256(); E];
                for g in 0..4 {
                    let (sc_lo, sc_hi) = scale_lanes(pairs_u8(qs.add(o.a + 16 * g)), false);
                    let mut il = [_mm256_setzero_si256(); E];
                    let mut ih = [_mm256_setzero_si256(); E];
                    for h in 0..8 {
                        let raw = load(qs.add(256 * g + 32 * h));
                        let mut lo = _mm256_and_si256(raw, m4);
                        let mut hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                        if Q5 {
                            (lo, hi) = q5k_fifth_bits(lo, hi, qs.add(32 * 32 + 32 * h), g);
                        }
                        for e in 0..E {
                            let q8 = a[e].qs.add(256 * b + 64 * g + 4 * h);
                            il[e] = $dot(il[e], lo, bcast4(q8));
                            ih[e] = $dot(ih[e], hi, bcast4(q8.add(32)));
                        }
                    }
                    for e in 0..E {
                        let s = _mm256_add_epi32(_mm256_mullo_epi32(il[e], sc_lo), _mm256_mullo_epi32(ih[e], sc_hi));
                        sumi[e] = _mm256_add_epi32(sumi[e], s);
                    }
                }
                q4k_accumulate(&mut acc, &sumi, qs, o, &a, b);
            }
            store_tile(out, acc, valid);
        }

        /// Q6_K: 6-bit quants rebuilt from the nibble and top-bit vectors, used unsigned; the
        /// -32 comes back exactly as 32 × Σ scale × (sum of 16 activation quants).
        #[target_feature(enable = $features)]
        unsafe fn micro_q6_k<const E: usize>(
            tile: *const u8,
            nb: usize,
            o: &BlockLayout,
            a: [ActRow; E],
            out: [*mut f32; E],
            valid: usize,
        ) {
            let mut acc = [_mm256_setzero_ps(); E];
            for b in 0..nb {
                let ql = tile.add(o.size * b);
                prefetch_ahead(ql, o.size);
                let mut sumi = q6k_offsets(ql, o, &a, b);
                each_q6k_slice!(q6k_slice::<E>(ql, o, &a, b, &mut sumi));
                q6k_accumulate(&mut acc, &sumi, ql.add(o.b), &a, b);
            }
            store_tile(out, acc, valid);
        }

        /// Adds the 32 elements `128H + 32K..` of every row of Q6_K block `b` (two sub-blocks
        /// of 16, each with its scale) to `sumi`.
        #[inline(always)]
        unsafe fn q6k_slice<const E: usize, const H: usize, const K: usize>(
            ql: *const u8,
            o: &BlockLayout,
            a: &[ActRow; E],
            b: usize,
            sumi: &mut [__m256i; E],
        ) {
            let qh = ql.add(32 * 32);
            let (sc0, sc1) = scale_lanes(pairs_i8(ql.add(o.a + 16 * (4 * H + K))), true);
            for (half, sc) in [(0, sc0), (1, sc1)] {
                // One 16-element sub-block: 4 vectors of 4 quants per row.
                let mut is = [_mm256_setzero_si256(); E];
                for l4 in 4 * half..4 * half + 4 {
                    let q = q6k_quants(ql, qh, H, K, l4);
                    for e in 0..E {
                        let y = bcast4(a[e].qs.add(256 * b + 128 * H + 32 * K + 4 * l4));
                        is[e] = $dot(is[e], q, y);
                    }
                }
                for e in 0..E {
                    sumi[e] = _mm256_add_epi32(sumi[e], _mm256_mullo_epi32(is[e], sc));
                }
            }
        }

        vnni256_kernels!(@entry $features;
            mat_mat_q4_0 => micro_q4_0, GgmlType::Q4_0;
            mat_mat_q4_1 => micro_q4_1, GgmlType::Q4_1;
            mat_mat_q5_0 => micro_q5_0, GgmlType::Q5_0;
            mat_mat_q5_1 => micro_q5_1, GgmlType::Q5_1;
            mat_mat_q8_0 => micro_q8_0, GgmlType::Q8_0;
            mat_mat_iq4_nl => micro_iq4_nl, GgmlType::IQ4_NL;
            mat_mat_q4_k => micro_q4_k, GgmlType::Q4_K;
            mat_mat_q5_k => micro_q5_k, GgmlType::Q5_K;
            mat_mat_q6_k => micro_q6_k, GgmlType::Q6_K;
        );
    };
    // Entry points (sizes checked by the caller, see the module documentation).
    (@entry $features:literal; $($name:ident => $micro:ident, $ty:expr;)*) => {$(
        #[target_feature(enable = $features)]
        pub unsafe fn $name(cols: usize, tiles: &[u8], n_rows: usize, act: &[u8], n_tok: usize, out: $crate::quant::packed::OutRows<'_>, stride: usize) {
            drive!(tile8, $micro, 4, [3 2 1], $ty, cols, tiles, n_rows, act, n_tok, out, stride)
        }
    )*};
}

/// AVX-VNNI (VEX-encoded `vpdpbusd`): Alder Lake-class CPUs without AVX-512.
pub mod vex {
    vnni256_kernels!("avx2,fma,f16c,avxvnni", _mm256_dpbusd_avx_epi32);
}

/// AVX-512 VNNI + VL (the same 256-bit `vpdpbusd`, EVEX-encoded): CPUs with AVX-512.
pub mod evex {
    vnni256_kernels!("avx2,fma,f16c,avx512vnni,avx512vl", _mm256_dpbusd_epi32);
}
