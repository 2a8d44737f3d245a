//! AVX2 + FMA + F16C kernels on weights packed into 8-row tiles ([`super::tile8`]).
//!
//! One kernel per weight type serves decode and prefill: `mat_mat_*` runs tiles × tokens through
//! a micro-kernel generic over the token count `E` (4 at a time, Q5_0 and Q8_0 8, then the rest at
//! once).
//! Every instance performs, per (row, token) and block in order, the same operations: an exact
//! integer dot product, then `acc = fma(d_w * d_a, float(isum), acc)` (plus the format's offset
//! term), so a token's results are bit-identical whatever `E`, tile or thread it lands in.
//!
//! Without VNNI the integer dot product is `vpmaddubsw` (u8 × i8 pairs summed to i16, with
//! saturation) then `vpmaddwd` against ones or the row's scales. Activation quants lie in
//! [-127, 127], so one `vpmaddubsw` lane is at most 2 × 127 × the largest quant, and several
//! may be added in i16 before widening as long as the sum cannot pass 32767: 8 of them for
//! 4-bit quants (8 × 3810), 4 for 5-bit (4 × 7874), 2 for 6-bit (2 × 16002). Q8_0's signed
//! quants go through the sign trick (`|w|` times `a` with `w`'s sign): one lane at most
//! 2 × 128 × 127, widened at once.
//!
//! Every function is `unsafe` because of `#[target_feature]` (the caller has checked the CPU)
//! and because it reads through raw pointers whose extents the byte-level wrappers in
//! `dispatch` have checked: `tiles` holds `ceil(n_rows / 8)` tiles of `tile_bytes(ty, cols)`,
//! `act` `n_tok` rows of `PackedAct::row_bytes(cols)`, `out` reaches
//! `(n_tok - 1) * stride + n_rows` with `stride >= n_rows` when `n_tok > 1`.

#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

use super::tile8::{self, ROWS};
use super::tiles::{drive, each_q6k_slice, prefetch_ahead, BlockLayout};
use crate::quant::blocks::KVALUES_IQ4NL;
use crate::quant::packed::ActRow;
use crate::quant::GgmlType;

/// Four bytes at `p` broadcast to every lane (a `vpbroadcastd` from memory).
#[inline(always)]
pub(super) unsafe fn bcast4(p: *const u8) -> __m256i {
    _mm256_set1_epi32(p.cast::<i32>().read_unaligned())
}

#[inline(always)]
pub(super) unsafe fn load(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p.cast())
}

/// 8 f16 scales at `p` -> f32.
#[inline(always)]
unsafe fn scales8(p: *const u8) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
}

/// 16 bytes at `p` ([row][2] pairs), widened to i16: lane `r` = row `r`'s pair, sign-extended
/// or not.
#[inline(always)]
pub(super) unsafe fn pairs_u8(p: *const u8) -> __m256i {
    _mm256_cvtepu8_epi16(_mm_loadu_si128(p.cast()))
}

#[inline(always)]
pub(super) unsafe fn pairs_i8(p: *const u8) -> __m256i {
    _mm256_cvtepi8_epi16(_mm_loadu_si128(p.cast()))
}

/// From i16 pairs (lane r = `(x, y)`), the lanes `(x, x)` and `(y, y)`: the per-row multipliers
/// of one `vpmaddwd` each.
#[inline(always)]
unsafe fn split_pairs(v: __m256i) -> (__m256i, __m256i) {
    let first = _mm256_set_epi8(
        13, 12, 13, 12, 9, 8, 9, 8, 5, 4, 5, 4, 1, 0, 1, 0, 13, 12, 13, 12, 9, 8, 9, 8, 5, 4, 5, 4, 1, 0, 1, 0,
    );
    let second = _mm256_set_epi8(
        15, 14, 15, 14, 11, 10, 11, 10, 7, 6, 7, 6, 3, 2, 3, 2, 15, 14, 15, 14, 11, 10, 11, 10, 7, 6, 7, 6, 3, 2, 3, 2,
    );
    (_mm256_shuffle_epi8(v, first), _mm256_shuffle_epi8(v, second))
}

