//! AVX-512 attention over a chunk of cached positions (see `AttnChunkFn`): keys and values
//! (f16, or int8 keys and fp8 values) converted in registers, every query head of the KV head
//! served by one read of each row, and a vectorised `exp` for the softmax.
//!
//! `unsafe` for `#[target_feature]` and raw loads; the caller (`dispatch`) has checked the
//! CPU, that every slot's key and value rows lie inside `keys` and `values` and that heads are
//! at most `MAX_HEAD_DIM` long.
//!

#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

use half::f16;

use super::avx2_attn::{prefetch_rows, Int8Rows, RowPointers};
use crate::quant::{KvHeadRows, KEY_GROUP};

/// How many rows ahead of the one in use key and value rows are requested (the AVX2 kernel's
/// [`PREFETCH_ROWS`](super::avx2_attn::PREFETCH_ROWS) is 16). On a Zen 5 EPYC, 2 threads,
/// `pass_cost` at depth 1450 alternated with 16: SmolLM2 one-token passes −3 to −7%, four
/// tokens −5%, nine unchanged; Qwen2.5 and Gemma 3 one token unchanged; 64 rows 6% slower
/// than 32 on SmolLM2's one token.
const PREFETCH_ROWS: usize = 32;

/// Query heads handled per pass (every model here has at most 7 per KV head).
const MAX_HEADS: usize = 8;

/// The longest head handled (the caller sends longer ones elsewhere), in elements and in
/// 16-element vectors.
pub(crate) const MAX_HEAD_DIM: usize = 256;
const MAX_HEAD_VECTORS: usize = MAX_HEAD_DIM / 16;

/// `e^x`, within 2 ulp, exactly 1 at 0; 0 below -87.3. Cephes' `expf`: `x = n ln 2 + r` with
/// `|r| <= ln 2 / 2`, a degree-7 polynomial for `e^r`, then `scalef` by `2^n`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(crate) unsafe fn exp_ps(x: __m512) -> __m512 {
    let x = _mm512_max_ps(x, _mm512_set1_ps(-87.336_55));
    let n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(std::f32::consts::LOG2_E)), _MM_FROUND_TO_NEAREST_INT);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693_359_4), x);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.121_944_4e-4), r);
    let mut p = _mm512_set1_ps(1.987_569_2e-4);
    for c in [1.398_2e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5] {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
    }
    let y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0));
    _mm512_scalef_ps(y, n)
}

/// 16 f16 at `p` (only the lanes of `m`) -> f32.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn load_f16(p: *const f16, m: __mmask16) -> __m512 {
    _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p.cast()))
}

/// `$call` with `const $NV` the head's count of 16-element vectors for the common head sizes
/// (whole vectors: constant loop bounds and no lane masks), else 0 (masked, counted at run time).
macro_rules! by_head_vectors {
    ($hd:expr, $NV:ident => $call:expr) => {
        match $hd {
            64 => {
                const $NV: usize = 4;
                $call
            }
            128 => {
                const $NV: usize = 8;
                $call
            }
            256 => {
                const $NV: usize = 16;
                $call
            }
            _ => {
                const $NV: usize = 0;
                $call
            }
        }
    };
}

/// The query heads in groups of at most `MAX_HEADS`, each group through the `chunk_f16` or
/// `chunk_int8` instance for its head count. With f16 keys and many heads (a batch's queries over
/// a shared chunk), every head's scores are first computed together by `scores_f16_by_rows`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub unsafe fn attn_chunk(
    q: &[f32],
    heads: usize,
    rows: KvHeadRows<'_>,
    slots: &[u32],
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
) {
    let hd = q.len() / heads;
    let n = slots.len();
    let (pointers, stride) = RowPointers::of(rows);
    let scored = match pointers {
        RowPointers::F16 { keys, .. } if by_rows_pays(heads, hd) => {
            by_head_vectors!(hd, NV => scores_f16_by_rows::<NV>(q, heads, keys, stride, slots, scale, scores));
            true
        }
        _ => false,
    };
    for h0 in (0..heads).step_by(MAX_HEADS) {
        let g = (heads - h0).min(MAX_HEADS);
        let (q, out) = (&q[h0 * hd..(h0 + g) * hd], &mut out[h0 * (hd + 2)..]);
        let scores = if scored { &mut scores[h0 * n..] } else { &mut *scores };
        let fetch_ahead = h0 == 0;
        match pointers {
            RowPointers::F16 { keys, values } => {
                by_head_count!(g, G => by_head_vectors!(hd, NV => chunk_f16::<G, NV>(q, hd, keys, values, stride, slots, scale, scores, out, fetch_ahead, scored)))
            }
            RowPointers::Int8Fp8 { rows, values } => {
                by_head_count!(g, G => by_head_vectors!(hd, NV => chunk_int8::<G, NV>(q, hd, rows, values, stride, slots, scale, scores, out, fetch_ahead, scored)))
            }
        }
    }
}

