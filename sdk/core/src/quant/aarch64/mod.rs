//! aarch64 kernels. Three sets share this code and differ in the instruction that multiplies
//! signed bytes:
//!
//! - [`neon`]: base ARMv8-A, widening `smull` with pairwise `sadalp`;
//! - [`dotprod`]: `sdot` (ARMv8.2 dotprod), four byte products summed per i32 lane; on
//!   repacked weights, `sdot` by element on the 8-row tiles of [`tile8`];
//! - [`i8mm`]: `smmla` (ARMv8.6 i8mm) for several tokens at once, a 2 × 2 tile of (weight row,
//!   token) sums per instruction, and the `dotprod` kernels for one token; on repacked weights,
//!   `smmla` on token pairs over the 8-byte-wide tiles of [`tile8`].
//!
//! [`attn`], the attention over a chunk of cached positions, is NEON and shared by all three.
//!
//! The dotprod and i8mm intrinsics are not stable on our minimum Rust, so those instructions are
//! written with `asm!` and enable their extension in the assembler only; dispatch hands a set
//! out only after checking the CPU has it. Everything else is NEON, part of every aarch64 target
//! we build for. On ggml's layout all memory access goes through the typed block slices; the
//! tile kernels read through pointers whose extents dispatch checks first.
//!
//! Integer parts are exact and quantization is byte-identical to `reference`. Each (weight row,
//! token) pair is accumulated in one fixed order (an exact integer sum per block, then the same
//! f32 steps per block, e.g. one fused multiply-add into alternating accumulators for 32-element
//! blocks), which the multi-token kernels of [`i8mm`] follow lane by lane: a token's result does
//! not depend on its batch.

// The one safety condition (the set's CPU features present) is stated once, above, not per
// function.
#![allow(clippy::missing_safety_doc)]

pub mod attn;
pub mod dotprod;
pub mod i8mm;
pub mod neon;
pub mod tile8;

use std::arch::aarch64::*;

use half::{bf16, f16};

use super::blocks::*;

// ---------------------------------------------------------------------------------------------
// Helpers

/// The signed byte dot product a set's integer kernels are built on.
pub trait IntDot {
    /// `acc` plus the products `a[i] * b[i]` of 16 signed bytes, summed into 4 i32 lanes (which
    /// products land in which lane is the instruction's choice; callers only add the lanes).
    unsafe fn dot16(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t;
}

/// f16 -> f32 with the base-ISA `fcvt` (Rust's float16 vector types are not stable).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn fp16(h: f16) -> f32 {
    let r: f32;
    std::arch::asm!(
        "fmov {t:s}, {b:w}",
        "fcvt {t:s}, {t:h}",
        b = in(reg) h.to_bits() as u32,
        t = out(vreg) r,
        options(pure, nomem, nostack, preserves_flags),
    );
    r
}

/// Eight f16 (raw bits) -> two vectors of four f32.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn fp16x8(v: uint16x8_t) -> (float32x4_t, float32x4_t) {
    let lo: float32x4_t;
    let hi: float32x4_t;
    std::arch::asm!(
        "fcvtl {lo:v}.4s, {v:v}.4h",
        "fcvtl2 {hi:v}.4s, {v:v}.8h",
        v = in(vreg) v,
        lo = out(vreg) lo,
        hi = out(vreg) hi,
        options(pure, nomem, nostack, preserves_flags),
    );
    (lo, hi)
}

/// Exact sum of `a[i] * b[i]` over two pairs of 16 signed bytes.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn dot32<D: IntDot>(a: (int8x16_t, int8x16_t), b: (int8x16_t, int8x16_t)) -> i32 {
    vaddvq_s32(D::dot16(D::dot16(vdupq_n_s32(0), a.0, b.0), a.1, b.1))
}

#[inline]
#[target_feature(enable = "neon")]
unsafe fn load_i8x32(q: &[i8]) -> (int8x16_t, int8x16_t) {
    let q = &q[..32];
    (vld1q_s8(q.as_ptr()), vld1q_s8(q.as_ptr().add(16)))
}

/// 16 packed bytes -> (low nibbles = elements 0..16, high nibbles = 16..32) as bytes.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn nibbles(qs: &[u8; 16]) -> (uint8x16_t, uint8x16_t) {
    let v = vld1q_u8(qs.as_ptr());
    (vandq_u8(v, vdupq_n_u8(0x0F)), vshrq_n_u8(v, 4))
}