/// Writes the first `valid` lanes of `v` (a tile's rows) to `out`.
#[inline(always)]
unsafe fn store_rows(out: *mut f32, v: __m256, valid: usize) {
    if valid >= ROWS {
        _mm256_storeu_ps(out, v);
    } else {
        let mut tmp = [0f32; ROWS];
        _mm256_storeu_ps(tmp.as_mut_ptr(), v);
        std::ptr::copy_nonoverlapping(tmp.as_ptr(), out, valid);
    }
}

/// Writes each token's sums `acc` (the first `valid` lanes) to its output row.
#[inline(always)]
pub(super) unsafe fn store_tile<const E: usize>(out: [*mut f32; E], acc: [__m256; E], valid: usize) {
    for e in 0..E {
        store_rows(out[e], acc[e], valid);
    }
}

/// Adds block `b` of a 32-element format to the sums `acc`: `d_w × d_a × (isum - 2^shift × Σ a)`
/// with the block's f16 scales at `d`, then `m × s` where the format has `m` (f16 at `m`).
#[inline(always)]
pub(super) unsafe fn q32_accumulate<const E: usize>(
    acc: &mut [__m256; E],
    isum: &[__m256i; E],
    a: &[ActRow; E],
    b: usize,
    d: *const u8,
    shift: u32,
    m: Option<*const u8>,
) {
    let dw = scales8(d);
    for e in 0..E {
        let mut i = isum[e];
        if shift > 0 {
            i = _mm256_sub_epi32(i, _mm256_set1_epi32(a[e].sum(b) << shift));
        }
        let d = _mm256_mul_ps(dw, _mm256_set1_ps(a[e].d(b)));
        acc[e] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(i), acc[e]);
        if let Some(m) = m {
            acc[e] = _mm256_fmadd_ps(scales8(m), _mm256_set1_ps(a[e].s(b)), acc[e]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 32-element formats

/// Micro-kernel of a 32-element format: `$decode` yields the weight vectors of chunk `$c` of a
/// block (`$chunk` of its 8, with the activation offset each one multiplies), so that only one
/// chunk's vectors are live at a time and nothing spills; `$d` names the scale array; `$shift`
/// is log2 of the format's quant offset (q - 2^shift), taken off exactly through the activation
/// block sums; `$signed` whether the quants are signed (the sign trick); `$m` whether the
/// format adds `m * s` (Q4_1); `$chunk` how many products may be summed in i16 (see the module
/// documentation).
macro_rules! q32_micro {
    ($name:ident, d: $d:ident, shift: $shift:expr, signed: $signed:expr, m: $m:expr, chunk: $chunk:literal,
     |$qs:ident, $hb:ident, $c:ident| $decode:expr) => {
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn $name<const E: usize>(
            tile: *const u8,
            nb: usize,
            o: &BlockLayout,
            a: [ActRow; E],
            out: [*mut f32; E],
            valid: usize,
        ) {
            let ones = _mm256_set1_epi16(1);
            let mut acc = [_mm256_setzero_ps(); E];
            for b in 0..nb {
                let $qs = tile.add(o.size * b);
                let $hb = $qs.add(o.a);
                prefetch_ahead($qs, o.size);
                let mut isum = [_mm256_setzero_si256(); E];
                for $c in 0..8 / $chunk {
                    let chunk: [(__m256i, usize); $chunk] = $decode;
                    // Signed quants: |w| times the activations with w's sign.
                    let u: [__m256i; $chunk] = std::array::from_fn(|i| {
                        if $signed {
                            _mm256_sign_epi8(chunk[i].0, chunk[i].0)
                        } else {
                            chunk[i].0
                        }
                    });
                    for e in 0..E {
                        let mut i16s = _mm256_setzero_si256();
                        for (&(w, off), &u) in chunk.iter().zip(&u) {
                            let mut y = bcast4(a[e].qs.add(32 * b + off));
                            if $signed {
                                y = _mm256_sign_epi8(y, w);
                            }
                            i16s = _mm256_add_epi16(i16s, _mm256_maddubs_epi16(u, y));
                        }
                        isum[e] = _mm256_add_epi32(isum[e], _mm256_madd_epi16(i16s, ones));
                    }
                }
                let m = if $m { Some(tile.add(o.size * b + o.b)) } else { None };
                q32_accumulate(&mut acc, &isum, &a, b, tile.add(o.size * b + o.$d), $shift, m);
            }
            store_tile(out, acc, valid);
        }
    };
}

/// The 4 nibble vectors of a block: low nibbles multiply activations `4v..`, high ones `16 + 4v..`.
#[inline(always)]
pub(super) unsafe fn nibble_groups(qs: *const u8) -> [(__m256i, usize); 8] {
    let m4 = _mm256_set1_epi8(0x0F);
    let v: [__m256i; 4] = std::array::from_fn(|i| load(qs.add(32 * i)));
    let lo = |i: usize| _mm256_and_si256(v[i], m4);
    let hi = |i: usize| _mm256_and_si256(_mm256_srli_epi16(v[i], 4), m4);
    [(lo(0), 0), (hi(0), 16), (lo(1), 4), (hi(1), 20), (lo(2), 8), (hi(2), 24), (lo(3), 12), (hi(3), 28)]
}

q32_micro!(micro_q4_0, d: a, shift: 3, signed: false, m: false, chunk: 8, |qs, _hb, _c| nibble_groups(qs));
q32_micro!(micro_q4_1, d: a, shift: 0, signed: false, m: true, chunk: 8, |qs, _hb, _c| nibble_groups(qs));
q32_micro!(micro_q8_0, d: a, shift: 0, signed: true, m: false, chunk: 1, |qs, _hb, c| [(load(qs.add(32 * c)), 4 * c)]);
// IQ4_NL: the nibbles looked up in ggml's grid (signed, up to 127 in size: the sign trick, one
// vector per widening as Q8_0).
q32_micro!(micro_iq4_nl, d: a, shift: 0, signed: true, m: false, chunk: 1, |qs, _hb, c| {
    let grid = _mm256_broadcastsi128_si256(_mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()));
    let (w, off) = nibble_groups(qs)[c];
    [(_mm256_shuffle_epi8(grid, w), off)]
});
q32_micro!(micro_q5_0, d: b, shift: 4, signed: false, m: false, chunk: 4, |qs, hb, c| if c == 0 {
    q5_half::<0>(qs, hb)
} else {
    q5_half::<1>(qs, hb)
});
q32_micro!(micro_q5_1, d: c, shift: 0, signed: false, m: true, chunk: 4, |qs, hb, c| if c == 0 {
    q5_half::<0>(qs, hb)
} else {
    q5_half::<1>(qs, hb)
});

/// Q5_0's 8 weight vectors as [`nibble_groups`] gives them, each quant's fifth bit added from
/// the high-bit vector at `hb`: bit v (low nibbles of vector v) or 4 + v (high nibbles), moved
/// to bit 4 (the two halves of [`q5_half`]).
#[inline(always)]
pub(super) unsafe fn q5_groups(qs: *const u8, hb: *const u8) -> [(__m256i, usize); 8] {
    let ([g0, g1, g2, g3], [g4, g5, g6, g7]) = (q5_half::<0>(qs, hb), q5_half::<1>(qs, hb));
    [g0, g1, g2, g3, g4, g5, g6, g7]
}

/// Half `H` of a Q5_0 block: the 4 weight vectors made from nibble vectors `2H` and `2H + 1`
/// (low nibbles multiply activations `8H..`, high ones `16 + 8H..`), fifth bits added.
#[inline(always)]
unsafe fn q5_half<const H: usize>(qs: *const u8, hb: *const u8) -> [(__m256i, usize); 4] {
    let (m4, b4) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x10));
    let bits = load(hb);
    let (v0, v1) = (load(qs.add(64 * H)), load(qs.add(64 * H + 32)));
    let lo = |v: __m256i| _mm256_and_si256(v, m4);
    let hi = |v: __m256i| _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    let with = |w: __m256i, h: __m256i| _mm256_or_si256(w, _mm256_and_si256(h, b4));
    // Bit 2H (low nibbles of v0), 4 + 2H (its high nibbles), 2H + 1 and 5 + 2H, moved to bit 4.
    if H == 0 {
        [
            (with(lo(v0), _mm256_slli_epi16(bits, 4)), 0),
            (with(hi(v0), bits), 16),
            (with(lo(v1), _mm256_slli_epi16(bits, 3)), 4),
            (with(hi(v1), _mm256_srli_epi16(bits, 1)), 20),
        ]
    } else {
        [
            (with(lo(v0), _mm256_slli_epi16(bits, 2)), 8),
            (with(hi(v0), _mm256_srli_epi16(bits, 2)), 24),
            (with(lo(v1), _mm256_slli_epi16(bits, 1)), 12),
            (with(hi(v1), _mm256_srli_epi16(bits, 3)), 28),
        ]
    }
}

