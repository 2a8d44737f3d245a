//! ggml block layouts (`ggml-common.h`), byte for byte: these structs are read straight out of
//! GGUF files written by llama.cpp, so field order, sizes and bit packing must never change.
//!
//! Every block is plain old data: `#[repr(C)]`, no padding, every bit pattern valid. That is
//! what makes the zero-copy views in [`as_blocks`] sound.

use half::{bf16, f16};

/// Elements per block of the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL).
pub(crate) const QK: usize = 32;
/// Elements per super-block of the k-quants (Q2_K..Q6_K, Q8_K) and IQ4_XS.
pub(crate) const QK_K: usize = 256;

/// `scale = d * q` with `q = nibble - 8`. Elements `0..16` are the low nibbles of `qs`,
/// `16..32` the high nibbles.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ4_0 {
    pub d: f16,
    pub qs: [u8; QK / 2],
}

/// `x = d * q + m` with `q` an unsigned nibble (same nibble order as Q4_0).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ4_1 {
    pub d: f16,
    pub m: f16,
    pub qs: [u8; QK / 2],
}

/// `x = d * (q - 16)`, `q` 5 bits: the nibble from `qs` (Q4_0 order) plus bit `j` of the
/// little-endian `qh` word as bit 4 of element `j`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ5_0 {
    pub d: f16,
    pub qh: [u8; 4],
    pub qs: [u8; QK / 2],
}

/// `x = d * q`, `q` signed bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8_0 {
    pub d: f16,
    pub qs: [i8; QK],
}

/// Q8_0 plus `s = d * sum(qs)`, which lets Q4_1 apply its offset `m` without touching `qs`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8_1 {
    pub d: f16,
    pub s: f16,
    pub qs: [i8; QK],
}

/// 8 sub-blocks of 32: `x = d * sc[j] * q - dmin * m[j]`, with 6-bit `sc`/`m` packed in
/// `scales` (see `q4k_scale_min`) and nibbles in 64-element groups: the low nibbles of
/// `qs[32g..32g+32]` are elements `64g..64g+32`, the high nibbles the next 32.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ4K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; 12],
    pub qs: [u8; QK_K / 2],
}

/// 16 sub-blocks of 16: `x = d * scales[j] * (q - 32)`, `q` 6 bits: 4 low bits in `ql`,
/// 2 high bits in `qh` (layout in `reference::dequantize_row_q6_k`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ6K {
    pub ql: [u8; QK_K / 2],
    pub qh: [u8; QK_K / 4],
    pub scales: [i8; QK_K / 16],
    pub d: f16,
}

/// Activation super-block for the k-quants: f32 scale, and the sums of each 16 quants so the
/// weight offsets (Q4_K mins, Q6_K's -32) cost one multiply per sub-block.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; QK_K],
    pub bsums: [i16; QK_K / 16],
}

/// `x = d * q + m`, `q` 5 bits: the nibble from `qs` (Q4_0 order) plus bit `j` of the
/// little-endian `qh` word as bit 4 of element `j` (as Q5_0).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ5_1 {
    pub d: f16,
    pub m: f16,
    pub qh: [u8; 4],
    pub qs: [u8; QK / 2],
}

/// ggml's non-linear 4-bit grid of IQ4_NL and IQ4_XS: a nibble `k` stands for `KVALUES_IQ4NL[k]`.
pub(crate) const KVALUES_IQ4NL: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/// `x = d * KVALUES_IQ4NL[nibble]`, nibbles in Q4_0's order.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockIq4Nl {
    pub d: f16,
    pub qs: [u8; QK / 2],
}

/// 8 sub-blocks of 32: `x = d * (ls[j] - 32) * KVALUES_IQ4NL[nibble]`, `ls` 6 bits: the low 4 in
/// nibble `j % 2` of `scales_l[j / 2]`, the top 2 in bits `2j..2j+2` of `scales_h`. Sub-block
/// `j`'s nibbles are `qs[16j..16j+16]`, in Q4_0's order.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockIq4Xs {
    pub d: f16,
    pub scales_h: u16,
    pub scales_l: [u8; QK_K / 64],
    pub qs: [u8; QK_K / 2],
}

/// 16 sub-blocks of 16: `x = d * (sc[j] & 15) * q - dmin * (sc[j] >> 4)`, `q` 2 bits. In each
/// 128-element half `h`, element `128h + 32k + l` is bits `2k..2k+2` of `qs[32h + l]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ2K {
    pub scales: [u8; QK_K / 16],
    pub qs: [u8; QK_K / 4],
    pub d: f16,
    pub dmin: f16,
}

