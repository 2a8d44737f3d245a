//! NEON attention over a chunk of cached positions (see [`AttnChunkFn`]), on the plan of the x86
//! chunk kernels: keys and values (f16, or int8 keys and fp8 values) are converted in registers,
//! every query head of the KV head is served by one read of each row, four rows' dot products
//! are summed by one transposing pairwise reduction (`faddp`), and `exp` is vectorised. f16
//! conversions are `fcvtl` / `fcvtn` in `asm!` (the f16 vector types are not stable on our
//! minimum Rust).
//!
//! Each head is computed by the same operations in the same order whatever the number of heads
//! sharing the call, so a token gets the same bits alone or in a batch.
//!
//! `unsafe` for raw loads; the caller (`dispatch`) has checked that every slot's key and value
//! rows (and scales) lie inside their slices, and that heads are at most [`MAX_HEAD_DIM`] long
//! and a multiple of 8.
//!
//! [`AttnChunkFn`]: crate::quant::AttnChunkFn

use std::arch::aarch64::*;

use half::f16;

use super::fp16x8;
use crate::quant::{KvHeadRows, KEY_GROUP};

/// Query heads handled per pass (every model here has at most 7 per KV head).
const MAX_HEADS: usize = 8;

/// The longest head handled (the caller sends longer ones elsewhere).
pub const MAX_HEAD_DIM: usize = 256;

/// Whether this kernel handles heads of `hd` elements.
pub fn handles_head_dim(hd: usize) -> bool {
    hd <= MAX_HEAD_DIM && hd % 8 == 0
}

/// `e^x`, within 2 ulp, exactly 1 at 0; 0 below -87.3. Cephes' `expf`: `x = n ln 2 + r` with
/// `|r| <= ln 2 / 2`, a degree-7 polynomial for `e^r`, then times `2^n` built in the exponent
/// field (`n` lies in -126..=127 after the clamp, so `2^n` is a normal number).
#[inline]
#[target_feature(enable = "neon")]
pub unsafe fn exp_ps(x: float32x4_t) -> float32x4_t {
    let x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.336_55)), vdupq_n_f32(88.0));
    let n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(std::f32::consts::LOG2_E)));
    let r = vfmsq_f32(x, n, vdupq_n_f32(0.693_359_4));
    let r = vfmsq_f32(r, n, vdupq_n_f32(-2.121_944_4e-4));
    let mut p = vdupq_n_f32(1.987_569_2e-4);
    for c in [1.398_2e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5] {
        p = vfmaq_f32(vdupq_n_f32(c), p, r);
    }
    let y = vaddq_f32(vfmaq_f32(r, p, vmulq_f32(r, r)), vdupq_n_f32(1.0));
    let pow2 = vshlq_n_s32::<23>(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)));
    vmulq_f32(y, vreinterpretq_f32_s32(pow2))
}

/// `x` rounded to f16 (to nearest, ties to even) and back.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn round_f16(x: float32x4_t) -> float32x4_t {
    let r: float32x4_t;
    // Flags are not declared preserved: `fcvtn` may raise inexact and overflow in FPSR.
    std::arch::asm!(
        "fcvtn {r:v}.4h, {x:v}.4s",
        "fcvtl {r:v}.4s, {r:v}.4h",
        x = in(vreg) x,
        r = out(vreg) r,
        options(pure, nomem, nostack),
    );
    r
}

#[target_feature(enable = "neon")]
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
    for h0 in (0..heads).step_by(MAX_HEADS) {
        let g = (heads - h0).min(MAX_HEADS);
        let (q, out) = (&q[h0 * hd..(h0 + g) * hd], &mut out[h0 * (hd + 2)..]);
        macro_rules! by_heads {
            ($rows:expr) => {
                by_head_count!(g, G => chunk::<_, G>(q, hd, $rows, slots, scale, scores, out))
            };
        }
        match rows {
            KvHeadRows::F16 { keys, values, stride } => {
                by_heads!(F16Rows { keys: keys.as_ptr(), values: values.as_ptr(), stride })
            }
            KvHeadRows::Int8Fp8 {
                keys,
                key_scales,
                values,
                value_scales,
                stride,
                key_scale_stride,
                value_scale_stride,
            } => by_heads!(Int8Rows {
                keys: keys.as_ptr(),
                key_scales: key_scales.as_ptr(),
                values: values.as_ptr(),
                value_scales: value_scales.as_ptr(),
                stride,
                key_scale_stride,
                value_scale_stride,
            }),
        }
    }
}

/// A row format: element `e..e + 8` of a slot's key or value row as f32 (`e` a multiple of 8),
/// and the factor of a value row.
trait Rows: Copy {
    unsafe fn key8(self, slot: usize, e: usize) -> (float32x4_t, float32x4_t);
    unsafe fn value8(self, slot: usize, e: usize) -> (float32x4_t, float32x4_t);
    unsafe fn value_scale(self, slot: usize) -> f32;
}

