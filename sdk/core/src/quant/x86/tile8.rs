//! The 8-row tile layout of the AVX2 packed kernels (MNN-LLM's AVX2 reorder: h_p = 8, l_p = 4).
//!
//! A tile stores 8 weight rows so that one 32-byte vector holds 4 consecutive quants of each row
//! (lane r = row r): `vpmaddubsw` multiplies it by 4 activation quants broadcast to every lane,
//! `vpmaddwd` sums the pairs, and each lane accumulates its own row, with no horizontal sums.
//! The nibble and 6-bit formats are stored unsigned (the kernels take the format's offset off
//! exactly through the activation sums); Q8_0 keeps its signed quants, because u8 × i8 pair sums
//! of biased bytes (up to 255) would saturate `vpmaddubsw`'s i16.
//!
//! A tile is its blocks in order, each block (8 rows of one ggml block) its quant vectors then
//! its scales (f16 exactly as in the file; unpacked 6-bit k-quant scales as bytes), so decode
//! reads a tile as one sequential stream. Vector `v` of a block has lane `r` = bytes `4v..4v+4`
//! of row `r`'s ggml quants, which for the nibble formats puts elements `4v..4v+4` in the low
//! nibbles and the ones 16 (32 for Q4_K) further on in the high nibbles, as ggml orders them.
//! Sizes equal ggml's except Q4_K and Q5_K (+32 bytes per 8 rows and super-block, 2.8% and
//! 2.3%).
//!
//! | type | one block of 8 rows, in this order |
//! |---|---|
//! | Q4_0, IQ4_NL | qs 4×32, d 8×f16 |
//! | Q4_1 | qs 4×32, d 8×f16, m 8×f16 |
//! | Q5_0 | qs 4×32, high bits 32 (see below), d 8×f16 |
//! | Q5_1 | qs 4×32, high bits 32 (as Q5_0's), d 8×f16, m 8×f16 |
//! | Q8_0 | qs 8×32 (i8), d 8×f16 |
//! | Q4_K | qs 32×32, scales `[pair][row][2]` u8, mins `[pair][row][2]` u8, d 8×f16, dmin 8×f16 |
//! | Q5_K | qs 32×32, qh 8×32, then as Q4_K |
//! | Q6_K | ql 32×32, qh 16×32, scales `[pair][row][2]` i8, d 8×f16 |
//!
//! Q5_K: qs as Q4_K's; qh vector `h` holds `qh[4h..]`, whose bits `2g` and `2g + 1` are the
//! fifth bits of the low and high nibbles of qs vector `8g + h`.
//!
//! Q5_0, Q5_1: byte `4r + i` of the high-bit vector holds, in bit `v`, the fifth bit of the element in
//! lane `r`, position `i` of nibble vector `v`'s low nibbles, and in bit `4 + v` that of its high
//! nibbles: one shift and one mask put either at bit 4 of every byte.
//!
//! Q6_K: ql vector `16h + 8kk + l4` holds `ql[64h + 32kk + 4l4..]` (low nibbles: elements
//! `128h + 32kk + 4l4..`, high nibbles the ones 64 further on); qh vector `8h + l4` holds
//! `qh[32h + 4l4..]`, whose bit pairs `2k..2k+2` are the top bits of element `128h + 32k + 4l4..`.

use super::tiles::BlockLayout;
use crate::quant::blocks::*;
use crate::quant::GgmlType;

/// Rows per tile.
pub(crate) const ROWS: usize = 8;

/// Bytes of one vector: 4 quant bytes of each row.
const VEC: usize = 4 * ROWS;

/// Where a block's fields lie (see the table above).
pub(crate) fn block_layout(ty: GgmlType) -> Option<BlockLayout> {
    use GgmlType::*;
    let l = BlockLayout::new;
    match ty {
        // a: d
        Q4_0 | IQ4_NL => l(144, 128, 0, 0, 0),
        // a: d, b: m
        Q4_1 => l(160, 128, 144, 0, 0),
        // a: high bits, b: d
        Q5_0 => l(176, 128, 160, 0, 0),
        // a: high bits, b: m, c: d
        Q5_1 => l(192, 128, 176, 160, 0),
        // a: d
        Q8_0 => l(272, 256, 0, 0, 0),
        // a: scales, b: mins, c: d, d: dmin
        Q4_K => l(1184, 1024, 1088, 1152, 1168),
        Q5_K => l(1440, 1280, 1344, 1408, 1424),
        // a: scales, b: d
        Q6_K => l(1680, 1536, 1664, 0, 0),
        _ => None,
    }
}

pub(crate) fn tile_bytes(ty: GgmlType, cols: usize) -> Option<usize> {
    block_layout(ty)?.tile_bytes(ty, cols)
}