/// Bit `k` of `bits` -> byte `k` = 0xFF or 0x00, for `k` in 0..32.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn bits_to_bytes32(bits: u32) -> (uint8x16_t, uint8x16_t) {
    const IDX_LO: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
    const IDX_HI: [u8; 16] = [2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3];
    const MASK: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
    let src = vreinterpretq_u8_u32(vdupq_n_u32(bits));
    let mask = vld1q_u8(MASK.as_ptr());
    let lo = vqtbl1q_u8(src, vld1q_u8(IDX_LO.as_ptr()));
    let hi = vqtbl1q_u8(src, vld1q_u8(IDX_HI.as_ptr()));
    (vtstq_u8(lo, mask), vtstq_u8(hi, mask))
}

// ---------------------------------------------------------------------------------------------
// 32-element blocks

/// A 32-element weight block as the integer kernels see it: 32 signed quants, a scale and the
/// activation block it pairs with.
pub trait Block32: Block {
    type Act: Act32;
    /// Whether [`Block32::offset`] contributes (Q4_1's `m * s`).
    const OFFSET: bool = false;
    /// The 32 quants as signed bytes, in element order.
    unsafe fn quants(&self) -> (int8x16_t, int8x16_t);
    unsafe fn d(&self) -> f32;
    /// The weight half of the per-block constant term `offset * act.s()`.
    unsafe fn offset(&self) -> f32 {
        0.0
    }
}

/// A 32-element activation block: quants, scale and (Q8_1) the scaled sum of its quants.
pub trait Act32: Block {
    fn qs(&self) -> &[i8; 32];
    unsafe fn d(&self) -> f32;
    unsafe fn s(&self) -> f32 {
        0.0
    }
}

impl Act32 for BlockQ8_0 {
    fn qs(&self) -> &[i8; 32] {
        &self.qs
    }
    unsafe fn d(&self) -> f32 {
        fp16(self.d)
    }
}

impl Act32 for BlockQ8_1 {
    fn qs(&self) -> &[i8; 32] {
        &self.qs
    }
    unsafe fn d(&self) -> f32 {
        fp16(self.d)
    }
    unsafe fn s(&self) -> f32 {
        fp16(self.s)
    }
}

impl Block32 for BlockQ4_0 {
    type Act = BlockQ8_0;
    unsafe fn quants(&self) -> (int8x16_t, int8x16_t) {
        let (lo, hi) = nibbles(&self.qs);
        let eight = vdupq_n_s8(8);
        (vsubq_s8(vreinterpretq_s8_u8(lo), eight), vsubq_s8(vreinterpretq_s8_u8(hi), eight))
    }
    unsafe fn d(&self) -> f32 {
        fp16(self.d)
    }
}

impl Block32 for BlockQ4_1 {
    type Act = BlockQ8_1;
    const OFFSET: bool = true;
    unsafe fn quants(&self) -> (int8x16_t, int8x16_t) {
        // The nibbles (0..16) fit signed bytes; the offset `m` is the separate term.
        let (lo, hi) = nibbles(&self.qs);
        (vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi))
    }
    unsafe fn d(&self) -> f32 {
        fp16(self.d)
    }
    unsafe fn offset(&self) -> f32 {
        fp16(self.m)
    }
}

impl Block32 for BlockQ5_0 {
    type Act = BlockQ8_0;
    unsafe fn quants(&self) -> (int8x16_t, int8x16_t) {
        let (lo, hi) = nibbles(&self.qs);
        let (blo, bhi) = bits_to_bytes32(u32::from_le_bytes(self.qh));
        // q - 16 as a signed byte is the nibble with 0xF0 or'ed in where the 5th bit is clear.
        let f0 = vdupq_n_u8(0xF0);
        (vreinterpretq_s8_u8(vorrq_u8(lo, vbicq_u8(f0, blo))), vreinterpretq_s8_u8(vorrq_u8(hi, vbicq_u8(f0, bhi))))
    }
    unsafe fn d(&self) -> f32 {
        fp16(self.d)
    }
}

impl Block32 for BlockQ8_0 {
    type Act = BlockQ8_0;
    unsafe fn quants(&self) -> (int8x16_t, int8x16_t) {
        load_i8x32(&self.qs)
    }
    unsafe fn d(&self) -> f32 {
        fp16(self.d)
    }
}

impl Block32 for BlockQ5_1 {
    type Act = BlockQ8_1;
    const OFFSET: bool = true;
    unsafe fn quants(&self) -> (int8x16_t, int8x16_t) {
        // 5-bit quants 0..32 fit signed bytes: the nibble with bit 4 from `qh`; `m` is the
        // separate term.
        let (lo, hi) = nibbles(&self.qs);
        let (blo, bhi) = bits_to_bytes32(u32::from_le_bytes(self.qh));
        let b4 = vdupq_n_u8(0x10);
        (vreinterpretq_s8_u8(vorrq_u8(lo, vandq_u8(blo, b4))), vreinterpretq_s8_u8(vorrq_u8(hi, vandq_u8(bhi, b4))))
    }
    unsafe fn d(&self) -> f32 {
        fp16(self.d)
    }
    unsafe fn offset(&self) -> f32 {
        fp16(self.m)
    }
}

