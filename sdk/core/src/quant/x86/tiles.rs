//! What the x86 sets' tile layouts and packed kernels share: where a tile block's fields lie
//! and the loop that runs a micro-kernel over tiles × tokens.

use crate::quant::packed::tile_len;
use crate::quant::GgmlType;

/// Requests the `bytes` bytes at `p` into the cache, one prefetch per 64-byte line. Prefetches
/// never fault, so `p` may point past the end of its buffer (the address is only computed).
#[inline(always)]
pub(crate) unsafe fn prefetch(p: *const u8, bytes: usize) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    for line in (0..bytes).step_by(64) {
        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(line).cast());
    }
}

/// How far past the block in use the AVX2 sets' packed kernels request the weights (the
/// `avx512` set has its own distances, see there): a pass over one or two
/// tokens streams the weights from memory with little arithmetic per byte, and the hardware's
/// own prefetching leaves part of each block's load latency exposed. On Zen 3 (AVX2 set), 2
/// threads, one-token passes: SmolLM2 (Q4_1) -11%, Qwen2.5 and Gemma 3 (Q4_K, Q6_K) -14 to
/// -18%; 4096 bytes ahead did as well on 4 tokens and worse on one. On an AVX-512 Xeon
/// (`avx512` set, with its attention requesting rows ahead too): one-token passes -8 to -18%,
/// 2 to 8 tokens -12 to -21%; 4096 bytes no better, 1024 worse.
pub(crate) const PREFETCH_DISTANCE: usize = 2048;

/// Requests the weights [`PREFETCH_DISTANCE`] past the tile block of `size` bytes at `p` (in
/// this tile or the next; past the last tile they are never read).
#[inline(always)]
pub(crate) unsafe fn prefetch_ahead(p: *const u8, size: usize) {
    prefetch(p.wrapping_add(PREFETCH_DISTANCE), size);
}

/// ggml's IQ4_NL grid plus 128: u8 weights for the u8 × i8 products of `vpdpbusd`.
pub(crate) static IQ4NL_BIASED: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = (crate::quant::blocks::KVALUES_IQ4NL[i] as i16 + 128) as u8;
        i += 1;
    }
    t
};

/// Where the fields of one tile block (the tile's rows of one ggml block) lie, relative to its
/// start, and its size. The quants come first; `a`..`d` are the scale fields in the order of
/// the layout's table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockLayout {
    pub size: usize,
    pub a: usize,
    pub b: usize,
    pub c: usize,
    pub d: usize,
}

impl BlockLayout {
    pub(super) fn new(size: usize, a: usize, b: usize, c: usize, d: usize) -> Option<BlockLayout> {
        Some(BlockLayout { size, a, b, c, d })
    }

    /// Bytes of one tile of `cols` columns of `ty` made of such blocks (a multiple of [`ALIGN`](crate::quant::packed::ALIGN)).
    pub(crate) fn tile_bytes(self, ty: GgmlType, cols: usize) -> Option<usize> {
        tile_len(ty, cols, self.size)
    }
}

/// Drives `$micro::<E>` over every tile of layout module `$layout` (its `ROWS`, `tile_bytes`
/// and `block_layout`) and every token: tokens in groups of `$emax`, then the rest in one call
/// of its own size, one of the `$tail` sizes (every count below `$emax`). Each call decodes the
/// tile's weights again, so a pass of 3 or 7 tokens costs about as much as one of 4 or 8, not
/// one of 4 or 8 plus a single-token pass. The micro-kernel gets the tile, its block count and
/// layout, `E` activation rows, `E` output pointers and how many of the tile's rows are real.
/// To be expanded inside an `unsafe fn` whose caller has checked the extents (see the kernel
/// modules).
macro_rules! drive {
    ($layout:ident, $micro:ident, $emax:literal, [$($tail:literal)*], $ty:expr, $cols:expr, $tiles:expr,
     $n_rows:expr, $act:expr, $n_tok:expr, $out:expr, $stride:expr) => {{
        use $crate::quant::packed::{ActOffsets, PackedAct};
        use $crate::quant::packed::ActRow;
        let (cols, n_rows, n_tok, stride) = ($cols, $n_rows, $n_tok, $stride);
        let Some(tb) = $layout::tile_bytes($ty, cols) else { return };
        let Some(ab) = PackedAct::of($ty).and_then(|a| a.row_bytes(cols)) else { return };
        let ao = ActOffsets::new(PackedAct::of($ty).unwrap_or(PackedAct::Q8x32), cols);
        let nb = cols / $ty.block_size();
        let Some(to) = $layout::block_layout($ty) else { return };
        let (tiles, act, mut out): (&[u8], &[u8], $crate::quant::packed::OutRows<'_>) = ($tiles, $act, $out);
        let act_row = |t: usize| ActRow::new(act.as_ptr().add(t * ab), &ao);
        let out_ptr = out.as_mut_ptr();
        for tile in 0..n_rows.div_ceil($layout::ROWS) {
            let tp = tiles.as_ptr().add(tile * tb);
            let r0 = tile * $layout::ROWS;
            let valid = n_rows - r0;
            let dst = |t: usize| out_ptr.add(t * stride + r0);
            // Tokens t..t + E through the E-token instance.
            macro_rules! call {
                ($e:literal, $t:expr) => {{
                    let t = $t;
                    $micro::<$e>(
                        tp,
                        nb,
                        &to,
                        std::array::from_fn(|e| act_row(t + e)),
                        std::array::from_fn(|e| dst(t + e)),
                        valid,
                    )
                }};
            }
            let mut t = 0;
            while t + $emax <= n_tok {
                call!($emax, t);
                t += $emax;
            }
            $(if n_tok - t == $tail {
                call!($tail, t);
            })*
        }
    }};
}

pub(crate) use drive;

/// Calls `$slice::<$e, H, K>($args)` for the eight (h, k) slices of a Q6_K super-block, in
/// order. Each slice by name, so its quant extraction is fixed at compile time: as a loop over
/// (h, k), the selection by k stayed in the loop as branches and the decoded vectors spilled.
macro_rules! each_q6k_slice {
    ($slice:ident::<$e:ident>($($arg:expr),*)) => {{
        $slice::<$e, 0, 0>($($arg),*);
        $slice::<$e, 0, 1>($($arg),*);
        $slice::<$e, 0, 2>($($arg),*);
        $slice::<$e, 0, 3>($($arg),*);
        $slice::<$e, 1, 0>($($arg),*);
        $slice::<$e, 1, 1>($($arg),*);
        $slice::<$e, 1, 2>($($arg),*);
        $slice::<$e, 1, 3>($($arg),*);
    }};
}

pub(crate) use each_q6k_slice;