/// 16 sub-blocks of 16: `x = d * (sc[j] - 32) * (q - 4)`, `q` 3 bits: 2 low bits in `qs` (as
/// Q2_K), the third from `hmask` (bit `k` of `hmask[l]` for element `32k + l`; a clear bit
/// subtracts 4). The 6-bit scales are packed in `scales` (see `q3k_scales`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ3K {
    pub hmask: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 4],
    pub scales: [u8; 12],
    pub d: f16,
}

/// 8 sub-blocks of 32: `x = d * sc[j] * q - dmin * m[j]` with Q4_K's scales and nibble order,
/// `q` 5 bits: the fifth bit of element `64g + l` (`l < 32`) is bit `2g` of `qh[l]`, that of
/// element `64g + 32 + l` bit `2g + 1`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ5K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; 12],
    pub qh: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 2],
}

// Sizes from ggml's static asserts; any padding here would break both GGUF reads and the
// plain-old-data contract of `Block`.
const _: () = assert!(size_of::<BlockQ4_0>() == 18);
const _: () = assert!(size_of::<BlockQ4_1>() == 20);
const _: () = assert!(size_of::<BlockQ5_0>() == 22);
const _: () = assert!(size_of::<BlockQ8_0>() == 34);
const _: () = assert!(size_of::<BlockQ8_1>() == 36);
const _: () = assert!(size_of::<BlockQ4K>() == 144);
const _: () = assert!(size_of::<BlockQ6K>() == 210);
const _: () = assert!(size_of::<BlockQ8K>() == 292);
const _: () = assert!(size_of::<BlockQ5_1>() == 24);
const _: () = assert!(size_of::<BlockIq4Nl>() == 18);
const _: () = assert!(size_of::<BlockIq4Xs>() == 136);
const _: () = assert!(size_of::<BlockQ2K>() == 84);
const _: () = assert!(size_of::<BlockQ3K>() == 110);
const _: () = assert!(size_of::<BlockQ5K>() == 176);
const _: () = assert!(align_of::<BlockQ3K>() == 2 && align_of::<BlockIq4Xs>() == 2);
const _: () = assert!(align_of::<BlockQ4_0>() == 2 && align_of::<BlockQ6K>() == 2);
const _: () = assert!(align_of::<BlockQ8K>() == 4);
const _: () = assert!(size_of::<f16>() == 2 && size_of::<bf16>() == 2);

mod sealed {
    pub trait Sealed {}
}

/// A ggml block type (or a bare float element) that may be viewed in place over raw bytes.
///
/// # Safety
/// Implementors are `#[repr(C)]` or primitive, have no padding bytes, alignment at most 4, and
/// every bit pattern is a valid value. The trait is sealed: only this module implements it.
pub unsafe trait Block: Copy + sealed::Sealed + 'static {
    /// Elements one block encodes.
    const ELEMS: usize;

    /// All-zero block (a valid value by the trait contract).
    fn zeroed() -> Self {
        // SAFETY: all-zero bits are a valid value of every implementor.
        unsafe { std::mem::zeroed() }
    }
}

macro_rules! impl_block {
    ($($t:ty => $elems:expr),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        // SAFETY: checked above (sizes, no padding) and all fields are integers or floats.
        unsafe impl Block for $t {
            const ELEMS: usize = $elems;
        }
    )*};
}

impl_block! {
    f32 => 1,
    f16 => 1,
    bf16 => 1,
    BlockQ4_0 => QK,
    BlockQ4_1 => QK,
    BlockQ5_0 => QK,
    BlockQ8_0 => QK,
    BlockQ8_1 => QK,
    BlockQ4K => QK_K,
    BlockQ6K => QK_K,
    BlockQ8K => QK_K,
    BlockQ5_1 => QK,
    BlockIq4Nl => QK,
    BlockIq4Xs => QK_K,
    BlockQ2K => QK_K,
    BlockQ3K => QK_K,
    BlockQ5K => QK_K,
}

/// Views `bytes` as blocks without copying. `None` when the length is not a whole number of
/// blocks or the start is not aligned for `T`.
pub fn as_blocks<T: Block>(bytes: &[u8]) -> Option<&[T]> {
    let size = size_of::<T>();
    if bytes.len() % size != 0 || bytes.as_ptr() as usize % align_of::<T>() != 0 {
        return None;
    }
    // SAFETY: length and alignment checked; `T` is plain old data (trait contract), so any
    // initialised bytes are a valid `T`, and the borrow keeps the lifetime.
    Some(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / size) })
}

