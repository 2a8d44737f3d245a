//! The base ARMv8-A set: signed byte products widen with `smull` and accumulate pairwise with
//! `sadalp` (products fit i16: |-128 * -128| is 16384).

use std::arch::aarch64::*;

/// The `smull` + `sadalp` dot product.
pub struct Smull;

impl super::IntDot for Smull {
    #[inline]
    #[target_feature(enable = "neon")]
    unsafe fn dot16(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        let acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
        vpadalq_s16(acc, vmull_high_s8(a, b))
    }
}

super::int_kernels!(Smull);