/// IQ4's 16 grid values, for `tbl` lookups by nibble.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn iq4_grid() -> int8x16_t {
    vld1q_s8(KVALUES_IQ4NL.as_ptr())
}

impl Block32 for BlockIq4Nl {
    type Act = BlockQ8_0;
    unsafe fn quants(&self) -> (int8x16_t, int8x16_t) {
        let (lo, hi) = nibbles(&self.qs);
        let grid = iq4_grid();
        (vqtbl1q_s8(grid, lo), vqtbl1q_s8(grid, hi))
    }
    unsafe fn d(&self) -> f32 {
        fp16(self.d)
    }
}

/// `Σ d_w d_a dot(w, a)` over the blocks (plus `Σ offset · s`): even blocks into one f32
/// accumulator, odd ones into another, one fused multiply-add each, in block order (the order
/// [`i8mm`]'s tiles keep per lane).
#[inline]
#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_q32<D: IntDot, W: Block32>(w: &[W], a: &[W::Act]) -> f32 {
    let mut acc = [0.0f32; 2];
    let mut off = 0.0f32;
    for (i, (x, y)) in w.iter().zip(a).enumerate() {
        let p = dot32::<D>(x.quants(), load_i8x32(y.qs())) as f32;
        acc[i % 2] = p.mul_add(x.d() * y.d(), acc[i % 2]);
        if W::OFFSET {
            off = x.offset().mul_add(y.s(), off);
        }
    }
    acc[0] + acc[1] + off
}

// ---------------------------------------------------------------------------------------------
// k-quants (one f32 update per super-block, exact integer sums inside)

/// `Σ_j min[j] * (bsums[2j] + bsums[2j + 1])`: the Q4_K mins against one Q8_K block.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn q4k_min_sum(sm: &[u8; 16], y: &BlockQ8K) -> i32 {
    let b0 = vld1q_s16(y.bsums.as_ptr());
    let b1 = vld1q_s16(y.bsums.as_ptr().add(8));
    let pairs = vpaddq_s16(b0, b1);
    let mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(sm.as_ptr().add(8))));
    vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(mins), vget_low_s16(pairs)), mins, pairs))
}

/// Group `g` (elements 64g..64g+64) of a Q4_K block: (low nibbles, high nibbles), 32 each.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn q4k_quants(x: &BlockQ4K, g: usize) -> ((int8x16_t, int8x16_t), (int8x16_t, int8x16_t)) {
    let m4 = vdupq_n_u8(0x0F);
    let qs = &x.qs[32 * g..32 * g + 32];
    let q4 = vld1q_u8(qs.as_ptr());
    let q4b = vld1q_u8(qs.as_ptr().add(16));
    let lo = (vreinterpretq_s8_u8(vandq_u8(q4, m4)), vreinterpretq_s8_u8(vandq_u8(q4b, m4)));
    let hi = (vreinterpretq_s8_u8(vshrq_n_u8(q4, 4)), vreinterpretq_s8_u8(vshrq_n_u8(q4b, 4)));
    (lo, hi)
}

#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_q4_k_q8_k<D: IntDot>(w: &[BlockQ4K], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let sm = q4k_scales_mins(&x.scales);
        let summ = q4k_min_sum(&sm, y);
        let mut sumi = 0i32;
        for g in 0..QK_K / 64 {
            let (lo, hi) = q4k_quants(x, g);
            let pl = dot32::<D>(lo, load_i8x32(&y.qs[64 * g..]));
            let ph = dot32::<D>(hi, load_i8x32(&y.qs[64 * g + 32..]));
            sumi += pl * sm[2 * g] as i32 + ph * sm[2 * g + 1] as i32;
        }
        let d = fp16(x.d) * y.d;
        let dmin = fp16(x.dmin) * y.d;
        sumf += d * sumi as f32 - dmin * summ as f32;
    }
    sumf
}

