//! The 16-row tile layout of the AVX-512 VNNI kernels (MNN-LLM's h_p = 16, l_p = 4).
//!
//! `vpdpbusd` adds, in each of 16 i32 lanes, four u8 × i8 products. A tile stores 16 weight rows
//! so that one 64-byte vector holds 4 consecutive quants of each row (lane r = row r), and the
//! kernel multiplies it by 4 activation quants broadcast to every lane: each lane accumulates its
//! own row, no horizontal sums, 16 outputs per vector. Weight quants are stored unsigned (the
//! kernels subtract the format's offset through the activation sums, exactly, in integers).
//!
//! A tile is its blocks in order, each block (16 rows of one ggml block) its quant vectors then
//! its scales (f16 exactly as in the file; unpacked 6-bit k-quant scales as bytes): decode
//! reads a tile as one sequential stream, which the hardware prefetchers follow. Vector `v` of
//! a block has lane `r` = bytes `4v..4v+4` of row `r`'s ggml quants, which for the nibble formats
//! puts elements `4v..4v+4` in the low nibbles and the ones 16 (32 for Q4_K) further on in the
//! high nibbles, as ggml orders them. Sizes equal ggml's except Q4_K and Q5_K (+64 bytes per
//! 16 rows and super-block, 2.8% and 2.3%).
//!
//! | type | one block of 16 rows, in this order |
//! |---|---|
//! | Q4_0, IQ4_NL | qs 4×64, d 16×f16 |
//! | Q4_1 | qs 4×64, d 16×f16, m 16×f16 |
//! | Q5_0 | qs 4×64, high bits 8×u64 (mask of vector v's low nibbles, then its high nibbles), d |
//! | Q5_1 | qs 4×64, high bits as Q5_0's, d 16×f16, m 16×f16 |
//! | Q8_0 | qs+128 8×64 (u8), d |
//! | Q4_K | qs 32×64, scales `[pair][row][2]` u8, mins `[pair][row][2]` u8, d 16×f16, dmin 16×f16 |
//! | Q5_K | qs 32×64, qh 8×64, then as Q4_K |
//! | Q6_K | ql 32×64, qh 16×64, scales `[pair][row][2]` i8, d 16×f16 |
//!
//! Q5_K: qs as Q4_K's; qh vector `h` holds `qh[4h..]`, whose bits `2g` and `2g + 1` are the
//! fifth bits of the low and high nibbles of qs vector `8g + h`.
//!
//! Q6_K: ql vector `16h + 8kk + l4` holds `ql[64h + 32kk + 4l4..]` (low nibbles: elements
//! `128h + 32kk + 4l4..`, high nibbles the ones 64 further on); qh vector `8h + l4` holds
//! `qh[32h + 4l4..]`, whose bit pairs `2k..2k+2` are the top bits of element `128h + 32k + 4l4..`.

use super::tiles::BlockLayout;
use crate::quant::blocks::*;
use crate::quant::GgmlType;

/// Rows per tile.
pub(crate) const ROWS: usize = 16;

/// Where a block's fields lie (see the table above).
pub(crate) fn block_layout(ty: GgmlType) -> Option<BlockLayout> {
    use GgmlType::*;
    let l = BlockLayout::new;
    match ty {
        // a: d
        Q4_0 | IQ4_NL => l(288, 256, 0, 0, 0),
        // a: d, b: m
        Q4_1 => l(320, 256, 288, 0, 0),
        // a: high-bit masks, b: d
        Q5_0 => l(352, 256, 320, 0, 0),
        // a: high-bit masks, b: m, c: d
        Q5_1 => l(384, 256, 352, 320, 0),
        // a: d
        Q8_0 => l(544, 512, 0, 0, 0),
        // a: scales, b: mins, c: d, d: dmin
        Q4_K => l(2368, 2048, 2176, 2304, 2336),
        Q5_K => l(2880, 2560, 2688, 2816, 2848),
        // a: scales, b: d
        Q6_K => l(3360, 3072, 3328, 0, 0),
        _ => None,
    }
}