// ---------------------------------------------------------------------------------------------
// k-quants

/// Q4_K: per sub-block an exact dot product times its 6-bit scale (`vpmaddwd` against the
/// scale), summed in i32 as ggml does; the mins through the activation's 32-element sums.
#[target_feature(enable = "avx2,fma,f16c")]
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
#[target_feature(enable = "avx2,fma,f16c")]
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

/// The Q4_K and (`Q5`) Q5_K micro-kernel. `vpmaddubsw` sums of 8 vectors of 4-bit quants fit in
/// i16, of 5-bit ones only 4 (see the module documentation), so Q5_K widens twice per sub-block.
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
    let per_i16 = if Q5 { 4 } else { 8 };
    let mut acc = [_mm256_setzero_ps(); E];
    for b in 0..nb {
        let qs = tile.add(o.size * b);
        prefetch_ahead(qs, o.size);
        let mut sumi = [_mm256_setzero_si256(); E];
        for g in 0..4 {
            let (sc_lo, sc_hi) = split_pairs(pairs_u8(qs.add(o.a + 16 * g)));
            for h0 in (0..8).step_by(per_i16) {
                let mut il = [_mm256_setzero_si256(); E];
                let mut ih = [_mm256_setzero_si256(); E];
                for h in h0..h0 + per_i16 {
                    let raw = load(qs.add(256 * g + 32 * h));
                    let mut lo = _mm256_and_si256(raw, m4);
                    let mut hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                    if Q5 {
                        (lo, hi) = q5k_fifth_bits(lo, hi, qs.add(32 * 32 + 32 * h), g);
                    }
                    for e in 0..E {
                        let q8 = a[e].qs.add(256 * b + 64 * g + 4 * h);
                        il[e] = _mm256_add_epi16(il[e], _mm256_maddubs_epi16(lo, bcast4(q8)));
                        ih[e] = _mm256_add_epi16(ih[e], _mm256_maddubs_epi16(hi, bcast4(q8.add(32))));
                    }
                }
                for e in 0..E {
                    let s = _mm256_add_epi32(_mm256_madd_epi16(il[e], sc_lo), _mm256_madd_epi16(ih[e], sc_hi));
                    sumi[e] = _mm256_add_epi32(sumi[e], s);
                }
            }
        }
        q4k_accumulate(&mut acc, &sumi, qs, o, &a, b);
    }
    store_tile(out, acc, valid);
}

