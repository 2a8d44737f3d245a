//! The ARMv8.2 dotprod set: `sdot` sums four signed byte products into each i32 lane, a quarter
//! of the instructions of `smull` + `sadalp`. On ggml's layout, the shared kernels of the parent
//! module over [`Sdot`]; on weights repacked into 8-row tiles ([`super::tile8`]), one
//! matrix-product kernel per type built on `sdot` by element. Run only where `dotprod` is
//! detected.

use std::arch::aarch64::*;

use super::tile8::{BlockLayout, TileWalk, GROUP, ROWS};
use crate::quant::packed::{ActRow as Act, OutRows};
use crate::quant::GgmlType;

/// The `sdot` dot product.
pub struct Sdot;

impl super::IntDot for Sdot {
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn dot16(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        let mut acc = acc;
        // The `vdotq_s32` intrinsic is not stable on our minimum Rust; the directive lets the
        // assembler take the instruction without compiling the whole crate for dotprod.
        std::arch::asm!(
            ".arch_extension dotprod",
            "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags),
        );
        acc
    }
}

super::int_kernels!(Sdot);

// ---------------------------------------------------------------------------------------------
// Kernels on 8-row tiles (repacked weights, `super::tile8`)
//
// One kernel per weight type serves decode and prefill: tiles × tokens, 4 tokens at a time,
// then 2 and 1. Every instance performs, per (row, token) and block in order, the same
// operations: an exact integer dot product (`sdot` by element, any order), then the same f32
// steps, so a token's results are bit-identical whatever the token count, tile or thread.
//
// The entry points read through raw pointers whose extents the byte-level wrappers in
// `dispatch` have checked: `tiles` holds `ceil(n_rows / 8)` tiles of `tile_bytes(ty, cols)`,
// `act` `n_tok` rows of `PackedAct::row_bytes(cols)`, `out` reaches
// `(n_tok - 1) * stride + n_rows` with `stride >= n_rows` when `n_tok > 1`.

/// Four column groups of a tile block, each as its rows 0..4 and 4..8.
type Groups = [[int8x16_t; 2]; 4];

/// `acc[h] += Σ_i w[i][h] · a.4b[i]`: each column group `i` times activation quants
/// `4i..4i + 4`, rows 0..4 (`h` = 0) and 4..8 (`h` = 1), one lane per row.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn sdot4(acc: &mut [int32x4_t; 2], w: &Groups, a: int8x16_t) {
    let [mut a0, mut a1] = *acc;
    std::arch::asm!(
        ".arch_extension dotprod",
        "sdot {a0:v}.4s, {w00:v}.16b, {x:v}.4b[0]",
        "sdot {a1:v}.4s, {w01:v}.16b, {x:v}.4b[0]",
        "sdot {a0:v}.4s, {w10:v}.16b, {x:v}.4b[1]",
        "sdot {a1:v}.4s, {w11:v}.16b, {x:v}.4b[1]",
        "sdot {a0:v}.4s, {w20:v}.16b, {x:v}.4b[2]",
        "sdot {a1:v}.4s, {w21:v}.16b, {x:v}.4b[2]",
        "sdot {a0:v}.4s, {w30:v}.16b, {x:v}.4b[3]",
        "sdot {a1:v}.4s, {w31:v}.16b, {x:v}.4b[3]",
        a0 = inout(vreg) a0,
        a1 = inout(vreg) a1,
        w00 = in(vreg) w[0][0],
        w01 = in(vreg) w[0][1],
        w10 = in(vreg) w[1][0],
        w11 = in(vreg) w[1][1],
        w20 = in(vreg) w[2][0],
        w21 = in(vreg) w[2][1],
        w30 = in(vreg) w[3][0],
        w31 = in(vreg) w[3][1],
        x = in(vreg) a,
        options(pure, nomem, nostack, preserves_flags),
    );
    *acc = [a0, a1];
}

/// The 16 activation quants of `a` from element `at`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn quants16(a: &Act, at: usize) -> int8x16_t {
    vld1q_s8(a.qs.add(at).cast())
}

/// The 32 bytes of a group at `p`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn load_group(p: *const u8) -> [uint8x16_t; 2] {
    [vld1q_u8(p), vld1q_u8(p.add(16))]
}