/// Column `c` of half `h` of a Q6_K block, minus 32: `q[k]` holds elements
/// `128h + 32k + 16c + (0..16)`, whose scale is `scales[8h + 2k + c]`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn q6k_quants(x: &BlockQ6K, h: usize, c: usize) -> [int8x16_t; 4] {
    let m4 = vdupq_n_u8(0x0F);
    let m3 = vdupq_n_u8(3);
    let m32 = vdupq_n_s8(32);
    let ql = &x.ql[64 * h..64 * h + 64];
    let qh = &x.qh[32 * h..32 * h + 32];
    let l1 = vld1q_u8(ql.as_ptr().add(16 * c));
    let l2 = vld1q_u8(ql.as_ptr().add(32 + 16 * c));
    let hb = vld1q_u8(qh.as_ptr().add(16 * c));
    let q = [
        vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)),
        vorrq_u8(vandq_u8(l2, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)),
        vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)),
        vorrq_u8(vshrq_n_u8(l2, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)),
    ];
    q.map(|qk| vsubq_s8(vreinterpretq_s8_u8(qk), m32))
}

#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_q6_k_q8_k<D: IntDot>(w: &[BlockQ6K], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let mut sumi = 0i32;
        for h in 0..QK_K / 128 {
            for c in 0..2 {
                for (k, q6) in q6k_quants(x, h, c).into_iter().enumerate() {
                    let q8 = vld1q_s8(y.qs[128 * h + 32 * k + 16 * c..][..16].as_ptr());
                    let s = vaddvq_s32(D::dot16(vdupq_n_s32(0), q6, q8));
                    sumi += s * x.scales[8 * h + 2 * k + c] as i32;
                }
            }
        }
        sumf += fp16(x.d) * y.d * sumi as f32;
    }
    sumf
}

/// A 256-element super-block (against Q8_K) whose integer part is, per 16 elements, an exact
/// dot product of signed byte quants times an integer scale (Q2_K, Q3_K, Q5_K, IQ4_XS; a scale
/// of 32 elements serves both of its halves). The f32 steps per super-block are ggml's:
/// `sumf += d · sumi - dmin · summ` (without mins, `sumf += d · sumi`).
pub trait KQuant: Block {
    /// Whether [`KQuant::min_sum`] and [`KQuant::dmin`] contribute.
    const MINS: bool = false;
    /// Elements `128h..128h + 128` as signed bytes, 16 per vector in element order.
    unsafe fn quants(&self, h: usize) -> [int8x16_t; 8];
    /// The integer scale of each 16 elements.
    fn scales(&self) -> [i32; 16];
    /// `Σ min · activation sums` against `y` (the part `dmin` multiplies).
    unsafe fn min_sum(&self, _y: &BlockQ8K) -> i32 {
        0
    }
    unsafe fn d(&self) -> f32;
    unsafe fn dmin(&self) -> f32 {
        0.0
    }
}

/// The 2-bit fields `2k..2k + 2` (k = 0..4) of 32 bytes at `q`, in Q2_K's element order:
/// vector `2k + c` holds the field `k` of bytes `16c..16c + 16`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn crumbs(q: &[u8]) -> [uint8x16_t; 8] {
    let q = &q[..32];
    let (v0, v1) = (vld1q_u8(q.as_ptr()), vld1q_u8(q.as_ptr().add(16)));
    let m3 = vdupq_n_u8(3);
    [
        vandq_u8(v0, m3),
        vandq_u8(v1, m3),
        vandq_u8(vshrq_n_u8(v0, 2), m3),
        vandq_u8(vshrq_n_u8(v1, 2), m3),
        vandq_u8(vshrq_n_u8(v0, 4), m3),
        vandq_u8(vshrq_n_u8(v1, 4), m3),
        vshrq_n_u8(v0, 6),
        vshrq_n_u8(v1, 6),
    ]
}

impl KQuant for BlockQ2K {
    const MINS: bool = true;
    unsafe fn quants(&self, h: usize) -> [int8x16_t; 8] {
        crumbs(&self.qs[32 * h..]).map(|v| vreinterpretq_s8_u8(v))
    }
    fn scales(&self) -> [i32; 16] {
        self.scales.map(|s| (s & 0x0F) as i32)
    }
    #[inline]
    unsafe fn min_sum(&self, y: &BlockQ8K) -> i32 {
        // Σ_j (scales[j] >> 4) · bsums[j]
        let m = vshrq_n_u8(vld1q_u8(self.scales.as_ptr()), 4);
        let m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m)));
        let m1 = vreinterpretq_s16_u16(vmovl_high_u8(m));
        let b0 = vld1q_s16(y.bsums.as_ptr());
        let b1 = vld1q_s16(y.bsums.as_ptr().add(8));
        let acc = vmlal_high_s16(vmull_s16(vget_low_s16(m0), vget_low_s16(b0)), m0, b0);
        vaddvq_s32(vmlal_high_s16(vmlal_s16(acc, vget_low_s16(m1), vget_low_s16(b1)), m1, b1))
    }
    unsafe fn d(&self) -> f32 {
        fp16(self.d)
    }
    unsafe fn dmin(&self) -> f32 {
        fp16(self.dmin)
    }
}