#[derive(Clone, Copy)]
struct F16Rows {
    keys: *const f16,
    values: *const f16,
    stride: usize,
}

impl Rows for F16Rows {
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn key8(self, slot: usize, e: usize) -> (float32x4_t, float32x4_t) {
        fp16x8(vld1q_u16(self.keys.add(slot * self.stride + e).cast()))
    }

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn value8(self, slot: usize, e: usize) -> (float32x4_t, float32x4_t) {
        fp16x8(vld1q_u16(self.values.add(slot * self.stride + e).cast()))
    }

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn value_scale(self, _slot: usize) -> f32 {
        1.0
    }
}

/// Where int8 key rows, fp8 value rows and their scales are.
#[derive(Clone, Copy)]
struct Int8Rows {
    keys: *const i8,
    key_scales: *const f32,
    values: *const u8,
    value_scales: *const f32,
    stride: usize,
    key_scale_stride: usize,
    value_scale_stride: usize,
}

impl Rows for Int8Rows {
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn key8(self, slot: usize, e: usize) -> (float32x4_t, float32x4_t) {
        // The 8 elements lie in key group e / KEY_GROUP (KEY_GROUP is a multiple of 8).
        let d = *self.key_scales.add(slot * self.key_scale_stride + e / KEY_GROUP);
        let k = vmovl_s8(vld1_s8(self.keys.add(slot * self.stride + e)));
        let lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(k)));
        let hi = vcvtq_f32_s32(vmovl_high_s16(k));
        (vmulq_n_f32(lo, d), vmulq_n_f32(hi, d))
    }

    /// e4m3 codes as f16 bits: sign to the top, exponent and mantissa up by 7 (`e4m3_f16_bits`).
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn value8(self, slot: usize, e: usize) -> (float32x4_t, float32x4_t) {
        let b = vmovl_u8(vld1_u8(self.values.add(slot * self.stride + e)));
        let sign = vshlq_n_u16::<8>(vandq_u16(b, vdupq_n_u16(0x80)));
        let rest = vshlq_n_u16::<7>(vandq_u16(b, vdupq_n_u16(0x7F)));
        fp16x8(vorrq_u16(sign, rest))
    }

    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn value_scale(self, slot: usize) -> f32 {
        *self.value_scales.add(slot * self.value_scale_stride)
    }
}

/// Up to [`MAX_HEADS`] heads: scores four rows at a time, softmax per head, then the weighted
/// sums of value rows.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn chunk<R: Rows, const G: usize>(
    q: &[f32],
    hd: usize,
    rows: R,
    slots: &[u32],
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
) {
    let n = slots.len();
    let (qp, sp, op) = (q.as_ptr(), scores.as_mut_ptr(), out.as_mut_ptr());

    // Scores, 4 rows at a time. Each row's per-head vectors are paired with the next row's by
    // `faddp` as soon as both exist, then the two pairs, so that lane r holds row r's sum.
    for j0 in (0..n).step_by(4) {
        let m = (n - j0).min(4);
        let mut pairs = [[vdupq_n_f32(0.0); 2]; G];
        for (p, jj) in [(0, 0), (1, 2)] {
            if jj >= m {
                break;
            }
            let a = key_products::<R, G>(qp, hd, rows, slots[j0 + jj] as usize);
            let b = if jj + 1 < m {
                key_products::<R, G>(qp, hd, rows, slots[j0 + jj + 1] as usize)
            } else {
                [vdupq_n_f32(0.0); G]
            };
            for (pr, (a, b)) in pairs.iter_mut().zip(a.iter().zip(&b)) {
                pr[p] = vpaddq_f32(*a, *b);
            }
        }
        for (i, pr) in pairs.iter().enumerate() {
            let sums = vmulq_n_f32(vpaddq_f32(pr[0], pr[1]), scale);
            store_first(sp.add(i * n + j0), sums, m);
        }
    }

    // Softmax numerators and their sums, per head.
    for i in 0..G {
        let s = sp.add(i * n);
        let full = n / 4 * 4;
        // The tail padded with -inf, neutral for the max; its lanes are masked off the sum.
        let tail = {
            let mut t = [f32::NEG_INFINITY; 4];
            std::ptr::copy_nonoverlapping(s.add(full), t.as_mut_ptr(), n - full);
            vld1q_f32(t.as_ptr())
        };
        let mut mx = vdupq_n_f32(f32::NEG_INFINITY);
        for j in (0..full).step_by(4) {
            mx = vmaxnmq_f32(mx, vld1q_f32(s.add(j)));
        }
        let max = vmaxnmvq_f32(vmaxnmq_f32(mx, tail));
        let vmax = vdupq_n_f32(max);
        let mut sum = vdupq_n_f32(0.0);
        for j in (0..full).step_by(4) {
            // Rounded to f16, as the reference (see `AttnChunkFn`).
            let e = round_f16(exp_ps(vsubq_f32(vld1q_f32(s.add(j)), vmax)));
            vst1q_f32(s.add(j), e);
            sum = vaddq_f32(sum, e);
        }
        if full < n {
            const LANES: [u32; 4] = [0, 1, 2, 3];
            let keep = vcltq_u32(vld1q_u32(LANES.as_ptr()), vdupq_n_u32((n - full) as u32));
            let e = round_f16(exp_ps(vsubq_f32(tail, vmax)));
            let e = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(e), keep));
            store_first(s.add(full), e, n - full);
            sum = vaddq_f32(sum, e);
        }
        *op.add(i * (hd + 2)) = max;
        *op.add(i * (hd + 2) + 1) = vaddvq_f32(sum);
    }

    // Weighted sums of value rows. Each output lane sums its rows in slot order whatever the
    // pass width, so the width may follow the head count: 16 dimensions of every head while
    // the accumulators, numerators and value vectors fit the 32 registers, else 8.
    let wide = if G <= 5 { hd / 16 * 16 } else { 0 };
    for d0 in (0..wide).step_by(16) {
        values::<R, G, 4>(hd, rows, slots, sp, op, d0);
    }
    for d0 in (wide..hd).step_by(8) {
        values::<R, G, 2>(hd, rows, slots, sp, op, d0);
    }
}

