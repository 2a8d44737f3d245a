//! Weights reordered at load into the tiles a kernel set's multi-row kernels read (MNN-LLM's
//! hardware-driven reorder), and the activation rows those kernels consume.
//!
//! A kernel set that packs describes itself with a [`Packing`]: the rows per tile, how many
//! bytes a tile of a type takes and how to build it from ggml rows, the activation layout its
//! kernels read ([`PackedAct`]) and how to fill it, and one matrix-product kernel per type.
//! There is a single kernel per type for one token (decode) and for many (prefill): it accumulates
//! each (row, token) pair the same way whatever the token count, which is what keeps a token's
//! logits independent of its batch. Another instruction set plugs in by providing its own
//! `Packing` (its own tile shape, layouts and kernels) in its `Kernels` table; nothing above the
//! kernel table knows the layout.
//!
//! The packed copy replaces the mapped rows for compute only; the file stays mapped (embedding
//! rows are still read from it) and the model may drop the replaced pages from memory.

use std::sync::{Arc, Mutex};

use super::blocks::*;
use super::{GgmlType, QuantizeFn};

/// Tiles and activation rows are padded to this many bytes, and start at multiples of it.
pub(crate) const ALIGN: usize = 64;

/// `out[t * stride + r] = row r · activation row t` for the first `n_rows` rows of `tiles` (whole
/// tiles of `cols` columns, the last possibly part padding) and `n_tok` activation rows of
/// [`Packing::act_row_bytes`] each. On bad sizes `out` is left untouched.
pub(crate) type PackedMatMatFn =
    fn(cols: usize, tiles: &[u8], n_rows: usize, act: &[u8], n_tok: usize, out: OutRows<'_>, stride: usize);

/// The output of a packed kernel call: `len` floats of which the call writes only elements
/// `t * stride + r` of its tokens `t` and rows `r < n_rows`. Threads that split a product by
/// rows each hold one over the same token-major buffer and write disjoint elements of it,
/// straight into place (a `&mut [f32]` per thread could not overlap; writing through a
/// per-thread tile and copying cost SmolLM2's 512-token prefill 8%).
pub struct OutRows<'a> {
    ptr: *mut f32,
    len: usize,
    _buf: std::marker::PhantomData<&'a mut [f32]>,
}

impl<'a> OutRows<'a> {
    /// All of `out`.
    pub fn of(out: &'a mut [f32]) -> OutRows<'a> {
        OutRows { ptr: out.as_mut_ptr(), len: out.len(), _buf: std::marker::PhantomData }
    }

    /// # Safety
    /// `ptr..ptr + len` must be valid for writes while `'a` lasts, and the elements the calls
    /// given this output write must be read or written by no one else meanwhile.
    pub unsafe fn from_raw(ptr: *mut f32, len: usize) -> OutRows<'a> {
        OutRows { ptr, len, _buf: std::marker::PhantomData }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn as_mut_ptr(&mut self) -> *mut f32 {
        self.ptr
    }

    /// Elements `at..at + n`, which must be ones this call writes (see [`OutRows`]).
    ///
    /// # Safety
    /// `at + n <= self.len()`, and the elements are this call's own.
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
    pub unsafe fn segment(&mut self, at: usize, n: usize) -> &mut [f32] {
        debug_assert!(at + n <= self.len);
        std::slice::from_raw_parts_mut(self.ptr.add(at), n)
    }
}

/// Builds one tile from up to `tile_rows` consecutive ggml rows of `cols` columns (`rows` holds
/// whole rows; missing rows are packed as zeros). `tile` is exactly one tile long.
pub(crate) type PackTileFn = fn(ty: GgmlType, cols: usize, rows: &[u8], tile: &mut [u8]);

/// Quantizes one f32 row into the activation layout the packed kernels of weight type `ty` read.
pub(crate) type QuantizeActFn = fn(ty: GgmlType, x: &[f32], out: &mut [u8]);

/// Activation row layouts of packed kernels. Rows of the same layout are shared by every matrix
/// that reads it (q, k and v of one input are quantized once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackedAct {
    /// 32-element blocks (weights Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL): `qs[cols]` i8, then per block
    /// `d` (f32), `sum` (i32, the sum of the block's quants) and `s` (f32, Q8_1's `d * sum`
    /// rounded to f16, which Q4_1's and Q5_1's offsets use). Quants and scales equal ggml's Q8_0/Q8_1.
    Q8x32,
    /// 256-element super-blocks (Q4_K, Q5_K, Q6_K): `qs[cols]` i8, then per super-block `d` (f32),
    /// 16 sums of 16 quants (i16) and 8 sums of 32 quants (i16). Equal to ggml's Q8_K.
    Q8xK,
}