impl KQuant for BlockQ3K {
    unsafe fn quants(&self, h: usize) -> [int8x16_t; 8] {
        // The low 2 bits as Q2_K's, less 4 where the `hmask` bit (4h + k) is clear.
        let low = crumbs(&self.qs[32 * h..]);
        let hm = [vld1q_u8(self.hmask.as_ptr()), vld1q_u8(self.hmask.as_ptr().add(16))];
        let four = vdupq_n_u8(4);
        std::array::from_fn(|i| {
            let (k, c) = (i / 2, i % 2);
            let set = vtstq_u8(hm[c], vdupq_n_u8(1 << (4 * h + k)));
            vsubq_s8(vreinterpretq_s8_u8(low[i]), vreinterpretq_s8_u8(vbicq_u8(four, set)))
        })
    }
    fn scales(&self) -> [i32; 16] {
        q3k_scales(&self.scales).map(|s| s as i32)
    }
    unsafe fn d(&self) -> f32 {
        fp16(self.d)
    }
}

impl KQuant for BlockQ5K {
    const MINS: bool = true;
    unsafe fn quants(&self, h: usize) -> [int8x16_t; 8] {
        // Q4_K's nibbles of groups 2h and 2h + 1, bit 4 from `qh` (bit 2g: low nibbles, 2g + 1:
        // high nibbles of group g).
        let qh = [vld1q_u8(self.qh.as_ptr()), vld1q_u8(self.qh.as_ptr().add(16))];
        let (m4, b4) = (vdupq_n_u8(0x0F), vdupq_n_u8(0x10));
        std::array::from_fn(|i| {
            let (g, hi, c) = (2 * h + i / 4, (i / 2) % 2, i % 2);
            let q = vld1q_u8(self.qs[32 * g + 16 * c..][..16].as_ptr());
            let nib = if hi == 0 { vandq_u8(q, m4) } else { vshrq_n_u8(q, 4) };
            let fifth = vandq_u8(vtstq_u8(qh[c], vdupq_n_u8(1 << (2 * g + hi))), b4);
            vreinterpretq_s8_u8(vorrq_u8(nib, fifth))
        })
    }
    fn scales(&self) -> [i32; 16] {
        let sm = q4k_scales_mins(&self.scales);
        std::array::from_fn(|s| sm[s / 2] as i32)
    }
    #[inline]
    unsafe fn min_sum(&self, y: &BlockQ8K) -> i32 {
        q4k_min_sum(&q4k_scales_mins(&self.scales), y)
    }
    unsafe fn d(&self) -> f32 {
        fp16(self.d)
    }
    unsafe fn dmin(&self) -> f32 {
        fp16(self.dmin)
    }
}

impl KQuant for BlockIq4Xs {
    unsafe fn quants(&self, h: usize) -> [int8x16_t; 8] {
        // Sub-block j's nibbles are qs[16j..16j + 16]: low nibbles its first 16 elements.
        let (grid, m4) = (iq4_grid(), vdupq_n_u8(0x0F));
        std::array::from_fn(|i| {
            let q = vld1q_u8(self.qs[16 * (4 * h + i / 2)..][..16].as_ptr());
            vqtbl1q_s8(grid, if i % 2 == 0 { vandq_u8(q, m4) } else { vshrq_n_u8(q, 4) })
        })
    }
    fn scales(&self) -> [i32; 16] {
        std::array::from_fn(|s| iq4xs_scale(self, s / 2) as i32 - 32)
    }
    unsafe fn d(&self) -> f32 {
        fp16(self.d)
    }
}

/// `Σ` over super-blocks of [`KQuant`]'s steps; per 16 elements an exact dot product
/// multiply-added with its scale into i32 lanes, summed once per super-block.
#[inline]
#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_kq<D: IntDot, W: KQuant>(w: &[W], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in w.iter().zip(a) {
        let sc = x.scales();
        let mut acc = vdupq_n_s32(0);
        for h in 0..2 {
            for (i, q) in x.quants(h).into_iter().enumerate() {
                let s = 8 * h + i;
                let p = D::dot16(vdupq_n_s32(0), q, vld1q_s8(y.qs[16 * s..][..16].as_ptr()));
                acc = vmlaq_n_s32(acc, p, sc[s]);
            }
        }
        let d = x.d() * y.d;
        if W::MINS {
            sumf += d * vaddvq_s32(acc) as f32 - x.dmin() * y.d * x.min_sum(y) as f32;
        } else {
            sumf += d * vaddvq_s32(acc) as f32;
        }
    }
    sumf
}