/// Whether scoring all heads at once over transposed key blocks beats the head groups' own
/// scoring: its transposes cost about 72 instructions per 16 elements of a 16-row block, the
/// groups' reductions 30 shuffles per head (and one key conversion per group of 8 heads).
fn by_rows_pays(heads: usize, hd: usize) -> bool {
    hd.is_multiple_of(16) && hd <= MAX_HEAD_DIM && heads > hd / 8
}

/// Scores of every head (`scores[h * n + j]`, scaled) over f16 key rows, 16 rows at a time: the
/// block's keys are transposed once (element `d` of its 16 rows in one vector), then each head's
/// dot products with the 16 rows are formed lane-wise, in the order [`sum16`] adds a row's
/// lanes in `chunk_f16`, so that the bits are the same. No shuffles per head.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn scores_f16_by_rows<const NV: usize>(
    q: &[f32],
    heads: usize,
    keys: *const f16,
    stride: usize,
    slots: &[u32],
    scale: f32,
    scores: &mut [f32],
) {
    let n = slots.len();
    let hd = q.len() / heads;
    let nv = if NV > 0 { NV } else { hd / 16 };
    let zero_row = [f16::ZERO; MAX_HEAD_DIM];
    let mut columns = [_mm512_setzero_ps(); MAX_HEAD_DIM];
    for j0 in (0..n).step_by(16) {
        let m = (n - j0).min(16);
        prefetch_rows(slots, j0 + PREFETCH_ROWS, 16, hd * 2, |slot| keys.add(slot * stride).cast());
        let rows: [*const f16; 16] =
            std::array::from_fn(|r| if r < m { keys.add(slots[j0 + r] as usize * stride) } else { zero_row.as_ptr() });
        for v in 0..nv {
            transpose_f16_block(&rows, 16 * v, &mut columns[16 * v..16 * v + 16]);
        }
        let sp = scores.as_mut_ptr().add(j0);
        let mut h = 0;
        while h < heads {
            let take = (heads - h).min(4);
            let q = q.as_ptr().add(h * hd);
            let out = sp.add(h * n);
            match take {
                4 => score_heads::<4>(q, hd, nv, &columns, scale, out, n, m),
                3 => score_heads::<3>(q, hd, nv, &columns, scale, out, n, m),
                2 => score_heads::<2>(q, hd, nv, &columns, scale, out, n, m),
                _ => score_heads::<1>(q, hd, nv, &columns, scale, out, n, m),
            }
            h += take;
        }
    }
}

/// `columns[e]` = element `d + e` of the 16 rows, as f32 (`e` < 16): the 16 x 16 block of f16
/// transposed in three rounds of interleaves within 128-bit lanes and one of lane moves.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn transpose_f16_block(rows: &[*const f16; 16], d: usize, columns: &mut [__m512]) {
    let load = |r: usize| _mm256_loadu_si256(rows[r].add(d).cast());
    // Rows i and i + 8: lanes 0-1 hold row i's 16 elements, lanes 2-3 row i + 8's.
    let z: [__m512i; 8] =
        std::array::from_fn(|i| _mm512_inserti64x4::<1>(_mm512_castsi256_si512(load(i)), load(i + 8)));
    // Per 128-bit lane, element k of rows 2p and 2p + 1 side by side (k < 4 in `lo`).
    let lo: [__m512i; 4] = std::array::from_fn(|p| _mm512_unpacklo_epi16(z[2 * p], z[2 * p + 1]));
    let hi: [__m512i; 4] = std::array::from_fn(|p| _mm512_unpackhi_epi16(z[2 * p], z[2 * p + 1]));
    // Elements 2c and 2c + 1 of four rows: rows 0-3 (`a`) and 4-7 (`b`) of each half.
    let pairs =
        |x: &[__m512i; 4], r: usize| [_mm512_unpacklo_epi32(x[r], x[r + 1]), _mm512_unpackhi_epi32(x[r], x[r + 1])];
    let (a, b) = ([pairs(&lo, 0), pairs(&hi, 0)], [pairs(&lo, 2), pairs(&hi, 2)]);
    for k in 0..8 {
        let (x, y) = (a[k / 4][(k / 2) % 2], b[k / 4][(k / 2) % 2]);
        // Lane 0: element k of rows 0-7, lane 1 element 8 + k, lanes 2-3 the same of rows 8-15.
        let c = if k % 2 == 0 { _mm512_unpacklo_epi64(x, y) } else { _mm512_unpackhi_epi64(x, y) };
        let c = _mm512_shuffle_i64x2::<0b11_01_10_00>(c, c);
        columns[k] = _mm512_cvtph_ps(_mm512_castsi512_si256(c));
        columns[k + 8] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64::<1>(c));
    }
}