#[inline]
#[target_feature(enable = "neon")]
unsafe fn signed(g: [[uint8x16_t; 2]; 4]) -> Groups {
    g.map(|v| v.map(|x| vreinterpretq_s8_u8(x)))
}

/// The low (`h` = 0) or high (`h` = 1) nibbles of the 4 groups at `qs`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn nibbles4(qs: *const u8, h: usize) -> [[uint8x16_t; 2]; 4] {
    let m4 = vdupq_n_u8(0x0F);
    std::array::from_fn(|v| {
        load_group(qs.add(GROUP * v)).map(|x| if h == 0 { vandq_u8(x, m4) } else { vshrq_n_u8(x, 4) })
    })
}

/// 8 f16 (one per row) at `p` -> f32, rows 0..4 and 4..8.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn f16x8(p: *const u8) -> [float32x4_t; 2] {
    let (lo, hi) = super::fp16x8(vld1q_u16(p.cast()));
    [lo, hi]
}

/// 8 bytes (one per row) at `p`, unsigned, -> i32, rows 0..4 and 4..8.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn widen_u8(p: *const u8) -> [int32x4_t; 2] {
    let w = vmovl_u8(vld1_u8(p));
    [vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(w))), vreinterpretq_s32_u32(vmovl_high_u16(w))]
}

/// 8 bytes (one per row) at `p`, signed, -> i32, rows 0..4 and 4..8.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn widen_i8(p: *const u8) -> [int32x4_t; 2] {
    let w = vmovl_s8(vld1_s8(p.cast()));
    [vmovl_s16(vget_low_s16(w)), vmovl_high_s16(w)]
}

/// Per-token accumulators (rows 0..4, 4..8) -> the 8 rows' results.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn rows_of<const E: usize>(acc: [[float32x4_t; 2]; E]) -> [[f32; ROWS]; E] {
    acc.map(|[lo, hi]| {
        let mut r = [0.0; ROWS];
        vst1q_f32(r.as_mut_ptr(), lo);
        vst1q_f32(r.as_mut_ptr().add(4), hi);
        r
    })
}

/// A weight type's kernel on one tile for `E` tokens.
trait TileKernel {
    const TY: GgmlType;
    unsafe fn tile<const E: usize>(tile: *const u8, nb: usize, o: &BlockLayout, a: &[Act; E]) -> [[f32; ROWS]; E];
}

/// Runs `K` over every tile and token (see the section's documentation for the extents).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn drive<K: TileKernel>(
    cols: usize,
    tiles: &[u8],
    n_rows: usize,
    act: &[u8],
    n_tok: usize,
    mut out: OutRows<'_>,
    stride: usize,
) {
    let Some(walk) = TileWalk::new(K::TY, cols, tiles, n_rows, act) else { return };
    for (tile, r0, valid) in walk.tiles() {
        let mut t = 0;
        macro_rules! tokens {
            ($e:literal) => {{
                let a: [Act; $e] = std::array::from_fn(|e| walk.act(t + e));
                for (e, sums) in K::tile::<$e>(tile.as_ptr(), walk.nb, &walk.o, &a).iter().enumerate() {
                    out.segment((t + e) * stride + r0, valid).copy_from_slice(&sums[..valid]);
                }
                t += $e;
            }};
        }
        while t < n_tok {
            match n_tok - t {
                4.. => tokens!(4),
                2 | 3 => tokens!(2),
                _ => tokens!(1),
            }
        }
    }
}

// 32-element formats

/// How a 32-element format's tile block reads.
trait Q32 {
    const TY: GgmlType;
    /// log2 of the quant offset taken off exactly through the activation block sums (0: none).
    const SHIFT: i32 = 0;
    /// Whether the block adds `m · s` (Q4_1).
    const M: bool = false;
    /// The quants that multiply activation quants `16h..16h + 16` of the block, as signed bytes.
    unsafe fn quants(blk: *const u8, o: &BlockLayout, h: usize) -> Groups;
}