// ---------------------------------------------------------------------------------------------
// Float weights

/// Shared loop: `$load(i)` gives 8 weights from element `i` as two f32 vectors, `$one(j)` one
/// weight. Four accumulators cover the FMA latency. In bounds: 8 lanes are read only at
/// `i + 8 <= n`, `n` at most both lengths.
macro_rules! dot_f32_lanes {
    ($w:expr, $a:expr, |$i:ident| $load:expr, |$j:ident| $one:expr) => {{
        let n = $w.len().min($a.len());
        let a = &$a[..n];
        let ap = a.as_ptr();
        let mut acc = [vdupq_n_f32(0.0); 4];
        let mut i = 0;
        while i + 16 <= n {
            for k in 0..2 {
                let $i = i + 8 * k;
                let (w0, w1) = $load;
                acc[2 * k] = vfmaq_f32(acc[2 * k], w0, vld1q_f32(ap.add($i)));
                acc[2 * k + 1] = vfmaq_f32(acc[2 * k + 1], w1, vld1q_f32(ap.add($i + 4)));
            }
            i += 16;
        }
        while i + 8 <= n {
            let $i = i;
            let (w0, w1) = $load;
            acc[0] = vfmaq_f32(acc[0], w0, vld1q_f32(ap.add($i)));
            acc[1] = vfmaq_f32(acc[1], w1, vld1q_f32(ap.add($i + 4)));
            i += 8;
        }
        let mut sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
        for $j in i..n {
            sum += $one * a[$j];
        }
        sum
    }};
}

#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_f32_f32(w: &[f32], a: &[f32]) -> f32 {
    dot_f32_lanes!(w, a, |i| (vld1q_f32(w.as_ptr().add(i)), vld1q_f32(w.as_ptr().add(i + 4))), |j| w[j])
}

#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_f16_f32(w: &[f16], a: &[f32]) -> f32 {
    dot_f32_lanes!(w, a, |i| fp16x8(vld1q_u16(w.as_ptr().add(i).cast())), |j| fp16(w[j]))
}

#[target_feature(enable = "neon")]
pub unsafe fn axpy_f16_f32(a: f32, x: &[f16], y: &mut [f32]) {
    let n = x.len().min(y.len());
    let va = vdupq_n_f32(a);
    let (xp, yp) = (x.as_ptr(), y.as_mut_ptr());
    let mut i = 0;
    while i + 8 <= n {
        let (x0, x1) = fp16x8(vld1q_u16(xp.add(i).cast()));
        vst1q_f32(yp.add(i), vfmaq_f32(vld1q_f32(yp.add(i)), va, x0));
        vst1q_f32(yp.add(i + 4), vfmaq_f32(vld1q_f32(yp.add(i + 4)), va, x1));
        i += 8;
    }
    for j in i..n {
        y[j] += a * fp16(x[j]);
    }
}

/// `gate[i] = silu(gate[i]) * up[i]` (see the reference), 4 at a time.
#[target_feature(enable = "neon")]
pub unsafe fn silu_mul(gate: &mut [f32], up: &[f32]) {
    super::in_pieces::<4>(gate, up, |g, u| {
        let x = vld1q_f32(g.as_ptr());
        let s = vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0), attn::exp_ps(vnegq_f32(x))));
        vst1q_f32(g.as_mut_ptr(), vmulq_f32(s, vld1q_f32(u.as_ptr())));
    })
}

#[target_feature(enable = "neon")]
pub unsafe fn vec_dot_bf16_f32(w: &[bf16], a: &[f32]) -> f32 {
    // bf16 is the top half of an f32.
    dot_f32_lanes!(
        w,
        a,
        |i| {
            let v = vld1q_u16(w.as_ptr().add(i).cast());
            (vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(v), 16)), vreinterpretq_f32_u32(vshll_high_n_u16(v, 16)))
        },
        |j| w[j].to_f32()
    )
}

// ---------------------------------------------------------------------------------------------
// Activation quantization (byte-identical to `reference`)

#[inline]
#[target_feature(enable = "neon")]
unsafe fn load8x4(x: &[f32]) -> [float32x4_t; 8] {
    let p = x[..32].as_ptr();
    let mut v = [vdupq_n_f32(0.0); 8];
    for (k, v) in v.iter_mut().enumerate() {
        *v = vld1q_f32(p.add(4 * k));
    }
    v
}