pub(crate) fn tile_bytes(ty: GgmlType, cols: usize) -> Option<usize> {
    block_layout(ty)?.tile_bytes(ty, cols)
}

/// Builds one tile (see the module documentation) from whole ggml rows; absent rows stay zero,
/// except Q8_0's biased quants, which are written for them too (zero scales keep them inert).
/// Works on the bytes directly (block field offsets as in `blocks`): this runs over every
/// weight at load, so it should go at memory speed.
pub(crate) fn pack_tile(ty: GgmlType, cols: usize, rows: &[u8], tile: &mut [u8]) {
    use GgmlType::*;
    let nb = cols / ty.block_size();
    let (rb, bb) = (ty.row_bytes(cols), ty.block_bytes());
    if rb == 0 || Some(tile.len()) != tile_bytes(ty, cols) {
        return;
    }
    let Some(o) = block_layout(ty) else { return };
    if ty == Q8_0 && rows.len() < ROWS * rb {
        // Biased quants for the padding rows of a partial tile: q + 128 with q = 0.
        for blk in tile[..o.size * nb].chunks_exact_mut(o.size) {
            blk[..o.a].fill(128);
        }
    }
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
                        for v in 0..4 {
                            // Bits 4r..4r+4 of the vector's two 64-bit masks.
                            let (lo, hi) = ((qh >> (4 * v)) & 0xF, (qh >> (16 + 4 * v)) & 0xF);
                            let m = o.a + 16 * v;
                            blk[m + r / 2] |= (lo as u8) << (4 * (r % 2));
                            blk[m + 8 + r / 2] |= (hi as u8) << (4 * (r % 2));
                        }
                    }
                }
                Q8_0 => {
                    // (q as i8) + 128 is q ^ 0x80, eight at a time.
                    let mut biased = [0u8; 32];
                    for (d, s) in biased.chunks_exact_mut(8).zip(x[2..34].chunks_exact(8)) {
                        let v = u64::from_le_bytes(<[u8; 8]>::try_from(s).unwrap_or([0; 8])) ^ 0x8080_8080_8080_8080;
                        d.copy_from_slice(&v.to_le_bytes());
                    }
                    lanes::<8>(blk, r, &biased);
                    two(blk, o.a, &x[..2]);
                }
                Q4_K | Q5_K => {
                    let qs = if ty == Q5_K { 48 } else { 16 };
                    for g in 0..4 {
                        lanes::<8>(&mut blk[512 * g..], r, &x[qs + 32 * g..]);
                    }
                    if ty == Q5_K {
                        lanes::<8>(&mut blk[2048..], r, &x[16..48]);
                    }
                    let sm = q4k_scales_mins(x[4..16].try_into().unwrap_or(&[0; 12]));
                    for p in 0..4 {
                        two(blk, o.a + 32 * p, &sm[2 * p..]);
                        two(blk, o.b + 32 * p, &sm[8 + 2 * p..]);
                    }
                    two(blk, o.c, &x[..2]);
                    two(blk, o.d, &x[2..4]);
                }
                Q6_K => {
                    // ql: vectors 16h + 8kk + l4 hold ql[64h + 32kk + 4l4..], i.e. in ql order.
                    lanes::<32>(blk, r, &x[..128]);
                    lanes::<16>(&mut blk[2048..], r, &x[128..192]);
                    for p in 0..8 {
                        two(blk, o.a + 32 * p, &x[192 + 2 * p..]);
                    }
                    two(blk, o.b, &x[208..210]);
                }
                _ => return,
            }
        }
    }
}

/// Row `r`'s `4 * N` bytes `src` into lane `r` of `N` consecutive 64-byte vectors of `dst`.
#[inline]
fn lanes<const N: usize>(dst: &mut [u8], r: usize, src: &[u8]) {
    let (dst, src) = (&mut dst[..64 * N], &src[..4 * N]);
    for (v, chunk) in src.chunks_exact(4).enumerate() {
        dst[64 * v + 4 * r..64 * v + 4 * r + 4].copy_from_slice(chunk);
    }
}