/// Per block: the exact integer sum (less the offset), then `acc = fma(float(isum), d_w · d_a,
/// acc)` and, for Q4_1, `acc = fma(m, s, acc)`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn tile_q32<T: Q32, const E: usize>(
    tile: *const u8,
    nb: usize,
    o: &BlockLayout,
    a: &[Act; E],
) -> [[f32; ROWS]; E] {
    let mut acc = [[vdupq_n_f32(0.0); 2]; E];
    for b in 0..nb {
        let blk = tile.add(o.size * b);
        let mut isum = [[vdupq_n_s32(0); 2]; E];
        for h in 0..2 {
            let w = T::quants(blk, o, h);
            for (is, a) in isum.iter_mut().zip(a) {
                sdot4(is, &w, quants16(a, 32 * b + 16 * h));
            }
        }
        let dw = f16x8(blk.add(o.d));
        let mw = if T::M { f16x8(blk.add(o.m)) } else { dw };
        for ((acc, is), a) in acc.iter_mut().zip(&isum).zip(a) {
            let off = vdupq_n_s32(if T::SHIFT > 0 { a.sum(b) << T::SHIFT } else { 0 });
            let da = a.d(b);
            for k in 0..2 {
                let i = vsubq_s32(is[k], off);
                acc[k] = vfmaq_f32(acc[k], vcvtq_f32_s32(i), vmulq_n_f32(dw[k], da));
                if T::M {
                    acc[k] = vfmaq_n_f32(acc[k], mw[k], a.s(b));
                }
            }
        }
    }
    rows_of(acc)
}

struct TileQ40;
struct TileQ41;
struct TileQ50;
struct TileQ51;
struct TileQ80;
struct TileIq4Nl;

impl Q32 for TileQ40 {
    const TY: GgmlType = GgmlType::Q4_0;
    const SHIFT: i32 = 3;
    unsafe fn quants(blk: *const u8, _: &BlockLayout, h: usize) -> Groups {
        signed(nibbles4(blk, h))
    }
}

impl Q32 for TileQ41 {
    const TY: GgmlType = GgmlType::Q4_1;
    const M: bool = true;
    unsafe fn quants(blk: *const u8, _: &BlockLayout, h: usize) -> Groups {
        signed(nibbles4(blk, h))
    }
}

impl Q32 for TileQ50 {
    const TY: GgmlType = GgmlType::Q5_0;
    unsafe fn quants(blk: *const u8, o: &BlockLayout, h: usize) -> Groups {
        // q - 16 as a signed byte is the nibble with 0xF0 or'ed in where the fifth bit is clear.
        let fifth = load_group(blk.add(o.qh));
        let f0 = vdupq_n_u8(0xF0);
        let nib = nibbles4(blk, h);
        std::array::from_fn(|v| {
            let bit = vdupq_n_u8(1 << (4 * h + v));
            std::array::from_fn(|k| vreinterpretq_s8_u8(vorrq_u8(nib[v][k], vbicq_u8(f0, vtstq_u8(fifth[k], bit)))))
        })
    }
}

impl Q32 for TileQ51 {
    const TY: GgmlType = GgmlType::Q5_1;
    const M: bool = true;
    unsafe fn quants(blk: *const u8, o: &BlockLayout, h: usize) -> Groups {
        // Unsigned 5-bit quants (0..32, positive as signed bytes): the nibble with 0x10 where
        // the fifth bit is set.
        let fifth = load_group(blk.add(o.qh));
        let b4 = vdupq_n_u8(0x10);
        let nib = nibbles4(blk, h);
        std::array::from_fn(|v| {
            let bit = vdupq_n_u8(1 << (4 * h + v));
            std::array::from_fn(|k| vreinterpretq_s8_u8(vorrq_u8(nib[v][k], vandq_u8(b4, vtstq_u8(fifth[k], bit)))))
        })
    }
}

impl Q32 for TileIq4Nl {
    const TY: GgmlType = GgmlType::IQ4_NL;
    unsafe fn quants(blk: *const u8, _: &BlockLayout, h: usize) -> Groups {
        // The nibbles looked up in ggml's grid (signed bytes, as `sdot` takes them).
        let grid = vld1q_s8(crate::quant::blocks::KVALUES_IQ4NL.as_ptr());
        nibbles4(blk, h).map(|v| v.map(|x| vqtbl1q_s8(grid, x)))
    }
}

impl Q32 for TileQ80 {
    const TY: GgmlType = GgmlType::Q8_0;
    unsafe fn quants(blk: *const u8, _: &BlockLayout, h: usize) -> Groups {
        signed(std::array::from_fn(|v| load_group(blk.add(GROUP * (4 * h + v)))))
    }
}

