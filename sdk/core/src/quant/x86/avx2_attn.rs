//! AVX2 attention over a chunk of cached positions (see `AttnChunkFn`). Keys and values (f16,
//! or int8 keys and fp8 values) are converted in registers, eight rows' dot products are summed
//! by one transposing reduction, and `exp` is vectorised. The query heads of the call (those of
//! one KV head, for one or several queries) are taken in blocks sized so that the accumulators
//! stay in the 16 registers; a block computes its scores, softmax and weighted value sums in
//! turn, each key and value vector loaded once for all of its heads. Each head's arithmetic
//! (and so its bits) is the same whatever its block.
//!
//! `unsafe` for `#[target_feature]` and raw loads; the caller (`dispatch`) has checked the
//! CPU, that every slot's key and value rows lie inside `keys` and `values`, and that heads are
//! at most `MAX_HEAD_DIM` long and a multiple of 8.
//!

#![allow(clippy::missing_safety_doc)]

use std::arch::x86_64::*;

use half::f16;

use super::tiles::prefetch;
use crate::quant::{KvHeadRows, KEY_GROUP};

/// Query heads computed together: a block's accumulators stay in the 16 registers. The
/// weighted value sums take 6 heads × 16 dimensions (12 accumulators), the scores 6 heads × 2
/// rows (4 rows for 1 or 2 heads, so that enough multiply-add chains are in flight). Fewer,
/// larger blocks load each key and value vector fewer times per multiply-add. A call of 7 or
/// 8 heads is one block: its scores take 1 row at a time, its value sums two sub-blocks.
const HEAD_BLOCK: usize = 6;

/// The most heads in one block (a call of 7 or 8 heads).
const LARGEST_BLOCK: usize = 8;

/// How many rows ahead of the one in use key and value rows are requested. A pass of one or two
/// tokens reads the cached rows from memory once, with little arithmetic per row (SmolLM2 at
/// depth 1400 reads 32 MB of them per pass); only the first block of heads requests them, the
/// later blocks find them in cache. On Zen 3, 2 threads, SmolLM2 at depth 1400: one- and
/// two-token passes -5%, eight tokens unchanged. The AVX-512 kernel requests further ahead.
pub(super) const PREFETCH_ROWS: usize = 16;

/// `$call` with the const `$H` = `$h`, a head count in `1..=LARGEST_BLOCK`; evaluates to its value.
macro_rules! by_block_heads {
    ($h:expr, $H:ident => $call:expr) => {
        by_block_heads!(@arms $h, $H, $call, 1 2 3 4 5 6 7)
    };
    (@arms $h:expr, $H:ident, $call:expr, $($n:literal)*) => {
        match $h {
            $($n => { const $H: usize = $n; $call })*
            _ => { const $H: usize = LARGEST_BLOCK; $call }
        }
    };
}

/// `$body` for each block of the heads `0..$g`, with `$h0` its first head and the const `$H`
/// its head count: up to `LARGEST_BLOCK` heads as one block, more as few blocks as `HEAD_BLOCK`
/// allows, of sizes as even as possible (9 heads as 5 and 4, not 6 and 3).
macro_rules! for_head_blocks {
    ($g:expr, $h0:ident, $H:ident => $body:expr) => {{
        let mut $h0 = 0;
        let mut blocks = if $g <= LARGEST_BLOCK { 1 } else { $g.div_ceil(HEAD_BLOCK) };
        while $h0 < $g {
            $h0 += by_block_heads!(($g - $h0).div_ceil(blocks), $H => {
                $body;
                $H
            });
            blocks -= 1;
        }
    }};
}

/// The longest head handled (the caller sends longer ones elsewhere).
pub(crate) const MAX_HEAD_DIM: usize = 256;

/// Whether this kernel handles heads of `hd` elements.
pub(crate) fn handles_head_dim(hd: usize) -> bool {
    hd <= MAX_HEAD_DIM && hd % 8 == 0
}