impl PackedAct {
    /// The layout packed kernels of weight type `ty` read (`None`: not a packable type).
    pub fn of(ty: GgmlType) -> Option<PackedAct> {
        use GgmlType::*;
        match ty {
            Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | IQ4_NL => Some(PackedAct::Q8x32),
            Q4_K | Q5_K | Q6_K => Some(PackedAct::Q8xK),
            _ => None,
        }
    }

    /// Elements per block of scales.
    pub fn block(self) -> usize {
        match self {
            PackedAct::Q8x32 => QK,
            PackedAct::Q8xK => QK_K,
        }
    }

    /// Bytes of one row of `cols` elements (a multiple of `ALIGN`); `None` when `cols` is not
    /// a whole number of blocks.
    pub fn row_bytes(self, cols: usize) -> Option<usize> {
        if cols % self.block() != 0 {
            return None;
        }
        let nb = cols / self.block();
        let meta = match self {
            PackedAct::Q8x32 => 12 * nb,
            PackedAct::Q8xK => (4 + 32 + 16) * nb,
        };
        Some((cols + meta).next_multiple_of(ALIGN))
    }
}

/// Byte offsets inside one activation row of `cols` elements.
#[derive(Debug, Clone, Copy)]
pub struct ActOffsets {
    /// Per-block f32 scales.
    pub d: usize,
    /// Q8x32: per-block i32 sums. Q8xK: 16 i16 sums of 16 per super-block.
    pub sum: usize,
    /// Q8x32: per-block f32 `s`. Q8xK: 8 i16 sums of 32 per super-block.
    pub extra: usize,
}

impl ActOffsets {
    pub fn new(act: PackedAct, cols: usize) -> Self {
        let nb = cols / act.block();
        match act {
            PackedAct::Q8x32 => ActOffsets { d: cols, sum: cols + 4 * nb, extra: cols + 8 * nb },
            PackedAct::Q8xK => ActOffsets { d: cols, sum: cols + 4 * nb, extra: cols + 36 * nb },
        }
    }
}

/// One activation row as packed kernels read it: pointers to its arrays.
#[derive(Clone, Copy)]
pub struct ActRow {
    pub qs: *const u8,
    pub d: *const u8,
    pub sum: *const u8,
    pub extra: *const u8,
}

/// Each function is `unsafe`: `row` (and each block asked for) must lie in a row of the layout
/// the offsets were made for, which the packed kernels' callers have checked.
#[allow(clippy::missing_safety_doc)]
impl ActRow {
    #[inline(always)]
    pub unsafe fn new(row: *const u8, o: &ActOffsets) -> ActRow {
        ActRow { qs: row, d: row.add(o.d), sum: row.add(o.sum), extra: row.add(o.extra) }
    }

    /// Scale of block `b`.
    #[inline(always)]
    pub unsafe fn d(&self, b: usize) -> f32 {
        self.d.add(4 * b).cast::<f32>().read_unaligned()
    }

    /// [`PackedAct::Q8x32`]: the sum of block `b`'s quants.
    #[inline(always)]
    pub unsafe fn sum(&self, b: usize) -> i32 {
        self.sum.add(4 * b).cast::<i32>().read_unaligned()
    }

    /// [`PackedAct::Q8x32`]: block `b`'s `s`.
    #[inline(always)]
    pub unsafe fn s(&self, b: usize) -> f32 {
        self.extra.add(4 * b).cast::<f32>().read_unaligned()
    }

    /// [`PackedAct::Q8xK`]: the sum of quants `32j..32j + 32` of super-block `b`.
    #[inline(always)]
    pub unsafe fn sum32(&self, b: usize, j: usize) -> i16 {
        self.extra.add(16 * b + 2 * j).cast::<i16>().read_unaligned()
    }
}