/// 8 x 4 i32 -> 32 saturated i8 in element order.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn narrow32(q: &[int32x4_t; 8], out: &mut [i8]) {
    let out = &mut out[..32];
    for (k, pair) in q.chunks_exact(4).enumerate() {
        let a = vqmovn_high_s32(vqmovn_s32(pair[0]), pair[1]);
        let b = vqmovn_high_s32(vqmovn_s32(pair[2]), pair[3]);
        vst1q_s8(out.as_mut_ptr().add(16 * k), vqmovn_high_s16(vqmovn_s16(a), b));
    }
}

/// Quantizes 32 floats as Q8_0 does: `d`, and the quants (also returned as i32).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn q8_block(x: &[f32], out: &mut [i8; 32]) -> (f32, [int32x4_t; 8]) {
    let v = load8x4(x);
    // `maxnm` ignores NaNs, as `f32::max` does in the reference.
    let mut m = vdupq_n_f32(0.0);
    for &vk in &v {
        m = vmaxnmq_f32(m, vabsq_f32(vk));
    }
    let d = vmaxnmvq_f32(m) / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut q = [vdupq_n_s32(0); 8];
    for (qk, &vk) in q.iter_mut().zip(&v) {
        // `fcvtas`: round half away from zero, exactly `f32::round`.
        *qk = vcvtaq_s32_f32(vmulq_n_f32(vk, id));
    }
    narrow32(&q, out);
    (d, q)
}

#[target_feature(enable = "neon")]
pub unsafe fn quantize_row_q8_0(x: &[f32], out: &mut [BlockQ8_0]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let (d, _) = q8_block(xb, &mut y.qs);
        y.d = f16::from_f32(d);
    }
}

#[target_feature(enable = "neon")]
pub unsafe fn quantize_row_q8_1(x: &[f32], out: &mut [BlockQ8_1]) {
    for (xb, y) in x.chunks_exact(QK).zip(out.iter_mut()) {
        let (d, q) = q8_block(xb, &mut y.qs);
        y.d = f16::from_f32(d);
        let mut s = vdupq_n_s32(0);
        for qk in q {
            s = vaddq_s32(s, qk);
        }
        y.s = f16::from_f32(vaddvq_s32(s) as f32 * d);
    }
}

#[target_feature(enable = "neon")]
pub unsafe fn quantize_row_q8_k(x: &[f32], out: &mut [BlockQ8K]) {
    for (xb, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        let mut m = vdupq_n_f32(0.0);
        for c in xb.chunks_exact(4) {
            m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(c.as_ptr())));
        }
        let amax = vmaxnmvq_f32(m);
        if amax == 0.0 {
            *y = BlockQ8K::zeroed();
            continue;
        }
        // The reference keeps the sign of the first element reaching `amax`.
        let max = xb.iter().copied().find(|v| v.abs() == amax).unwrap_or(amax);
        let iscale = -127.0 / max;
        let lim = vdupq_n_s32(127);
        for (xc, qc) in xb.chunks_exact(32).zip(y.qs.chunks_exact_mut(32)) {
            let v = load8x4(xc);
            let mut q = [vdupq_n_s32(0); 8];
            for (qk, &vk) in q.iter_mut().zip(&v) {
                // `fcvtns`: round half to even, as ggml's `nearest_int`.
                *qk = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vk, iscale)), lim);
            }
            narrow32(&q, qc);
        }
        for (s, q) in y.bsums.iter_mut().zip(y.qs.chunks_exact(16)) {
            *s = vaddlvq_s8(vld1q_s8(q.as_ptr()));
        }
        y.d = 1.0 / iscale;
    }
}

// ---------------------------------------------------------------------------------------------
// Row loops and the per-set function names

/// `out[r] = dot(row r, a)` for consecutive rows of `a.len()` blocks each.
#[inline]
fn rows<W, A>(w: &[W], a: &[A], out: &mut [f32], dot: impl Fn(&[W], &[A]) -> f32) {
    if a.is_empty() {
        out.fill(0.0);
        return;
    }
    for (o, row) in out.iter_mut().zip(w.chunks_exact(a.len())) {
        *o = dot(row, a);
    }
}

macro_rules! mat_vec {
    ($($name:ident => $dot:ident($W:ty, $A:ty);)*) => {$(
        /// `out[r] = dot(row r, a)` for consecutive rows of `a.len()` blocks each.
        #[target_feature(enable = "neon")]
        pub unsafe fn $name(w: &[$W], a: &[$A], out: &mut [f32]) {
            rows(w, a, out, |w, a| unsafe { $dot(w, a) })
        }
    )*};
}