/// Lane-wise products of a key row with every head's query, as one vector per head (the sum of
/// its lanes is the dot product).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn key_products<R: Rows, const G: usize>(qp: *const f32, hd: usize, rows: R, slot: usize) -> [float32x4_t; G] {
    let mut acc = [[vdupq_n_f32(0.0); 2]; G];
    for e in (0..hd).step_by(8) {
        let (k0, k1) = rows.key8(slot, e);
        for (i, a) in acc.iter_mut().enumerate() {
            let qh = qp.add(i * hd + e);
            a[0] = vfmaq_f32(a[0], k0, vld1q_f32(qh));
            a[1] = vfmaq_f32(a[1], k1, vld1q_f32(qh.add(4)));
        }
    }
    let mut r = [vdupq_n_f32(0.0); G];
    for (r, a) in r.iter_mut().zip(&acc) {
        *r = vaddq_f32(a[0], a[1]);
    }
    r
}

/// Dimensions `d0..d0 + 4W` of every head's output: `Σ p · value` over the rows in slot order.
/// Four rows at a time, each head's four numerators (times the rows' factors) are one vector,
/// used by lane.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn values<R: Rows, const G: usize, const W: usize>(
    hd: usize,
    rows: R,
    slots: &[u32],
    sp: *const f32,
    op: *mut f32,
    d0: usize,
) {
    let n = slots.len();
    let mut acc = [[vdupq_n_f32(0.0); W]; G];
    let load = |slot: u32| {
        let mut x = [vdupq_n_f32(0.0); W];
        for h in 0..W / 2 {
            (x[2 * h], x[2 * h + 1]) = rows.value8(slot as usize, d0 + 8 * h);
        }
        x
    };
    let mut j = 0;
    while j + 4 <= n {
        let s: [u32; 4] = slots[j..j + 4].try_into().unwrap();
        let f = s.map(|slot| rows.value_scale(slot as usize));
        let f = vld1q_f32(f.as_ptr());
        let mut p = [vdupq_n_f32(0.0); G];
        for (i, pi) in p.iter_mut().enumerate() {
            *pi = vmulq_f32(vld1q_f32(sp.add(i * n + j)), f);
        }
        macro_rules! row {
            ($lane:literal) => {
                let x = load(s[$lane]);
                for (a, pi) in acc.iter_mut().zip(&p) {
                    for (a, x) in a.iter_mut().zip(&x) {
                        *a = vfmaq_laneq_f32::<$lane>(*a, *x, *pi);
                    }
                }
            };
        }
        row!(0);
        row!(1);
        row!(2);
        row!(3);
        j += 4;
    }
    for (j, &slot) in slots.iter().enumerate().skip(j) {
        let f = rows.value_scale(slot as usize);
        let x = load(slot);
        for (i, a) in acc.iter_mut().enumerate() {
            let p = *sp.add(i * n + j) * f;
            for (a, x) in a.iter_mut().zip(&x) {
                *a = vfmaq_n_f32(*a, *x, p);
            }
        }
    }
    for (i, a) in acc.iter().enumerate() {
        let o = op.add(i * (hd + 2) + 2 + d0);
        for (w, a) in a.iter().enumerate() {
            vst1q_f32(o.add(4 * w), *a);
        }
    }
}

/// Stores the first `m` (at most 4) lanes of `v` at `p`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn store_first(p: *mut f32, v: float32x4_t, m: usize) {
    if m >= 4 {
        vst1q_f32(p, v);
    } else {
        let mut t = [0f32; 4];
        vst1q_f32(t.as_mut_ptr(), v);
        std::ptr::copy_nonoverlapping(t.as_ptr(), p, m);
    }
}