/// Builds one tile (see the module documentation) from whole ggml rows; absent rows stay zero.
/// Works on the bytes directly (block field offsets as in `blocks`): this runs over every
/// weight at load, so it should go at memory speed.
pub(crate) fn pack_tile(ty: GgmlType, cols: usize, rows: &[u8], tile: &mut [u8]) {
    use GgmlType::*;
    let (rb, bb) = (ty.row_bytes(cols), ty.block_bytes());
    if rb == 0 || Some(tile.len()) != tile_bytes(ty, cols) {
        return;
    }
    let Some(o) = block_layout(ty) else { return };
    for (r, row) in rows.chunks_exact(rb).take(ROWS).enumerate() {
        for (b, x) in row.chunks_exact(bb).enumerate() {
            let blk = &mut tile[o.size * b..o.size * (b + 1)];
            // The f16 (or byte pair) of row r in the scale field at `at`.
            let two = |blk: &mut [u8], at: usize, v: &[u8]| blk[at + 2 * r..at + 2 * r + 2].copy_from_slice(&v[..2]);
            match ty {
                Q4_0 | IQ4_NL | Q4_1 | Q5_0 | Q5_1 => {
                    lanes::<4>(blk, r, &x[bb - 16..]);
                    // d leads every block; Q4_1's and Q5_1's m follows it, then Q5_x's qh.
                    let d_at = match ty {
                        Q5_0 => o.b,
                        Q5_1 => o.c,
                        _ => o.a,
                    };
                    two(blk, d_at, &x[..2]);
                    if matches!(ty, Q4_1 | Q5_1) {
                        two(blk, o.b, &x[2..4]);
                    }
                    if matches!(ty, Q5_0 | Q5_1) {
                        let at = if ty == Q5_0 { 2 } else { 4 };
                        let qh = u32::from_le_bytes([x[at], x[at + 1], x[at + 2], x[at + 3]]);
                        blk[o.a + 4 * r..o.a + 4 * r + 4].copy_from_slice(&q5_high_bits(qh));
                    }
                }
                Q8_0 => {
                    lanes::<8>(blk, r, &x[2..34]);
                    two(blk, o.a, &x[..2]);
                }
                Q4_K | Q5_K => {
                    if ty == Q5_K {
                        lanes::<32>(blk, r, &x[48..176]);
                        lanes::<8>(&mut blk[32 * VEC..], r, &x[16..48]);
                    } else {
                        lanes::<32>(blk, r, &x[16..144]);
                    }
                    let sm = q4k_scales_mins(x[4..16].try_into().unwrap_or(&[0; 12]));
                    for p in 0..4 {
                        two(blk, o.a + VEC / 2 * p, &sm[2 * p..]);
                        two(blk, o.b + VEC / 2 * p, &sm[8 + 2 * p..]);
                    }
                    two(blk, o.c, &x[..2]);
                    two(blk, o.d, &x[2..4]);
                }
                Q6_K => {
                    // ql: vectors 16h + 8kk + l4 hold ql[64h + 32kk + 4l4..], i.e. in ql order.
                    lanes::<32>(blk, r, &x[..128]);
                    lanes::<16>(&mut blk[32 * VEC..], r, &x[128..192]);
                    for p in 0..8 {
                        two(blk, o.a + VEC / 2 * p, &x[192 + 2 * p..]);
                    }
                    two(blk, o.b, &x[208..210]);
                }
                _ => return,
            }
        }
    }
}

/// One row's four bytes of the Q5_0 high-bit vector from its block's `qh`: byte `i`, bit `v` =
/// `qh` bit `4v + i` (low nibbles of vector `v`), bit `4 + v` = `qh` bit `16 + 4v + i` (high).
#[inline]
fn q5_high_bits(qh: u32) -> [u8; 4] {
    let mut out = [0u8; 4];
    for (i, o) in out.iter_mut().enumerate() {
        for v in 0..4 {
            let lo = (qh >> (4 * v + i)) & 1;
            let hi = (qh >> (16 + 4 * v + i)) & 1;
            *o |= ((lo << v) | (hi << (4 + v))) as u8;
        }
    }
    out
}

/// Row `r`'s `4 * N` bytes `src` into lane `r` of `N` consecutive 32-byte vectors of `dst`.
#[inline]
fn lanes<const N: usize>(dst: &mut [u8], r: usize, src: &[u8]) {
    let (dst, src) = (&mut dst[..VEC * N], &src[..4 * N]);
    for (v, chunk) in src.chunks_exact(4).enumerate() {
        dst[VEC * v + 4 * r..VEC * v + 4 * r + 4].copy_from_slice(chunk);
    }
}