/// `e^x`, within 2 ulp, exactly 1 at 0; 0 below -87.3. Cephes' `expf`: `x = n ln 2 + r` with
/// `|r| <= ln 2 / 2`, a degree-7 polynomial for `e^r`, then times `2^n` built in the exponent
/// field (`n` lies in -126..=127 after the clamp, so `2^n` is a normal number).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn exp_ps(x: __m256) -> __m256 {
    let x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.336_55)), _mm256_set1_ps(88.0));
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
        x,
        _mm256_set1_ps(std::f32::consts::LOG2_E),
    ));
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
    let mut p = _mm256_set1_ps(1.987_569_2e-4);
    for c in [1.398_2e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    }
    let y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0));
    let pow2 = _mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)));
    _mm256_mul_ps(y, _mm256_castsi256_ps(pow2))
}

/// Attention of `heads` query heads over a chunk (see `AttnChunkFn`): all heads in one call
/// of the row format's kernel, which takes them in register-sized blocks.
#[target_feature(enable = "avx2,fma,f16c")]
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
    match RowPointers::of(rows) {
        (RowPointers::F16 { keys, values }, stride) => {
            chunk_f16(q, heads, hd, keys, values, stride, slots, scale, scores, out)
        }
        (RowPointers::Int8Fp8 { rows, values }, stride) => {
            chunk_int8(q, heads, hd, rows, values, stride, slots, scale, scores, out)
        }
    }
}

/// A chunk's key and value rows as the x86 chunk kernels read them (the AVX-512 kernel's too).
#[derive(Clone, Copy)]
pub(super) enum RowPointers {
    F16 { keys: *const f16, values: *const f16 },
    Int8Fp8 { rows: Int8Rows, values: *const u8 },
}

impl RowPointers {
    /// The pointers of `rows`, and their row stride.
    pub(super) fn of(rows: KvHeadRows<'_>) -> (RowPointers, usize) {
        match rows {
            KvHeadRows::F16 { keys, values, stride } => {
                (RowPointers::F16 { keys: keys.as_ptr(), values: values.as_ptr() }, stride)
            }
            KvHeadRows::Int8Fp8 {
                keys,
                key_scales,
                values,
                value_scales,
                stride,
                key_scale_stride,
                value_scale_stride,
            } => {
                let rows = Int8Rows {
                    keys: keys.as_ptr(),
                    key_scales: key_scales.as_ptr(),
                    value_scales: value_scales.as_ptr(),
                    key_scale_stride,
                    value_scale_stride,
                };
                (RowPointers::Int8Fp8 { rows, values: values.as_ptr() }, stride)
            }
        }
    }
}

/// Requests `bytes` bytes of the rows of `slots[from..from + count]` (those that exist), row
/// `slot` starting at `row(slot)` (the AVX-512 kernel's too).
#[inline(always)]
pub(super) unsafe fn prefetch_rows(
    slots: &[u32],
    from: usize,
    count: usize,
    bytes: usize,
    row: impl Fn(usize) -> *const u8,
) {
    for &slot in slots.get(from..(from + count).min(slots.len())).unwrap_or(&[]) {
        prefetch(row(slot as usize), bytes);
    }
}

/// Where int8 key rows and the key and value scales are (the AVX-512 kernel's too).
#[derive(Clone, Copy)]
pub(super) struct Int8Rows {
    pub(super) keys: *const i8,
    pub(super) key_scales: *const f32,
    pub(super) value_scales: *const f32,
    pub(super) key_scale_stride: usize,
    pub(super) value_scale_stride: usize,
}