/// Fills a [`PackedAct::Q8x32`] row from `x` with a Q8_1 quantizer (whose quants and `d` are
/// those of Q8_0 too). `out` must be at least one row long; `x.len()` a multiple of 32.
pub fn quantize_q8x32(x: &[f32], out: &mut [u8], q8_1: QuantizeFn) {
    let cols = x.len();
    let o = ActOffsets::new(PackedAct::Q8x32, cols);
    let mut tmp = [BlockQ8_1::zeroed(); 16];
    for (c, xc) in x.chunks(16 * QK).enumerate() {
        let nb = xc.len() / QK;
        q8_1(xc, as_bytes_mut(&mut tmp[..nb]));
        for (i, b) in tmp[..nb].iter().enumerate() {
            let blk = c * 16 + i;
            for (o, &q) in out[blk * QK..(blk + 1) * QK].iter_mut().zip(&b.qs) {
                *o = q as u8;
            }
            let sum: i32 = b.qs.iter().map(|&q| q as i32).sum();
            put(out, o.d + 4 * blk, b.d.to_f32().to_le_bytes());
            put(out, o.sum + 4 * blk, sum.to_le_bytes());
            put(out, o.extra + 4 * blk, b.s.to_f32().to_le_bytes());
        }
    }
}

/// Fills a [`PackedAct::Q8xK`] row from `x` with a Q8_K quantizer.
pub(crate) fn quantize_q8xk(x: &[f32], out: &mut [u8], q8_k: QuantizeFn) {
    let cols = x.len();
    let o = ActOffsets::new(PackedAct::Q8xK, cols);
    let mut tmp = [BlockQ8K::zeroed(); 4];
    for (c, xc) in x.chunks(4 * QK_K).enumerate() {
        let nb = xc.len() / QK_K;
        q8_k(xc, as_bytes_mut(&mut tmp[..nb]));
        for (i, b) in tmp[..nb].iter().enumerate() {
            let blk = c * 4 + i;
            for (o, &q) in out[blk * QK_K..(blk + 1) * QK_K].iter_mut().zip(&b.qs) {
                *o = q as u8;
            }
            put(out, o.d + 4 * blk, b.d.to_le_bytes());
            for (j, s) in b.bsums.iter().enumerate() {
                put(out, o.sum + 32 * blk + 2 * j, s.to_le_bytes());
            }
            for j in 0..QK_K / 32 {
                put(out, o.extra + 16 * blk + 2 * j, (b.bsums[2 * j] + b.bsums[2 * j + 1]).to_le_bytes());
            }
        }
    }
}

#[inline]
fn put<const N: usize>(out: &mut [u8], at: usize, v: [u8; N]) {
    out[at..at + N].copy_from_slice(&v);
}

/// Bytes of a tile of `cols` columns of `ty` whose blocks (one ggml block of each of its rows)
/// take `block` bytes: whole blocks, padded to [`ALIGN`]. `None` when `cols` is not a whole
/// number of blocks.
pub(crate) fn tile_len(ty: GgmlType, cols: usize, block: usize) -> Option<usize> {
    if cols == 0 || cols % ty.block_size() != 0 {
        return None;
    }
    Some((cols / ty.block_size() * block).next_multiple_of(ALIGN))
}

/// What a kernel set needs to run on repacked weights. See the module documentation.
pub struct Packing {
    /// Name of the tile layout (shown in benchmarks).
    pub layout: &'static str,
    /// Rows per tile; packed matrices are padded to a multiple of it.
    pub tile_rows: usize,
    /// Bytes of one tile of `cols` columns of a type (a multiple of `ALIGN`), `None` for types
    /// this set does not pack or a `cols` that is not a whole number of blocks.
    pub tile_bytes: fn(ty: GgmlType, cols: usize) -> Option<usize>,
    pub pack_tile: PackTileFn,
    /// Activation layout of each packed type's kernel, and how to fill it.
    pub act: fn(ty: GgmlType) -> Option<PackedAct>,
    pub quantize_act: QuantizeActFn,
    pub mat_mat: fn(ty: GgmlType) -> Option<PackedMatMatFn>,
}

impl Packing {
    /// Whether matrices of `ty` with rows of `cols` can be packed.
    pub(crate) fn supports(&self, ty: GgmlType, cols: usize) -> bool {
        (self.tile_bytes)(ty, cols).is_some() && (self.mat_mat)(ty).is_some() && (self.act)(ty).is_some()
    }

    /// Bytes of one activation row for the kernel of `ty`.
    pub fn act_row_bytes(&self, ty: GgmlType, cols: usize) -> Option<usize> {
        (self.act)(ty)?.row_bytes(cols)
    }
}