/// Mutable form of [`as_blocks`].
pub fn as_blocks_mut<T: Block>(bytes: &mut [u8]) -> Option<&mut [T]> {
    let size = size_of::<T>();
    if bytes.len() % size != 0 || bytes.as_ptr() as usize % align_of::<T>() != 0 {
        return None;
    }
    // SAFETY: as in `as_blocks`; writes of any `T` leave valid bytes since `T` has no padding.
    Some(unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), bytes.len() / size) })
}

/// The raw bytes of a block slice.
pub fn as_bytes<T: Block>(blocks: &[T]) -> &[u8] {
    // SAFETY: `T` has no padding, so every byte is initialised; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(blocks.as_ptr().cast::<u8>(), std::mem::size_of_val(blocks)) }
}

/// The raw bytes of a block slice, writable (any bytes form valid blocks).
pub fn as_bytes_mut<T: Block>(blocks: &mut [T]) -> &mut [u8] {
    let len = std::mem::size_of_val(blocks);
    // SAFETY: as in `as_bytes`; every bit pattern is a valid `T`, so arbitrary writes are fine.
    unsafe { std::slice::from_raw_parts_mut(blocks.as_mut_ptr().cast::<u8>(), len) }
}

/// Scale and min of sub-block `j` (0..8) of a Q4_K block: ggml's `get_scale_min_k4`.
/// Sub-blocks 0..4 keep 6 bits in bytes `j` / `j+4`; 4..8 put their low 4 bits in byte `j+4`
/// and their top 2 bits in the spare top bits of bytes `j-4` / `j`.
#[inline]
pub(crate) fn q4k_scale_min(j: usize, s: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        ((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4))
    }
}

/// All eight Q4_K scales (`[0..8]`) and mins (`[8..16]`) at once, as ggml's dot products
/// unpack them (the `utmp` / `kmask` sequence). Must agree with [`q4k_scale_min`].
#[inline]
pub(crate) fn q4k_scales_mins(s: &[u8; 12]) -> [u8; 16] {
    const KMASK1: u32 = 0x3f3f_3f3f;
    const KMASK2: u32 = 0x0f0f_0f0f;
    const KMASK3: u32 = 0x0303_0303;
    let u0 = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    let u1 = u32::from_le_bytes([s[4], s[5], s[6], s[7]]);
    let u2 = u32::from_le_bytes([s[8], s[9], s[10], s[11]]);
    let sc_lo = u0 & KMASK1;
    let sc_hi = (u2 & KMASK2) | (((u0 >> 6) & KMASK3) << 4);
    let mn_lo = u1 & KMASK1;
    let mn_hi = ((u2 >> 4) & KMASK2) | (((u1 >> 6) & KMASK3) << 4);
    let mut out = [0u8; 16];
    out[0..4].copy_from_slice(&sc_lo.to_le_bytes());
    out[4..8].copy_from_slice(&sc_hi.to_le_bytes());
    out[8..12].copy_from_slice(&mn_lo.to_le_bytes());
    out[12..16].copy_from_slice(&mn_hi.to_le_bytes());
    out
}

/// The sixteen 6-bit Q3_K scales, offset by -32 (ggml's `kmask1`/`kmask2` unpacking): scale `j`
/// takes its low 4 bits from nibble `j / 8` of `scales[j % 8]` and its top 2 bits from bits
/// `2 (j / 4)..` of `scales[8 + j % 4]`.
#[inline]
pub(crate) fn q3k_scales(s: &[u8; 12]) -> [i8; 16] {
    const KMASK1: u32 = 0x0303_0303;
    const KMASK2: u32 = 0x0f0f_0f0f;
    let a0 = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    let a1 = u32::from_le_bytes([s[4], s[5], s[6], s[7]]);
    let tmp = u32::from_le_bytes([s[8], s[9], s[10], s[11]]);
    let words = [
        (a0 & KMASK2) | ((tmp & KMASK1) << 4),
        (a1 & KMASK2) | (((tmp >> 2) & KMASK1) << 4),
        ((a0 >> 4) & KMASK2) | (((tmp >> 4) & KMASK1) << 4),
        ((a1 >> 4) & KMASK2) | (((tmp >> 6) & KMASK1) << 4),
    ];
    let mut out = [0i8; 16];
    for (i, w) in words.iter().enumerate() {
        for (j, b) in w.to_le_bytes().iter().enumerate() {
            out[4 * i + j] = *b as i8 - 32;
        }
    }
    out
}

/// The 6-bit scale of IQ4_XS sub-block `j` (0..8), before its -32 offset.
#[inline]
pub(crate) fn iq4xs_scale(b: &BlockIq4Xs, j: usize) -> u8 {
    ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0x0F) | ((((b.scales_h >> (2 * j)) & 3) as u8) << 4)
}