macro_rules! q32_tile_kernel {
    ($($t:ty),*) => {$(
        impl TileKernel for $t {
            const TY: GgmlType = <$t as Q32>::TY;
            unsafe fn tile<const E: usize>(tile: *const u8, nb: usize, o: &BlockLayout, a: &[Act; E]) -> [[f32; ROWS]; E] {
                tile_q32::<$t, E>(tile, nb, o, a)
            }
        }
    )*};
}

q32_tile_kernel!(TileQ40, TileQ41, TileQ50, TileQ51, TileQ80, TileIq4Nl);

// k-quants

/// Q4_K: per sub-block an exact dot product times its 6-bit scale, summed in i32 as ggml does;
/// the mins through the activation's 32-element sums.
struct TileQ4K;

impl TileKernel for TileQ4K {
    const TY: GgmlType = GgmlType::Q4_K;

    #[inline]
    unsafe fn tile<const E: usize>(tile: *const u8, nb: usize, o: &BlockLayout, a: &[Act; E]) -> [[f32; ROWS]; E] {
        tile_q45k::<E, false>(tile, nb, o, a)
    }
}

/// Q5_K: Q4_K with each quant's fifth bit taken from the tile's qh groups.
struct TileQ5K;

impl TileKernel for TileQ5K {
    const TY: GgmlType = GgmlType::Q5_K;

    #[inline]
    unsafe fn tile<const E: usize>(tile: *const u8, nb: usize, o: &BlockLayout, a: &[Act; E]) -> [[f32; ROWS]; E] {
        tile_q45k::<E, true>(tile, nb, o, a)
    }
}

/// The Q4_K and (`Q5`) Q5_K tile kernel: the same sums, Q5_K's quants one bit wider.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn tile_q45k<const E: usize, const Q5: bool>(
    tile: *const u8,
    nb: usize,
    o: &BlockLayout,
    a: &[Act; E],
) -> [[f32; ROWS]; E] {
    let (m4, b4) = (vdupq_n_u8(0x0F), vdupq_n_u8(0x10));
    let mut acc = [[vdupq_n_f32(0.0); 2]; E];
    for b in 0..nb {
        let blk = tile.add(o.size * b);
        let mut sumi = [[vdupq_n_s32(0); 2]; E];
        let mut summ = [[vdupq_n_s32(0); 2]; E];
        for j in 0..8 {
            let mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(blk.add(o.sc + ROWS * (8 + j)))));
            for (sm, a) in summ.iter_mut().zip(a) {
                let s = a.sum32(b, j);
                sm[0] = vmlal_n_s16(sm[0], vget_low_s16(mins), s);
                sm[1] = vmlal_high_n_s16(sm[1], mins, s);
            }
        }
        for g in 0..4 {
            // Q5_K: bits 2g and 2g + 1 of the qh bytes to bit 4 (shifts by a negative count go right).
            let (to_lo, to_hi) = (vdupq_n_s8(4 - 2 * g as i8), vdupq_n_s8(3 - 2 * g as i8));
            let mut il = [[vdupq_n_s32(0); 2]; E];
            let mut ih = [[vdupq_n_s32(0); 2]; E];
            for q in 0..2 {
                let raw: [[uint8x16_t; 2]; 4] = std::array::from_fn(|v| load_group(blk.add(GROUP * (8 * g + 4 * q + v))));
                let mut lo = raw.map(|x| x.map(|x| vandq_u8(x, m4)));
                let mut hi = raw.map(|x| x.map(|x| vshrq_n_u8(x, 4)));
                if Q5 {
                    for v in 0..4 {
                        let bits = load_group(blk.add(o.qh + GROUP * (4 * q + v)));
                        for i in 0..2 {
                            lo[v][i] = vorrq_u8(lo[v][i], vandq_u8(vshlq_u8(bits[i], to_lo), b4));
                            hi[v][i] = vorrq_u8(hi[v][i], vandq_u8(vshlq_u8(bits[i], to_hi), b4));
                        }
                    }
                }
                let (lo, hi) = (signed(lo), signed(hi));
                for e in 0..E {
                    let at = 256 * b + 64 * g + 16 * q;
                    sdot4(&mut il[e], &lo, quants16(&a[e], at));
                    sdot4(&mut ih[e], &hi, quants16(&a[e], at + 32));
                }
            }
            let (sl, sh) = (widen_u8(blk.add(o.sc + ROWS * 2 * g)), widen_u8(blk.add(o.sc + ROWS * (2 * g + 1))));
            for e in 0..E {
                for k in 0..2 {
                    sumi[e][k] = vmlaq_s32(vmlaq_s32(sumi[e][k], il[e][k], sl[k]), ih[e][k], sh[k]);
                }
            }
        }
        let (dw, dminw) = (f16x8(blk.add(o.d)), f16x8(blk.add(o.m)));
        for e in 0..E {
            let da = a[e].d(b);
            for k in 0..2 {
                acc[e][k] = vfmaq_f32(acc[e][k], vcvtq_f32_s32(sumi[e][k]), vmulq_n_f32(dw[k], da));
                acc[e][k] = vfmsq_f32(acc[e][k], vcvtq_f32_s32(summ[e][k]), vmulq_n_f32(dminw[k], da));
            }
        }
    }
    rows_of(acc)
}