/// Q5_K: the low and high nibbles of qs vector `8g + h` with their fifth bits, bits `2g` and
/// `2g + 1` of the qh vector at `qh` (vector `h`), moved to bit 4. A 16-bit shift right by at
/// most 6, then 4 or 3 left, masked to bit 4: no bit crosses into another byte.
#[inline(always)]
pub(super) unsafe fn q5k_fifth_bits(lo: __m256i, hi: __m256i, qh: *const u8, g: usize) -> (__m256i, __m256i) {
    let b4 = _mm256_set1_epi8(0x10);
    let bits = _mm256_srl_epi16(load(qh), _mm_cvtsi32_si128(2 * g as i32));
    let with = |w: __m256i, h: __m256i| _mm256_or_si256(w, _mm256_and_si256(h, b4));
    (with(lo, _mm256_slli_epi16(bits, 4)), with(hi, _mm256_slli_epi16(bits, 3)))
}

/// Adds Q4_K block `b` (at `blk`) to the sums `acc`: `d_w × d_a × sumi` (`sumi`: Σ scale × sub-block
/// dot product), minus `dmin_w × d_a × Σ min × (sum of the sub-block's 32 activation quants)`.
#[inline(always)]
pub(super) unsafe fn q4k_accumulate<const E: usize>(
    acc: &mut [__m256; E],
    sumi: &[__m256i; E],
    blk: *const u8,
    o: &BlockLayout,
    a: &[ActRow; E],
    b: usize,
) {
    let mut summ = [_mm256_setzero_si256(); E];
    for p in 0..4 {
        let mins = pairs_u8(blk.add(o.b + 16 * p));
        for e in 0..E {
            summ[e] = _mm256_add_epi32(summ[e], _mm256_madd_epi16(mins, bcast4(a[e].extra.add(16 * b + 4 * p))));
        }
    }
    let dw = scales8(blk.add(o.c));
    let dminw = scales8(blk.add(o.d));
    for e in 0..E {
        let da = _mm256_set1_ps(a[e].d(b));
        acc[e] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(sumi[e]), acc[e]);
        acc[e] = _mm256_fnmadd_ps(_mm256_mul_ps(dminw, da), _mm256_cvtepi32_ps(summ[e]), acc[e]);
    }
}

