//! ggml block layouts (`ggml-common.h`), byte for byte: these structs are read straight out of
//! GGUF files written by llama.cpp, so field order, sizes and bit packing must never change.
//!
//! Every block is plain old data: `#[repr(C)]`, no padding, every bit pattern valid. That is
//! what makes the zero-copy views in [`as_blocks`] sound.

use half::{bf16, f16};

/// Elements per block of the 32-element formats (Q4_0, Q4_1, Q5_0, Q8_0, Q8_1).
pub const QK: usize = 32;
/// Elements per super-block of the k-quants (Q4_K, Q6_K, Q8_K).
pub const QK_K: usize = 256;

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
/// `scales` (see [`q4k_scale_min`]) and nibbles in 64-element groups: the low nibbles of
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
pub fn q4k_scale_min(j: usize, s: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        ((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4))
    }
}

/// All eight Q4_K scales (`[0..8]`) and mins (`[8..16]`) at once, as ggml's dot products
/// unpack them (the `utmp` / `kmask` sequence). Must agree with [`q4k_scale_min`].
#[inline]
pub fn q4k_scales_mins(s: &[u8; 12]) -> [u8; 16] {
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
