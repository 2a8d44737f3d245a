//! The ARMv8.2 dotprod set: `sdot` sums four signed byte products into each i32 lane, a quarter
//! of the instructions of `smull` + `sadalp`. Run only where `dotprod` is detected.

use std::arch::aarch64::*;

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