/// Q6_K block `b` at `ql`: per row and token, -32 × Σ scale × (sum of the sub-block's 16
/// activation quants), the quants' offset taken off exactly (the kernels use them unsigned).
#[inline(always)]
pub(super) unsafe fn q6k_offsets<const E: usize>(
    ql: *const u8,
    o: &BlockLayout,
    a: &[ActRow; E],
    b: usize,
) -> [__m256i; E] {
    let mut corr = [_mm256_setzero_si256(); E];
    for p in 0..8 {
        let sp = pairs_i8(ql.add(o.a + 16 * p));
        for e in 0..E {
            corr[e] = _mm256_add_epi32(corr[e], _mm256_madd_epi16(sp, bcast4(a[e].sum.add(32 * b + 4 * p))));
        }
    }
    std::array::from_fn(|e| _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr[e], 5)))
}

/// Adds Q6_K block `b` to the sums `acc`: `d_w × d_a × sumi`, with the block's f16 scales at `d`.
#[inline(always)]
pub(super) unsafe fn q6k_accumulate<const E: usize>(
    acc: &mut [__m256; E],
    sumi: &[__m256i; E],
    d: *const u8,
    a: &[ActRow; E],
    b: usize,
) {
    let dw = scales8(d);
    for e in 0..E {
        let da = _mm256_set1_ps(a[e].d(b));
        acc[e] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(sumi[e]), acc[e]);
    }
}

/// Q6_K's unsigned 6-bit quants of elements `128h + 32k + 4l4..` (4 per row), rebuilt from ql
/// vector `16h + 8(k & 1) + l4` (low or high nibbles) and qh vector `8h + l4` (bit pair `2k`).
#[inline(always)]
pub(super) unsafe fn q6k_quants(ql: *const u8, qh: *const u8, h: usize, k: usize, l4: usize) -> __m256i {
    let m4 = _mm256_set1_epi8(0x0F);
    let low = load(ql.add(32 * (16 * h + 8 * (k & 1) + l4)));
    let nib = if k < 2 { _mm256_and_si256(low, m4) } else { _mm256_and_si256(_mm256_srli_epi16(low, 4), m4) };
    let top = load(qh.add(32 * (8 * h + l4)));
    let top = match k {
        0 => _mm256_slli_epi16(top, 4),
        1 => _mm256_slli_epi16(top, 2),
        2 => top,
        _ => _mm256_srli_epi16(top, 2),
    };
    _mm256_or_si256(nib, _mm256_and_si256(top, _mm256_set1_epi8(0x30)))
}

