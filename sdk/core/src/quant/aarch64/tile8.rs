//! The 8-row tile layouts of the dotprod and i8mm kernels (MNN-LLM's arm82 reorder: h_p = 8,
//! l_p = 4 for `sdot`; l_p = 8 for `smmla`).
//!
//! A tile stores 8 weight rows in column groups: group `v` of a block holds bytes
//! `wv..wv + w` of each row's ggml quants, row `r`'s at bytes `wr..wr + w` of the group, for a
//! width `w` of
//!
//! - 4 ([`pack_tile`], dotprod): `sdot` by element (`sdot v.4s, w.16b, a.4b[i]`) adds, in each
//!   of 4 i32 lanes, four i8 × i8 products against the same 4 activation quants. A group is two
//!   16-byte vectors, rows 0..4 then 4..8, lane r = row r: each lane accumulates its own row,
//!   no horizontal sums, and one 16-byte activation load feeds four groups.
//! - 8 ([`pack_tile_mmla`], i8mm): `smmla` multiplies a 2 × 8 block of a row pair by the 8
//!   quants of two tokens. A group is four 16-byte vectors, one per row pair.
//!
//! For the nibble formats the low nibbles of group `v` are elements `wv..wv + w` and the high
//! nibbles the ones 16 (32 for Q4_K) further on, as ggml orders them.
//!
//! A tile is its blocks in order, each block (8 rows of one ggml block) its quant groups then
//! its scales (f16 exactly as in the file; k-quant scales unpacked to one byte per row), so
//! decode reads a tile as one sequential stream. Nibbles stay unsigned (Q4_0's offset comes off
//! exactly through the activation block sums); Q8_0 stays signed as in the file. Both widths
//! take the same bytes, ggml's except Q4_K and Q5_K (+32 bytes per 8 rows and super-block, 2.8%
//! and 2.3%).
//! Groups below are counted at width 4 (at width 8 there are half as many, twice as wide).
//!
//! | type | one block of 8 rows, in this order |
//! |---|---|
//! | Q4_0 | qs 4×32, d 8×f16 |
//! | IQ4_NL | as Q4_0; width 4 only |
//! | Q4_1 | qs 4×32, d 8×f16, m 8×f16 |
//! | Q5_0 | qs 4×32, fifth bits 32 (byte `4r + j`: bit `v` for the low nibble of group `v`, bit `4 + v` for its high nibble), d; width 4 only |
//! | Q5_1 | qs 4×32, fifth bits 32 (as Q5_0's), d 8×f16, m 8×f16; width 4 only |
//! | Q8_0 | qs 8×32 (i8), d 8×f16 |
//! | Q4_K | qs 32×32, scales then mins [16][row] u8, d 8×f16, dmin 8×f16 |
//! | Q5_K | qs 32×32, qh 8×32, then as Q4_K; width 4 only |
//! | Q6_K | ql 32×32, qh 16×32, scales [16][row] i8, d 8×f16 |
//!
//! Q4_K: group `q` holds `qs[wq..]`; with `g = wq / 32` and `c = wq mod 32`, its low nibbles
//! are elements `64g + c..`, its high nibbles `64g + 32 + c..`. Q6_K: ql group `q` holds
//! `ql[wq..]`; with `h = wq / 64`, `kk = (wq mod 64) / 32`, `c = wq mod 32`, its low nibbles are
//! elements `128h + 32kk + c..`, its high nibbles the ones 64 further on; qh group `q` holds
//! `qh[wq..]`, with `h = wq / 32`, `c = wq mod 32`, whose bit pairs `2k..2k + 2` are the top bits
//! of elements `128h + 32k + c..`. Q5_K: qs as Q4_K's; qh group `q` holds `qh[4q..]`, whose bits
//! `2g` and `2g + 1` are the fifth bits of the low and high nibbles of qs group `8g + q`.

use crate::quant::blocks::*;
use crate::quant::packed::{tile_len, ActOffsets, ActRow, PackedAct};
use crate::quant::GgmlType;

/// Rows per tile.
pub const ROWS: usize = 8;

/// Bytes of one group at width 4 (dotprod): 4 quant bytes of each row.
pub const GROUP: usize = 4 * ROWS;

/// Where the fields of one tile block lie, relative to its start, and its size (the quants
/// come first, at 0).
#[derive(Debug, Clone, Copy)]
pub struct BlockLayout {
    pub size: usize,
    /// Q5_0's fifth bits, Q5_K's and Q6_K's qh groups.
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
            Q4_0 | IQ4_NL => l(144, 0, 0, 128, 0),
            Q4_1 => l(160, 0, 0, 128, 144),
            Q5_0 => l(176, 128, 0, 160, 0),
            Q5_1 => l(192, 128, 0, 160, 176),
            Q8_0 => l(272, 0, 0, 256, 0),
            Q4_K => l(1184, 0, 1024, 1152, 1168),
            Q5_K => l(1440, 1024, 1280, 1408, 1424),
            Q6_K => l(1680, 1024, 1536, 1664, 0),
            _ => None,
        }
    }
}

pub fn tile_bytes(ty: GgmlType, cols: usize) -> Option<usize> {
    tile_len(ty, cols, BlockLayout::of(ty)?.size)
}