/// Q6_K: 6-bit quants rebuilt from the nibble and top-bit groups, less 32, as signed bytes;
/// per 16-element sub-block an exact dot product times its scale, summed in i32.
struct TileQ6K;

impl TileKernel for TileQ6K {
    const TY: GgmlType = GgmlType::Q6_K;

    #[inline]
    unsafe fn tile<const E: usize>(tile: *const u8, nb: usize, o: &BlockLayout, a: &[Act; E]) -> [[f32; ROWS]; E] {
        let (m4, m30, m32) = (vdupq_n_u8(0x0F), vdupq_n_u8(0x30), vdupq_n_s8(32));
        let mut acc = [[vdupq_n_f32(0.0); 2]; E];
        for b in 0..nb {
            let blk = tile.add(o.size * b);
            let qh = blk.add(o.qh);
            let mut sumi = [[vdupq_n_s32(0); 2]; E];
            for h in 0..2 {
                for k in 0..4 {
                    // Bits 2k..2k + 2 of qh to bits 4..6.
                    let shift = vdupq_n_s8(4 - 2 * k as i8);
                    for half in 0..2 {
                        let w: Groups = std::array::from_fn(|v| {
                            let l4 = 4 * half + v;
                            let low = load_group(blk.add(GROUP * (16 * h + 8 * (k & 1) + l4)));
                            let top = load_group(qh.add(GROUP * (8 * h + l4)));
                            std::array::from_fn(|i| {
                                let nib = if k < 2 { vandq_u8(low[i], m4) } else { vshrq_n_u8(low[i], 4) };
                                let q = vorrq_u8(nib, vandq_u8(vshlq_u8(top[i], shift), m30));
                                vsubq_s8(vreinterpretq_s8_u8(q), m32)
                            })
                        });
                        let mut is = [[vdupq_n_s32(0); 2]; E];
                        for (is, a) in is.iter_mut().zip(a) {
                            sdot4(is, &w, quants16(a, 256 * b + 128 * h + 32 * k + 16 * half));
                        }
                        let sc = widen_i8(blk.add(o.sc + ROWS * (8 * h + 2 * k + half)));
                        for (s, is) in sumi.iter_mut().zip(&is) {
                            for i in 0..2 {
                                s[i] = vmlaq_s32(s[i], is[i], sc[i]);
                            }
                        }
                    }
                }
            }
            let dw = f16x8(blk.add(o.d));
            for (acc, (s, a)) in acc.iter_mut().zip(sumi.iter().zip(a)) {
                let da = a.d(b);
                for k in 0..2 {
                    acc[k] = vfmaq_f32(acc[k], vcvtq_f32_s32(s[k]), vmulq_n_f32(dw[k], da));
                }
            }
        }
        rows_of(acc)
    }
}

super::tile_entries! { drive:
    mat_mat_q4_0 => TileQ40;
    mat_mat_q4_1 => TileQ41;
    mat_mat_q5_0 => TileQ50;
    mat_mat_q5_1 => TileQ51;
    mat_mat_q8_0 => TileQ80;
    mat_mat_iq4_nl => TileIq4Nl;
    mat_mat_q4_k => TileQ4K;
    mat_mat_q5_k => TileQ5K;
    mat_mat_q6_k => TileQ6K;
}