/// Q6_K: 6-bit quants rebuilt from the nibble and top-bit vectors, used unsigned; the -32
/// comes back exactly as 32 × Σ scale × (sum of 16 activation quants).
#[target_feature(enable = "avx2,fma,f16c")]
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

/// Adds the 32 elements `128H + 32K..` of every row of Q6_K block `b` (two sub-blocks of 16,
/// each with its scale) to `sumi`.
#[inline(always)]
unsafe fn q6k_slice<const E: usize, const H: usize, const K: usize>(
    ql: *const u8,
    o: &BlockLayout,
    a: &[ActRow; E],
    b: usize,
    sumi: &mut [__m256i; E],
) {
    let qh = ql.add(32 * 32);
    let (sc0, sc1) = split_pairs(pairs_i8(ql.add(o.a + 16 * (4 * H + K))));
    for (half, sc) in [(0, sc0), (1, sc1)] {
        // Two 16-element pairs of vectors, each summed in i16 (2 × 63 × 127 × 2 fits).
        for pair in 0..2 {
            let mut is = [_mm256_setzero_si256(); E];
            for l4 in 4 * half + 2 * pair..4 * half + 2 * pair + 2 {
                let q = q6k_quants(ql, qh, H, K, l4);
                for e in 0..E {
                    let y = bcast4(a[e].qs.add(256 * b + 128 * H + 32 * K + 4 * l4));
                    is[e] = _mm256_add_epi16(is[e], _mm256_maddubs_epi16(q, y));
                }
            }
            for e in 0..E {
                sumi[e] = _mm256_add_epi32(sumi[e], _mm256_madd_epi16(is[e], sc));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points (sizes checked by the caller, see the module documentation)

macro_rules! entry {
    ($($name:ident => $micro:ident, $ty:expr, $emax:literal, [$($tail:literal)*];)*) => {$(
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $name(cols: usize, tiles: &[u8], n_rows: usize, act: &[u8], n_tok: usize, out: $crate::quant::packed::OutRows<'_>, stride: usize) {
            drive!(tile8, $micro, $emax, [$($tail)*], $ty, cols, tiles, n_rows, act, n_tok, out, stride)
        }
    )*};
}

// Tokens per micro-kernel call: 4, or 8 where a block's decoding is costly next to its products
// (Q5_0's fifth bits, Q8_0's signs): a 32-element micro-kernel keeps one chunk of weight vectors
// and one i32 sum per token in registers, so 8 tokens fit the 16 registers and the decoding is
// shared by twice as many. On Zen 3, 8 tokens through Qwen2.5's Q5_0 `token_embd` (best of 30
// calls): 56 -> 70 GMAC/s, Q8_0 `output` 55 -> 61; Q4_1, Q4_K and Q6_K ran no faster (Q4_1
// slower) 8 at a time.
entry! {
    mat_mat_q4_0 => micro_q4_0, GgmlType::Q4_0, 4, [3 2 1];
    mat_mat_q4_1 => micro_q4_1, GgmlType::Q4_1, 4, [3 2 1];
    mat_mat_q5_0 => micro_q5_0, GgmlType::Q5_0, 8, [7 6 5 4 3 2 1];
    mat_mat_q5_1 => micro_q5_1, GgmlType::Q5_1, 8, [7 6 5 4 3 2 1];
    mat_mat_q8_0 => micro_q8_0, GgmlType::Q8_0, 8, [7 6 5 4 3 2 1];
    mat_mat_iq4_nl => micro_iq4_nl, GgmlType::IQ4_NL, 8, [7 6 5 4 3 2 1];
    mat_mat_q4_k => micro_q4_k, GgmlType::Q4_K, 4, [3 2 1];
    mat_mat_q5_k => micro_q5_k, GgmlType::Q5_K, 4, [3 2 1];
    mat_mat_q6_k => micro_q6_k, GgmlType::Q6_K, 4, [3 2 1];
}