/// A packed matrix product's operands as the tile kernels walk them: the type's block layout,
/// the tiles, each token's activation row (extents checked by the caller, see
/// [`PackedMatMatFn`](crate::quant::packed::PackedMatMatFn)).
pub struct TileWalk<'a> {
    pub o: BlockLayout,
    /// Blocks per row.
    pub nb: usize,
    tile_bytes: usize,
    act_bytes: usize,
    act_offsets: ActOffsets,
    tiles: &'a [u8],
    act: &'a [u8],
    n_rows: usize,
}

impl<'a> TileWalk<'a> {
    /// `None` for a type or `cols` without a tile layout.
    pub fn new(ty: GgmlType, cols: usize, tiles: &'a [u8], n_rows: usize, act: &'a [u8]) -> Option<TileWalk<'a>> {
        let pa = PackedAct::of(ty)?;
        Some(TileWalk {
            o: BlockLayout::of(ty)?,
            nb: cols / ty.block_size(),
            tile_bytes: tile_bytes(ty, cols)?,
            act_bytes: pa.row_bytes(cols)?,
            act_offsets: ActOffsets::new(pa, cols),
            tiles,
            act,
            n_rows,
        })
    }

    /// Token `t`'s activation row.
    ///
    /// # Safety
    /// `act` holds a row for token `t`.
    #[inline]
    pub unsafe fn act(&self, t: usize) -> ActRow {
        ActRow::new(self.act.as_ptr().add(t * self.act_bytes), &self.act_offsets)
    }

    /// Each tile: its bytes, its first row and how many of its rows are real.
    pub fn tiles(&self) -> impl Iterator<Item = (&'a [u8], usize, usize)> + 'a {
        let n_rows = self.n_rows;
        self.tiles
            .chunks_exact(self.tile_bytes)
            .take(n_rows.div_ceil(ROWS))
            .enumerate()
            .map(move |(i, tile)| (tile, i * ROWS, (n_rows - i * ROWS).min(ROWS)))
    }
}

/// Builds one tile of width 4 (the dotprod kernels') from whole ggml rows; see [`pack`].
pub fn pack_tile(ty: GgmlType, cols: usize, rows: &[u8], tile: &mut [u8]) {
    pack(ty, cols, rows, tile, 4)
}

/// Builds one tile of width 8 (the i8mm kernels'), of width 4 for the types that run the dotprod
/// kernels (Q5_0, Q5_1, Q5_K, IQ4_NL); see [`pack`].
pub fn pack_tile_mmla(ty: GgmlType, cols: usize, rows: &[u8], tile: &mut [u8]) {
    use GgmlType::*;
    pack(ty, cols, rows, tile, if matches!(ty, Q5_0 | Q5_1 | Q5_K | IQ4_NL) { 4 } else { 8 })
}

/// Builds one tile of width `w` (see the module documentation) from whole ggml rows; absent rows
/// stay zero. Works on the bytes directly (block field offsets as in `blocks`): this runs over
/// every weight at load, so it should go at memory speed.
fn pack(ty: GgmlType, cols: usize, rows: &[u8], tile: &mut [u8], w: usize) {
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
                Q4_0 | IQ4_NL | Q4_1 | Q5_0 | Q5_1 => {
                    groups(blk, r, &x[bb - 16..], w);
                    // d leads every block; Q4_1's and Q5_1's m follows it, then Q5_x's qh.
                    f16_at(blk, o.d, &x[..2]);
                    if matches!(ty, Q4_1 | Q5_1) {
                        f16_at(blk, o.m, &x[2..4]);
                    }
                    if matches!(ty, Q5_0 | Q5_1) {
                        let at = if ty == Q5_0 { 2 } else { 4 };
                        let qh = u32::from_le_bytes([x[at], x[at + 1], x[at + 2], x[at + 3]]);
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
                    groups(blk, r, &x[2..34], w);
                    f16_at(blk, o.d, &x[..2]);
                }
                Q4_K | Q5_K => {
                    if ty == Q5_K {
                        groups(blk, r, &x[48..176], w);
                        groups(&mut blk[o.qh..], r, &x[16..48], w);
                    } else {
                        groups(blk, r, &x[16..144], w);
                    }
                    let sm = q4k_scales_mins(x[4..16].try_into().unwrap_or(&[0; 12]));
                    for (k, &s) in sm.iter().enumerate() {
                        blk[o.sc + ROWS * k + r] = s;
                    }
                    f16_at(blk, o.d, &x[..2]);
                    f16_at(blk, o.m, &x[2..4]);
                }
                Q6_K => {
                    groups(blk, r, &x[..128], w);
                    groups(&mut blk[o.qh..], r, &x[128..192], w);
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

/// Row `r`'s bytes `src` into `src.len() / w` consecutive groups of width `w` at `dst`.
#[inline]
fn groups(dst: &mut [u8], r: usize, src: &[u8], w: usize) {
    let dst = &mut dst[..src.len() * ROWS];
    for (g, chunk) in dst.chunks_exact_mut(w * ROWS).zip(src.chunks_exact(w)) {
        g[w * r..w * r + w].copy_from_slice(chunk);
    }
}
