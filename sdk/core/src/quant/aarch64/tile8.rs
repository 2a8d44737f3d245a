//! The 8-row tile layout of the dotprod kernels (MNN-LLM's arm82 reorder: h_p = 8, l_p = 4).
//!
//! `sdot` by element (`sdot v.4s, w.16b, a.4b[i]`) adds, in each of 4 i32 lanes, four i8 × i8
//! products against the same 4 activation quants. A tile stores 8 weight rows so that a 16-byte
//! vector holds 4 consecutive quants of 4 rows (lane r = row r), two vectors per group of 4
//! columns (rows 0..4, then 4..8): each lane accumulates its own row, no horizontal sums, and
//! one 16-byte activation load feeds four column groups. Below, a "group" is those 32 bytes:
//! group `v` of a block has bytes `4r..4r + 4` = bytes `4v..4v + 4` of row `r`'s ggml quants,
//! which for the nibble formats puts elements `4v..4v + 4` in the low nibbles and the ones 16
//! (32 for Q4_K) further on in the high nibbles, as ggml orders them.
//!
//! A tile is its blocks in order, each block (8 rows of one ggml block) its quant groups then
//! its scales (f16 exactly as in the file; k-quant scales unpacked to one byte per row), so
//! decode reads a tile as one sequential stream. Nibbles stay unsigned (Q4_0's offset comes off
//! exactly through the activation block sums); Q8_0 stays signed as in the file. Sizes equal
//! ggml's except Q4_K (+32 bytes per 8 rows and super-block, 2.8%).
//!
//! | type | one block of 8 rows, in this order |
//! |---|---|
//! | Q4_0 | qs 4×32, d 8×f16 |
//! | Q4_1 | qs 4×32, d 8×f16, m 8×f16 |
//! | Q5_0 | qs 4×32, fifth bits 32 (byte `4r + j`: bit `v` for the low nibble of group `v`, bit `4 + v` for its high nibble), d |
//! | Q8_0 | qs 8×32 (i8), d 8×f16 |
//! | Q4_K | qs 32×32, scales then mins [16][row] u8, d 8×f16, dmin 8×f16 |
//! | Q6_K | ql 32×32, qh 16×32, scales [16][row] i8, d 8×f16 |
//!
//! Q4_K: group `8g + h` holds `qs[32g + 4h..]` (elements `64g + 4h..` low, `64g + 32 + 4h..`
//! high). Q6_K: ql group `16h + 8kk + l4` holds `ql[64h + 32kk + 4l4..]` (low nibbles: elements
//! `128h + 32kk + 4l4..`, high nibbles the ones 64 further on); qh group `8h + l4` holds
//! `qh[32h + 4l4..]`, whose bit pairs `2k..2k + 2` are the top bits of elements `128h + 32k + 4l4..`.

use crate::quant::blocks::*;
use crate::quant::packed::tile_len;
use crate::quant::GgmlType;

/// Rows per tile.
pub const ROWS: usize = 8;

/// Bytes of one group: 4 quant bytes of each row.
pub const GROUP: usize = 4 * ROWS;

/// Where the fields of one tile block lie, relative to its start, and its size (the quants
/// come first, at 0).
#[derive(Debug, Clone, Copy)]
pub struct BlockLayout {
    pub size: usize,
    /// Q5_0's fifth bits, Q6_K's qh groups.
    pub qh: usize,
    /// k-quants: the unpacked scales (Q4_K: then its mins).
    pub sc: usize,
    /// The 8 f16 scales `d`.
    pub d: usize,
    /// Q4_1's `m`, Q4_K's `dmin` (8 f16).
    pub m: usize,
}