/// One chunk kernel per row format: `$key(rows, slot, v, offset)` loads key elements `8v..` as
/// f32, `$value(row)` 8 values, `$vscale(slot)` is a value row's factor, `$krow(rows, offset)`
/// where the key row at `offset` starts, of `$kelem` bytes per element (to request it ahead).
/// Scores eight rows at a time, softmax per head, values 16 dimensions at a time; heads in blocks
/// (see `for_head_blocks`).
macro_rules! chunk_kernel {
    ($name:ident, $K:ty, $V:ty, |$kr:ident, $slot:ident, $v:ident, $off:ident| $key:expr,
     |$vp:ident| $value:expr, |$vs:ident| $vscale:expr, |$pkr:ident, $prow:ident| $krow:expr, $kelem:expr) => {
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name(
            q: &[f32],
            heads: usize,
            hd: usize,
            $kr: $K,
            vp: *const $V,
            stride: usize,
            slots: &[u32],
            scale: f32,
            scores: &mut [f32],
            out: &mut [f32],
        ) {
            let n = slots.len();
            let nv = hd / 8;
            let (qp, sp, op) = (q.as_ptr(), scores.as_mut_ptr(), out.as_mut_ptr());

            // Per block of heads: scores, softmax numerators, weighted sums of value rows
            // (the block's scores stay in L1). The block's queries are first copied to aligned
            // vectors: the scores load each of them once per row or two, and a load that
            // crosses a cache line costs twice.
            let mut aligned_q = [std::mem::MaybeUninit::<__m256>::uninit(); LARGEST_BLOCK * MAX_HEAD_DIM / 8];
            for_head_blocks!(heads, h0, H => {
                let sp = sp.add(h0 * n);
                for (i, a) in aligned_q[..H * nv].iter_mut().enumerate() {
                    a.write(_mm256_loadu_ps(qp.add(h0 * hd + 8 * i)));
                }
                let qa = aligned_q.as_ptr().cast::<f32>();
                block_scores::<H, { if H >= 7 { 1 } else if H >= 3 { 2 } else { 4 } }>($kr, qa, nv, stride, slots, scale, sp, h0 == 0);
                for i in 0..H {
                    let (max, sum) = numerators(sp.add(i * n), n);
                    *op.add((h0 + i) * (hd + 2)) = max;
                    *op.add((h0 + i) * (hd + 2) + 1) = sum;
                }
                let op = op.add(h0 * (hd + 2));
                if H > HEAD_BLOCK {
                    values::<4>($kr, vp, stride, slots, nv, sp, op, hd, h0 == 0);
                    values::<{ if H > 4 { H - 4 } else { 1 } }>($kr, vp, stride, slots, nv, sp.add(4 * n), op.add(4 * (hd + 2)), hd, false)
                } else {
                    values::<H>($kr, vp, stride, slots, nv, sp, op, hd, h0 == 0)
                }
            });

            /// The scaled scores of heads `0..H` (queries at `qp`, scores to `sp`), 8 rows at a
            /// time (`R` at once, see `products`): each head's 8 vectors of products are then
            /// summed together. With `fetch_ahead`, rows `PREFETCH_ROWS` ahead are requested.
            #[inline]
            #[target_feature(enable = "avx2,fma,f16c")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn block_scores<const H: usize, const R: usize>(
                $kr: $K,
                qp: *const f32,
                nv: usize,
                stride: usize,
                slots: &[u32],
                scale: f32,
                sp: *mut f32,
                fetch_ahead: bool,
            ) {
                let n = slots.len();
                let mut part = [[_mm256_setzero_ps(); 8]; H];
                for j0 in (0..n).step_by(8) {
                    let m = (n - j0).min(8);
                    if fetch_ahead {
                        prefetch_rows(slots, j0 + PREFETCH_ROWS, 8, 8 * nv * $kelem, |slot| {
                            let ($pkr, $prow) = ($kr, slot * stride);
                            $krow
                        });
                    }
                    products::<H, R>($kr, qp, nv, stride, &slots[j0..j0 + m], &mut part);
                    for (i, p) in part.iter().enumerate() {
                        let sums = _mm256_mul_ps(sum8(p), _mm256_set1_ps(scale));
                        store_first(sp.add(i * n + j0), m, sums);
                    }
                }
            }

            /// `part[i][jj]`: the lane-wise products of key row `jj` (of up to 8, zero past
            /// the last) with head `i` (queries at `qp`), summed over the head in order. `R`
            /// rows at once: each query vector is loaded once for them, and the `H × R`
            /// multiply-add chains are independent (enough to hide their latency).
            #[inline]
            #[target_feature(enable = "avx2,fma,f16c")]
            unsafe fn products<const H: usize, const R: usize>(
                $kr: $K,
                qp: *const f32,
                nv: usize,
                stride: usize,
                rows8: &[u32],
                part: &mut [[__m256; 8]; H],
            ) {
                let _ = &$kr;
                let (m, hd) = (rows8.len(), 8 * nv);
                for jj in (0..8).step_by(R) {
                    let mut acc = [[_mm256_setzero_ps(); R]; H];
                    if jj < m {
                        for v in 0..nv {
                            let mut k = [_mm256_setzero_ps(); R];
                            for (r, k) in k.iter_mut().enumerate() {
                                // Rows past the last repeat it; their products are dropped.
                                let $slot = rows8[(jj + r).min(m - 1)];
                                let ($v, $off) = (v, $slot as usize * stride + 8 * v);
                                *k = $key;
                            }
                            for (i, a) in acc.iter_mut().enumerate() {
                                let q = _mm256_loadu_ps(qp.add(i * hd + 8 * v));
                                for (a, k) in a.iter_mut().zip(&k) {
                                    *a = _mm256_fmadd_ps(*k, q, *a);
                                }
                            }
                        }
                    }
                    for (p, a) in part.iter_mut().zip(&acc) {
                        for (r, a) in a.iter().enumerate() {
                            p[jj + r] = if jj + r < m { *a } else { _mm256_setzero_ps() };
                        }
                    }
                }
            }

            /// The softmax numerators of the `n` scores at `s`, in place, rounded to f16 as
            /// the reference (see `AttnChunkFn`); returns their maximum and the sum.
            #[inline]
            #[target_feature(enable = "avx2,fma,f16c")]
            unsafe fn numerators(s: *mut f32, n: usize) -> (f32, f32) {
                let mut mx = _mm256_set1_ps(f32::NEG_INFINITY);
                let full = n / 8 * 8;
                for j in (0..full).step_by(8) {
                    mx = _mm256_max_ps(mx, _mm256_loadu_ps(s.add(j)));
                }
                let mut lanes = [0f32; 8];
                _mm256_storeu_ps(lanes.as_mut_ptr(), mx);
                let max = lanes
                    .iter()
                    .chain(std::slice::from_raw_parts(s.add(full), n - full))
                    .fold(f32::NEG_INFINITY, |a, &b| a.max(b));
                let numerator = |x: __m256| {
                    let e = exp_ps(_mm256_sub_ps(x, _mm256_set1_ps(max)));
                    _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(e))
                };
                let mut sum = _mm256_setzero_ps();
                for j in (0..full).step_by(8) {
                    let e = numerator(_mm256_loadu_ps(s.add(j)));
                    _mm256_storeu_ps(s.add(j), e);
                    sum = _mm256_add_ps(sum, e);
                }
                if full < n {
                    let mask = first_lanes(n - full);
                    let e = numerator(_mm256_maskload_ps(s.add(full), mask));
                    _mm256_maskstore_ps(s.add(full), mask, e);
                    sum = _mm256_add_ps(sum, _mm256_and_ps(e, _mm256_castsi256_ps(mask)));
                }
                _mm256_storeu_ps(lanes.as_mut_ptr(), sum);
                (max, lanes.iter().sum())
            }

            /// Heads `0..H` (scores at `sp`, outputs at `op`), 16 dimensions at a time: for each
            /// dimension the products summed over the rows in order. With `fetch_ahead`, the
            /// first pass requests whole rows `PREFETCH_ROWS` ahead.
            #[inline]
            #[target_feature(enable = "avx2,fma,f16c")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn values<const H: usize>(
                $kr: $K,
                vp: *const $V,
                stride: usize,
                slots: &[u32],
                nv: usize,
                sp: *const f32,
                op: *mut f32,
                hd: usize,
                fetch_ahead: bool,
            ) {
                let _ = &$kr;
                let n = slots.len();
                for v0 in (0..nv).step_by(2) {
                    let two = nv - v0 >= 2;
                    let mut acc = [[_mm256_setzero_ps(); 2]; H];
                    for (j, &slot) in slots.iter().enumerate() {
                        if fetch_ahead && v0 == 0 {
                            prefetch_rows(slots, j + PREFETCH_ROWS, 1, hd * std::mem::size_of::<$V>(), |slot| {
                                vp.add(slot * stride).cast()
                            });
                        }
                        let row = vp.add(slot as usize * stride + 8 * v0);
                        let $vs = slot as usize;
                        let vs: f32 = $vscale;
                        let x0 = {
                            let $vp = row;
                            $value
                        };
                        let x1 = if two {
                            let $vp = row.add(8);
                            $value
                        } else {
                            _mm256_setzero_ps()
                        };
                        for (i, a) in acc.iter_mut().enumerate() {
                            let p = _mm256_set1_ps(*sp.add(i * n + j) * vs);
                            a[0] = _mm256_fmadd_ps(p, x0, a[0]);
                            a[1] = _mm256_fmadd_ps(p, x1, a[1]);
                        }
                    }
                    for (i, a) in acc.iter().enumerate() {
                        let o = op.add(i * (hd + 2) + 2 + 8 * v0);
                        _mm256_storeu_ps(o, a[0]);
                        if two {
                            _mm256_storeu_ps(o.add(8), a[1]);
                        }
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
    |keys, _slot, _v, off| load_f16(keys.add(off)),
    |p| load_f16(p),
    |_slot| 1.0,
    |keys, row| keys.add(row).cast(),
    2
);

chunk_kernel!(
    chunk_int8,
    Int8Rows,
    u8,
    // Element 8v of the row lies in key group 8v / KEY_GROUP.
    |rows, slot, v, off| {
        let d = *rows.key_scales.add(slot as usize * rows.key_scale_stride + 8 * v / KEY_GROUP);
        let k = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(rows.keys.add(off).cast())));
        _mm256_mul_ps(k, _mm256_set1_ps(d))
    },
    // e4m3 codes as f16 bits: sign to the top, exponent and mantissa up by 7 (`e4m3_f16_bits`).
    |p| {
        let b = _mm_cvtepu8_epi16(_mm_loadl_epi64(p.cast()));
        let sign = _mm_slli_epi16::<8>(_mm_and_si128(b, _mm_set1_epi16(0x80)));
        let rest = _mm_slli_epi16::<7>(_mm_and_si128(b, _mm_set1_epi16(0x7F)));
        _mm256_cvtph_ps(_mm_or_si128(sign, rest))
    },
    |slot| *rows.value_scales.add(slot * rows.value_scale_stride),
    |rows, row| rows.keys.add(row).cast(),
    1
);