impl std::fmt::Debug for Packing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packing").field("layout", &self.layout).field("tile_rows", &self.tile_rows).finish()
    }
}

/// A weight matrix in a kernel set's tiled layout.
pub struct PackedMatrix {
    region: Region,
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    pub tile_rows: usize,
    pub tile_bytes: usize,
    pub kernel: PackedMatMatFn,
}

impl std::fmt::Debug for PackedMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedMatrix")
            .field("ty", &self.ty)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .finish()
    }
}

impl PackedMatrix {
    /// Bytes the packed copy of a matrix takes (`None` when `p` does not pack it).
    pub fn size(p: &Packing, ty: GgmlType, rows: usize, cols: usize) -> Option<usize> {
        if !p.supports(ty, cols) || rows == 0 {
            return None;
        }
        rows.div_ceil(p.tile_rows).checked_mul((p.tile_bytes)(ty, cols)?)
    }

    /// Packs `rows` ggml rows of `cols` columns held in `src` into a buffer of its own (`None`
    /// when `p` does not pack the type, `src` is short, or memory is exhausted), as one
    /// parallel job of `Packer::runs`: `parallel_for(n, f)` runs `f(0..n)`, possibly on
    /// several threads. `consumed` is called with each run of source rows once their tiles are
    /// built. (A model packs all its matrices at once through `Packer`s sharing an arena.)
    pub fn pack(
        p: &Packing,
        ty: GgmlType,
        rows: usize,
        cols: usize,
        src: &[u8],
        parallel_for: impl FnOnce(usize, &(dyn Fn(usize) + Sync)),
        consumed: &(dyn Fn(&[u8]) + Sync),
    ) -> Option<PackedMatrix> {
        let packer = Packer::new(p, ty, rows, cols, src, None)?;
        parallel_for(packer.runs(), &|run| {
            // SAFETY: each run index is built once, by this call.
            unsafe { packer.build_run(run) };
            consumed(packer.source(run));
        });
        Some(packer.finish())
    }

    /// Tiles holding rows `r0..r1` (`r0` a multiple of the tile height).
    pub fn tiles_for_rows(&self, r0: usize, r1: usize) -> &[u8] {
        let t0 = r0 / self.tile_rows;
        let t1 = r1.div_ceil(self.tile_rows);
        &self.region.as_slice()[t0 * self.tile_bytes..t1 * self.tile_bytes]
    }

    /// Bytes of the packed copy.
    pub fn bytes(&self) -> usize {
        self.region.len
    }
}

/// A matrix whose packed copy has its bytes but not yet its tiles. Its tiles are built a run
/// at a time, runs on several threads at once (a model packs all its matrices' runs in one
/// parallel job, so that small matrices do not leave threads idle); `finish` hands the
/// copy over once every run is built.
pub(crate) struct Packer<'a> {
    matrix: PackedMatrix,
    src: &'a [u8],
    pack_tile: PackTileFn,
}

/// Tiles per run: packing is memory-bound and a run should touch whole pages.
const TILES_PER_RUN: usize = 16;