impl BlockLayout {
    pub fn of(ty: GgmlType) -> Option<BlockLayout> {
        use GgmlType::*;
        let l = |size, qh, sc, d, m| Some(BlockLayout { size, qh, sc, d, m });
        match ty {
            Q4_0 => l(144, 0, 0, 128, 0),
            Q4_1 => l(160, 0, 0, 128, 144),
            Q5_0 => l(176, 128, 0, 160, 0),
            Q8_0 => l(272, 0, 0, 256, 0),
            Q4_K => l(1184, 0, 1024, 1152, 1168),
            Q6_K => l(1680, 1024, 1536, 1664, 0),
            _ => None,
        }
    }
}

pub fn tile_bytes(ty: GgmlType, cols: usize) -> Option<usize> {
    tile_len(ty, cols, BlockLayout::of(ty)?.size)
}

/// Builds one tile (see the module documentation) from whole ggml rows; absent rows stay zero.
/// Works on the bytes directly (block field offsets as in `blocks`): this runs over every
/// weight at load, so it should go at memory speed.
pub fn pack_tile(ty: GgmlType, cols: usize, rows: &[u8], tile: &mut [u8]) {
    use GgmlType::*;
    let nb = cols / ty.block_size();
    let (rb, bb) = (ty.row_bytes(cols), ty.block_bytes());
    if rb == 0 || Some(tile.len()) != tile_bytes(ty, cols) {
        return;
    }
    let Some(o) = BlockLayout::of(ty) else { return };
    for (r, row) in rows.chunks_exact(rb).take(ROWS).enumerate() {
        for (blk, x) in tile[..o.size * nb].chunks_exact_mut(o.size).zip(row.chunks_exact(bb)) {
            // The f16 of row r in the scale field at `at`.
            let f16_at = |blk: &mut [u8], at: usize, v: &[u8]| blk[at + 2 * r..at + 2 * r + 2].copy_from_slice(&v[..2]);
            match ty {
                Q4_0 | Q4_1 | Q5_0 => {
                    groups::<4>(blk, r, &x[bb - 16..]);
                    // d leads every block; Q4_1's m follows it.
                    f16_at(blk, o.d, &x[..2]);
                    if ty == Q4_1 {
                        f16_at(blk, o.m, &x[2..4]);
                    }
                    if ty == Q5_0 {
                        let qh = u32::from_le_bytes([x[2], x[3], x[4], x[5]]);
                        for j in 0..4 {
                            let mut bits = 0u32;
                            for v in 0..4 {
                                bits |= (((qh >> (4 * v + j)) & 1) << v) | (((qh >> (16 + 4 * v + j)) & 1) << (4 + v));
                            }
                            blk[o.qh + 4 * r + j] = bits as u8;
                        }
                    }
                }
                Q8_0 => {
                    groups::<8>(blk, r, &x[2..34]);
                    f16_at(blk, o.d, &x[..2]);
                }
                Q4_K => {
                    groups::<32>(blk, r, &x[16..144]);
                    let sm = q4k_scales_mins(x[4..16].try_into().unwrap_or(&[0; 12]));
                    for (k, &s) in sm.iter().enumerate() {
                        blk[o.sc + ROWS * k + r] = s;
                    }
                    f16_at(blk, o.d, &x[..2]);
                    f16_at(blk, o.m, &x[2..4]);
                }
                Q6_K => {
                    groups::<32>(blk, r, &x[..128]);
                    groups::<16>(&mut blk[o.qh..], r, &x[128..192]);
                    for (k, &s) in x[192..208].iter().enumerate() {
                        blk[o.sc + ROWS * k + r] = s;
                    }
                    f16_at(blk, o.d, &x[208..210]);
                }
                _ => return,
            }
        }
    }
}

/// Row `r`'s `4 * N` bytes `src` into lane `r` of `N` consecutive groups of `dst`.
#[inline]
fn groups<const N: usize>(dst: &mut [u8], r: usize, src: &[u8]) {
    let (dst, src) = (&mut dst[..GROUP * N], &src[..4 * N]);
    for (g, chunk) in dst.chunks_exact_mut(GROUP).zip(src.chunks_exact(4)) {
        g[4 * r..4 * r + 4].copy_from_slice(chunk);
    }
}