/// Scaled scores of `H` heads (queries at `q`, `hd` apart) against the 16 rows in `columns`,
/// stored `n` apart from `out` (the first `m` rows). A row's products are summed as in
/// `chunk_f16`: lane `l` of its vector accumulates elements `l + 16v` in `v` order, then
/// [`sum16`]'s tree adds lanes `l` and `l + 8`, then `+ 4`, `+ 2` and `+ 1`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
unsafe fn score_heads<const H: usize>(
    q: *const f32,
    hd: usize,
    nv: usize,
    columns: &[__m512; MAX_HEAD_DIM],
    scale: f32,
    out: *mut f32,
    n: usize,
    m: usize,
) {
    let lane = |l: usize| -> [__m512; H] {
        let mut acc = [_mm512_setzero_ps(); H];
        for v in 0..nv {
            let k = columns[16 * v + l];
            for (h, a) in acc.iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(k, _mm512_set1_ps(*q.add(h * hd + 16 * v + l)), *a);
            }
        }
        acc
    };
    let add = |x: [__m512; H], y: [__m512; H]| -> [__m512; H] { std::array::from_fn(|h| _mm512_add_ps(x[h], y[h])) };
    let s1 = |l: usize| add(lane(l), lane(l + 8));
    let s2 = |l: usize| add(s1(l), s1(l + 4));
    let s3 = |l: usize| add(s2(l), s2(l + 2));
    let sums = add(s3(0), s3(1));
    for (h, s) in sums.iter().enumerate() {
        _mm512_mask_storeu_ps(out.add(h * n), tail_mask(m), _mm512_mul_ps(*s, _mm512_set1_ps(scale)));
    }
}