impl<'a> Packer<'a> {
    /// Takes the copy's bytes (from `arena` while it has room, else a buffer of its own) for
    /// `rows` ggml rows of `cols` columns held in `src`; `None` when `p` does not pack the
    /// type, `src` is short, or memory is exhausted.
    pub fn new(
        p: &Packing,
        ty: GgmlType,
        rows: usize,
        cols: usize,
        src: &'a [u8],
        arena: Option<&Arc<Arena>>,
    ) -> Option<Packer<'a>> {
        let len = PackedMatrix::size(p, ty, rows, cols)?;
        let tile_bytes = (p.tile_bytes)(ty, cols)?;
        let src = src.get(..rows.checked_mul(ty.row_bytes(cols))?)?;
        let kernel = (p.mat_mat)(ty)?;
        let region = match arena.and_then(|a| a.take(len)) {
            Some(r) => r,
            None => Arena::new(len)?.take(len)?,
        };
        let matrix = PackedMatrix { region, ty, rows, cols, tile_rows: p.tile_rows, tile_bytes, kernel };
        Some(Packer { matrix, src, pack_tile: p.pack_tile })
    }

    /// Number of runs.
    pub fn runs(&self) -> usize {
        self.matrix.rows.div_ceil(self.matrix.tile_rows).div_ceil(TILES_PER_RUN)
    }

    /// Tiles of run `run` (empty past the last run).
    fn run_tiles(&self, run: usize) -> std::ops::Range<usize> {
        let m = &self.matrix;
        let tiles = m.rows.div_ceil(m.tile_rows);
        (run * TILES_PER_RUN).min(tiles)..((run + 1) * TILES_PER_RUN).min(tiles)
    }

    /// The source rows run `run` packs.
    pub fn source(&self, run: usize) -> &'a [u8] {
        let m = &self.matrix;
        let tiles = self.run_tiles(run);
        let row_bytes = m.ty.row_bytes(m.cols);
        let end = |t: usize| (t * m.tile_rows * row_bytes).min(self.src.len());
        &self.src[end(tiles.start)..end(tiles.end)]
    }

    /// Builds the tiles of run `run` (nothing past the last run).
    ///
    /// # Safety
    /// Each run is built by one call only: calls for different runs may run at once.
    pub(crate) unsafe fn build_run(&self, run: usize) {
        let m = &self.matrix;
        let row_bytes = m.ty.row_bytes(m.cols);
        for t in self.run_tiles(run) {
            let r0 = t * m.tile_rows;
            let r1 = (r0 + m.tile_rows).min(m.rows);
            // SAFETY: tile t is bytes [t * tile_bytes, (t + 1) * tile_bytes) of the region (it
            // holds every tile), written by this run only (the caller's promise); nothing
            // reads the matrix before `finish`.
            let tile = unsafe { std::slice::from_raw_parts_mut(m.region.base().add(t * m.tile_bytes), m.tile_bytes) };
            (self.pack_tile)(m.ty, m.cols, &self.src[r0 * row_bytes..r1 * row_bytes], tile);
        }
    }

    /// The packed matrix (its tiles as the runs built them; never-built runs stay zero).
    pub fn finish(self) -> PackedMatrix {
        self.matrix
    }
}

/// One zeroed buffer that the packed matrices of a model are carved from, front to back: one
/// memory map for all of them rather than one per matrix (hundreds of small ones otherwise).
/// It is not advised for huge pages: where the kernel must compact memory to find them
/// (after other processes came and went), faulting them in made loading about twice as slow,
/// and decode showed no measurable gain. The buffer is freed when the last matrix carved
/// from it goes.
pub(crate) struct Arena {
    buf: AlignedBuf,
    /// `buf`'s first byte, taken from its mutable borrow once: regions are written through it.
    base: *mut u8,
    used: Mutex<usize>,
}

// SAFETY: `base` points into `buf`, which the arena owns; regions are disjoint and each is
// written only while its matrix is packed, before the matrix is shared.
unsafe impl Send for Arena {}
unsafe impl Sync for Arena {}

impl Arena {
    pub fn new(len: usize) -> Option<Arc<Arena>> {
        let mut buf = AlignedBuf::zeroed(len)?;
        let base = buf.as_mut_slice().as_mut_ptr();
        Some(Arc::new(Arena { buf, base, used: Mutex::new(0) }))
    }

    /// The next `len` bytes, or `None` when the arena has no room left.
    fn take(self: &Arc<Self>, len: usize) -> Option<Region> {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        let offset = used.next_multiple_of(ALIGN);
        if len == 0 || offset.checked_add(len)? > self.buf.len() {
            return None;
        }
        *used = offset + len;
        Some(Region { arena: Arc::clone(self), offset, len })
    }
}

/// A matrix's bytes in an arena.
struct Region {
    arena: Arc<Arena>,
    offset: usize,
    len: usize,
}

impl Region {
    fn base(&self) -> *mut u8 {
        // SAFETY: offset + len lies inside the arena's buffer (checked by `take`).
        unsafe { self.arena.base.add(self.offset) }
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: inside the buffer (see `base`), which lives as long as the arena.
        unsafe { std::slice::from_raw_parts(self.base(), self.len) }
    }
}

/// Zero-initialised bytes aligned to `ALIGN` (a page, in fact): an anonymous memory map, so
/// untouched pages cost nothing and packing writes each page once.
pub struct AlignedBuf {
    map: memmap2::MmapMut,
}

impl AlignedBuf {
    pub(crate) fn zeroed(len: usize) -> Option<AlignedBuf> {
        if len == 0 {
            return None;
        }
        let map = memmap2::MmapOptions::new().len(len).map_anon().ok()?;
        Some(AlignedBuf { map })
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.map
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.map
    }
}