/// 8 f16 at `p` -> f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load_f16(p: *const f16) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
}

/// Lane `j` of the result: the sum of the 8 lanes of `a[j]`. Three pairwise-add levels and
/// one cross-half add; each lane's sum depends only on its own vector, in a fixed order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn sum8(a: &[__m256; 8]) -> __m256 {
    // Per 128-bit half: the pair sums of two inputs, then the quad sums of four.
    let h01 = _mm256_hadd_ps(a[0], a[1]);
    let h23 = _mm256_hadd_ps(a[2], a[3]);
    let h45 = _mm256_hadd_ps(a[4], a[5]);
    let h67 = _mm256_hadd_ps(a[6], a[7]);
    // Lanes (k, k + 4) of these: input k's (low, high) quad sums, inputs 0..4 and 4..8.
    let lo4 = _mm256_hadd_ps(h01, h23);
    let hi4 = _mm256_hadd_ps(h45, h67);
    let low_halves = _mm256_permute2f128_ps::<0x20>(lo4, hi4);
    let high_halves = _mm256_permute2f128_ps::<0x31>(lo4, hi4);
    _mm256_add_ps(low_halves, high_halves)
}

/// Stores the first `m` (at most 8) lanes of `v` at `p`: a plain store when all 8 are
/// (masked stores are slow on some CPUs).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn store_first(p: *mut f32, m: usize, v: __m256) {
    if m >= 8 {
        _mm256_storeu_ps(p, v);
    } else {
        _mm256_maskstore_ps(p, first_lanes(m), v);
    }
}

/// A lane mask of the first `left.min(8)` lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn first_lanes(left: usize) -> __m256i {
    const ONES_THEN_ZEROS: [i32; 16] = [-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0];
    _mm256_loadu_si256(ONES_THEN_ZEROS.as_ptr().add(8 - left.min(8)).cast())
}