/// One chunk kernel per row format: `$key(rows, slot, v, offset, mask)` loads key elements
/// `16v..` as f32, `$value(row, mask)` 16 values, `$vscale(slot)` is a value row's factor,
/// `$krow(rows, offset)` where the key row at `offset` starts, of `$kelem` bytes per element (to
/// request it ahead). Up to [`MAX_HEADS`] heads: scores row by row (unless `scored`: they are
/// already in `scores`), softmax per head, values 32 dimensions at a time; with `fetch_ahead`
/// (the first group of heads: a later one, of more than 8 query heads per KV head, finds them
/// in cache), rows [`PREFETCH_ROWS`] ahead are requested.
macro_rules! chunk_kernel {
    ($name:ident, $K:ty, $V:ty, |$kr:ident, $slot:ident, $v:ident, $off:ident, $km:ident| $key:expr,
     |$vp:ident, $vm:ident| $value:expr, |$vs:ident| $vscale:expr, |$pkr:ident, $prow:ident| $krow:expr, $kelem:expr) => {
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name<const G: usize, const NV: usize>(
            q: &[f32],
            hd: usize,
            $kr: $K,
            vp: *const $V,
            stride: usize,
            slots: &[u32],
            scale: f32,
            scores: &mut [f32],
            out: &mut [f32],
            fetch_ahead: bool,
            scored: bool,
        ) {
            let n = slots.len();
            let nv = if NV > 0 { NV } else { hd.div_ceil(16) };
            let lanes = |v: usize| if NV > 0 { 0xFFFF } else { tail_mask(hd - 16 * v) };
            let (qp, sp, op) = (q.as_ptr(), scores.as_mut_ptr(), out.as_mut_ptr());

            // Scores, 16 rows at a time: each key row is converted once and its lane-wise
            // products with every head kept; each head's 16 vectors are then summed together
            // (one transposing reduction instead of 16 horizontal ones). Skipped when `scored`.
            // The queries, each head's vectors zero-padded to whole vectors (plain loads fold
            // into the multiply-adds).
            if !scored {
                let mut qv = [[_mm512_setzero_ps(); MAX_HEAD_VECTORS]; G];
                for (i, qh) in qv.iter_mut().enumerate() {
                    for (v, x) in qh.iter_mut().enumerate().take(nv) {
                        *x = _mm512_maskz_loadu_ps(lanes(v), qp.add(i * hd + 16 * v));
                    }
                }
                let mut part = [[_mm512_setzero_ps(); 16]; G];
                for j0 in (0..n).step_by(16) {
                    let m = (n - j0).min(16);
                    if m < 16 {
                        part.iter_mut().for_each(|p| p.iter_mut().for_each(|v| *v = _mm512_setzero_ps()));
                    }
                    if fetch_ahead {
                        prefetch_rows(slots, j0 + PREFETCH_ROWS, 16, hd * $kelem, |slot| {
                            let ($pkr, $prow) = ($kr, slot * stride);
                            $krow
                        });
                    }
                    for (jj, &$slot) in slots[j0..j0 + m].iter().enumerate() {
                        let mut acc = [_mm512_setzero_ps(); G];
                        for v in 0..nv {
                            let ($v, $off, $km) = (v, $slot as usize * stride + 16 * v, lanes(v));
                            let k = $key;
                            for (a, qh) in acc.iter_mut().zip(&qv) {
                                *a = _mm512_fmadd_ps(k, qh[v], *a);
                            }
                        }
                        for (p, a) in part.iter_mut().zip(&acc) {
                            p[TRANSPOSED[jj]] = *a;
                        }
                    }
                    for (i, p) in part.iter().enumerate() {
                        let sums = _mm512_mul_ps(sum16(p), _mm512_set1_ps(scale));
                        _mm512_mask_storeu_ps(sp.add(i * n + j0), tail_mask(m), sums);
                    }
                }
            }

            // Softmax numerators and their sums, four heads at a time.
            for i in (0..G).step_by(4) {
                let (s, o) = (sp.add(i * n), op.add(i * (hd + 2)));
                match G - i {
                    1 => softmax_heads::<1>(s, n, o, hd + 2),
                    2 => softmax_heads::<2>(s, n, o, hd + 2),
                    3 => softmax_heads::<3>(s, n, o, hd + 2),
                    _ => softmax_heads::<4>(s, n, o, hd + 2),
                }
            }

            // Weighted sums of value rows, 32 dimensions of every head at a time.
            for v0 in (0..nv).step_by(2) {
                let two = nv - v0 >= 2;
                let mut acc = [[_mm512_setzero_ps(); 2]; G];
                for (j, &slot) in slots.iter().enumerate() {
                    if fetch_ahead && v0 == 0 {
                        prefetch_rows(slots, j + PREFETCH_ROWS, 1, hd * std::mem::size_of::<$V>(), |slot| {
                            vp.add(slot * stride).cast()
                        });
                    }
                    let row = vp.add(slot as usize * stride + 16 * v0);
                    let $vs = slot as usize;
                    let vs: f32 = $vscale;
                    let x0 = {
                        let ($vp, $vm) = (row, lanes(v0));
                        $value
                    };
                    let x1 = if two {
                        let ($vp, $vm) = (row.add(16), lanes(v0 + 1));
                        $value
                    } else {
                        _mm512_setzero_ps()
                    };
                    for (i, a) in acc.iter_mut().enumerate() {
                        let p = _mm512_set1_ps(*sp.add(i * n + j) * vs);
                        a[0] = _mm512_fmadd_ps(p, x0, a[0]);
                        a[1] = _mm512_fmadd_ps(p, x1, a[1]);
                    }
                }
                for (i, a) in acc.iter().enumerate() {
                    let o = op.add(i * (hd + 2) + 2 + 16 * v0);
                    _mm512_mask_storeu_ps(o, lanes(v0), a[0]);
                    if two {
                        _mm512_mask_storeu_ps(o.add(16), lanes(v0 + 1), a[1]);
                    }
                }
            }
        }
    };
}

chunk_kernel!(
    chunk_f16,
    *const f16,
    f16,
    |keys, _slot, _v, off, m| load_f16(keys.add(off), m),
    |p, m| load_f16(p, m),
    |_slot| 1.0,
    |keys, row| keys.add(row).cast(),
    2
);

chunk_kernel!(
    chunk_int8,
    Int8Rows,
    u8,
    // Element 16v of the row lies in key group 16v / KEY_GROUP.
    |rows, slot, v, off, m| {
        let d = *rows.key_scales.add(slot as usize * rows.key_scale_stride + 16 * v / KEY_GROUP);
        let k = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, rows.keys.add(off))));
        _mm512_mul_ps(k, _mm512_set1_ps(d))
    },
    // e4m3 codes as f16 bits: sign to the top, exponent and mantissa up by 7 (`e4m3_f16_bits`).
    |p, m| {
        let b = _mm256_cvtepu8_epi16(_mm_maskz_loadu_epi8(m, p.cast()));
        let sign = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8);
        let rest = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7F)), 7);
        _mm512_cvtph_ps(_mm256_or_si256(sign, rest))
    },
    |slot| *rows.value_scales.add(slot * rows.value_scale_stride),
    |rows, row| rows.keys.add(row).cast(),
    1
);