mat_vec! {
    mat_vec_f32_f32 => vec_dot_f32_f32(f32, f32);
    mat_vec_f16_f32 => vec_dot_f16_f32(f16, f32);
    mat_vec_bf16_f32 => vec_dot_bf16_f32(bf16, f32);
}

/// The integer kernels of one [`IntDot`] under the reference's names (the functions a kernel
/// table points at), next to the shared float kernels and quantizers.
macro_rules! int_kernels {
    ($D:ty) => {
        pub use super::{
            axpy_f16_f32, mat_vec_bf16_f32, mat_vec_f16_f32, mat_vec_f32_f32, quantize_row_q8_0, quantize_row_q8_1,
            quantize_row_q8_k, silu_mul, vec_dot_bf16_f32, vec_dot_f16_f32, vec_dot_f32_f32,
        };
        use super::*;

        int_kernels! { @fns
            vec_dot_q4_0_q8_0, mat_vec_q4_0_q8_0(BlockQ4_0, BlockQ8_0) => super::vec_dot_q32::<$D, BlockQ4_0>;
            vec_dot_q4_1_q8_1, mat_vec_q4_1_q8_1(BlockQ4_1, BlockQ8_1) => super::vec_dot_q32::<$D, BlockQ4_1>;
            vec_dot_q5_0_q8_0, mat_vec_q5_0_q8_0(BlockQ5_0, BlockQ8_0) => super::vec_dot_q32::<$D, BlockQ5_0>;
            vec_dot_q8_0_q8_0, mat_vec_q8_0_q8_0(BlockQ8_0, BlockQ8_0) => super::vec_dot_q32::<$D, BlockQ8_0>;
            vec_dot_q4_k_q8_k, mat_vec_q4_k_q8_k(BlockQ4K, BlockQ8K) => super::vec_dot_q4_k_q8_k::<$D>;
            vec_dot_q6_k_q8_k, mat_vec_q6_k_q8_k(BlockQ6K, BlockQ8K) => super::vec_dot_q6_k_q8_k::<$D>;
            vec_dot_q5_1_q8_1, mat_vec_q5_1_q8_1(BlockQ5_1, BlockQ8_1) => super::vec_dot_q32::<$D, BlockQ5_1>;
            vec_dot_iq4_nl_q8_0, mat_vec_iq4_nl_q8_0(BlockIq4Nl, BlockQ8_0) => super::vec_dot_q32::<$D, BlockIq4Nl>;
            vec_dot_q2_k_q8_k, mat_vec_q2_k_q8_k(BlockQ2K, BlockQ8K) => super::vec_dot_kq::<$D, BlockQ2K>;
            vec_dot_q3_k_q8_k, mat_vec_q3_k_q8_k(BlockQ3K, BlockQ8K) => super::vec_dot_kq::<$D, BlockQ3K>;
            vec_dot_q5_k_q8_k, mat_vec_q5_k_q8_k(BlockQ5K, BlockQ8K) => super::vec_dot_kq::<$D, BlockQ5K>;
            vec_dot_iq4_xs_q8_k, mat_vec_iq4_xs_q8_k(BlockIq4Xs, BlockQ8K) => super::vec_dot_kq::<$D, BlockIq4Xs>;
        }
    };
    (@fns $($dot:ident, $mv:ident($W:ty, $A:ty) => $generic:expr;)*) => {$(
        #[target_feature(enable = "neon")]
        pub unsafe fn $dot(w: &[$W], a: &[$A]) -> f32 {
            $generic(w, a)
        }

        /// `out[r] = dot(row r, a)` for consecutive rows of `a.len()` blocks each.
        #[target_feature(enable = "neon")]
        pub unsafe fn $mv(w: &[$W], a: &[$A], out: &mut [f32]) {
            super::rows(w, a, out, |w, a| unsafe { $dot(w, a) })
        }
    )*};
}
pub(crate) use int_kernels;

/// The `pub unsafe fn` entry points of a set's tile kernels: `$name` runs `$drive::<$kernel>`,
/// the driver that walks the tiles and tokens (extents checked by dispatch's wrappers).
macro_rules! tile_entries {
    ($drive:ident: $($name:ident => $kernel:ty;)*) => {$(
        /// `out[t * stride + r] = row r · token t` on 8-row tiles (extents checked by the caller).
        #[target_feature(enable = "neon")]
        pub unsafe fn $name(cols: usize, tiles: &[u8], n_rows: usize, act: &[u8], n_tok: usize, out: $crate::quant::packed::OutRows<'_>, stride: usize) {
            $drive::<$kernel>(cols, tiles, n_rows, act, n_tok, out, stride)
        }
    )*};
}
pub(crate) use tile_entries;