/// Softmax numerators of `K` heads' `n` scores (`n` apart from `s`), in place and rounded to f16
/// as the reference rounds them (see `AttnChunkFn`), and each head's maximum and sum of them at
/// `out` and `out + 1` (`out_stride` apart). Every head gets the operations it would get alone,
/// in the same order; the heads only run side by side, so that their dependent maxima and
/// sums overlap instead of each head waiting on its own.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn softmax_heads<const K: usize>(s: *mut f32, n: usize, out: *mut f32, out_stride: usize) {
    let mut mx = [_mm512_set1_ps(f32::NEG_INFINITY); K];
    for j in (0..n).step_by(16) {
        let m = tail_mask(n - j);
        for (k, x) in mx.iter_mut().enumerate() {
            *x = _mm512_mask_max_ps(*x, m, *x, _mm512_maskz_loadu_ps(m, s.add(k * n + j)));
        }
    }
    let max: [__m512; K] = std::array::from_fn(|k| _mm512_set1_ps(_mm512_reduce_max_ps(mx[k])));
    let mut sum = [_mm512_setzero_ps(); K];
    for j in (0..n).step_by(16) {
        let m = tail_mask(n - j);
        for (k, sum) in sum.iter_mut().enumerate() {
            let e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s.add(k * n + j)), max[k]));
            let e = _mm512_cvtph_ps(_mm512_cvtps_ph(e, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            _mm512_mask_storeu_ps(s.add(k * n + j), m, e);
            *sum = _mm512_add_ps(*sum, _mm512_maskz_mov_ps(m, e));
        }
    }
    for k in 0..K {
        *out.add(k * out_stride) = _mm512_cvtss_f32(max[k]);
        *out.add(k * out_stride + 1) = _mm512_reduce_add_ps(sum[k]);
    }
}

/// Where [`sum16`] takes the vector whose sum it leaves in lane `j`.
const TRANSPOSED: [usize; 16] = {
    let mut t = [0; 16];
    let mut j = 0;
    while j < 16 {
        t[j] = 4 * (j % 4) + j / 4;
        j += 1;
    }
    t
};

/// Lane `j` of the result: the sum of the 16 lanes of `a[TRANSPOSED[j]]`. Four halving
/// steps, each adding two shuffles of a pair of vectors; each lane's sum depends only on its
/// own vector, in a fixed order.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn sum16(a: &[__m512; 16]) -> __m512 {
    // 128-bit quarters: (x0 + x2, x1 + x3, y0 + y2, y1 + y3).
    let b: [__m512; 8] = std::array::from_fn(|p| {
        let (x, y) = (a[2 * p], a[2 * p + 1]);
        _mm512_add_ps(_mm512_shuffle_f32x4::<0b01_00_01_00>(x, y), _mm512_shuffle_f32x4::<0b11_10_11_10>(x, y))
    });
    // Quarter k: the four partial sums of input 4p + k.
    let c: [__m512; 4] = std::array::from_fn(|p| {
        let (x, y) = (b[2 * p], b[2 * p + 1]);
        _mm512_add_ps(_mm512_shuffle_f32x4::<0b10_00_10_00>(x, y), _mm512_shuffle_f32x4::<0b11_01_11_01>(x, y))
    });
    // Within quarters: two partial sums each of inputs 8p + k and 8p + 4 + k.
    let d: [__m512; 2] = std::array::from_fn(|p| {
        let (x, y) = (c[2 * p], c[2 * p + 1]);
        _mm512_add_ps(_mm512_shuffle_ps::<0b01_00_01_00>(x, y), _mm512_shuffle_ps::<0b11_10_11_10>(x, y))
    });
    // Lane 4k + e: the sum of input k + 4e.
    _mm512_add_ps(_mm512_shuffle_ps::<0b10_00_10_00>(d[0], d[1]), _mm512_shuffle_ps::<0b11_01_11_01>(d[0], d[1]))
}

#[inline]
fn tail_mask(left: usize) -> __mmask16 {
    if left >= 16 {
        0xFFFF
    } else {
        ((1u32 << left) - 1) as __mmask16
    }
}
