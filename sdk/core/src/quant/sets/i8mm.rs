//! The i8mm set: `smmla` GEMM on ggml's layout (2-row × 2-token tiles; one token on the dotprod
//! kernels) and on 8-row tiles of 8-byte column groups (`aarch64::tile8`; Q5_0, Q5_1, Q5_K and
//! IQ4_NL: the dotprod set's tiles and kernels, which its CPUs run).

use super::neon::{aarch64_rows, neon_attn_chunk};
use super::*;
use crate::quant::aarch64::i8mm as simd;
use crate::quant::aarch64::i8mm as k;
use crate::quant::aarch64::tile8 as tile;
use crate::quant::types::ty;

simd_common!();

pub(in crate::quant) static I8MM: Kernels = {
    let mut k = common(base("i8mm"));
    aarch64_rows!(k);
    // `smmla` multi-token kernels: 2 weight rows × 2 tokens per instruction.
    simd_mat_mat! { k;
        Q4_0 => mat_mat_q4_0_q8_0;
        Q4_1 => mat_mat_q4_1_q8_1;
        Q5_0 => mat_mat_q5_0_q8_0;
        Q8_0 => mat_mat_q8_0_q8_0;
        Q4_K => mat_mat_q4_k_q8_k;
        Q6_K => mat_mat_q6_k_q8_k;
        Q5_1 => mat_mat_q5_1_q8_1;
        IQ4_NL => mat_mat_iq4_nl_q8_0;
        Q2_K => mat_mat_q2_k_q8_k;
        Q3_K => mat_mat_q3_k_q8_k;
        Q5_K => mat_mat_q5_k_q8_k;
        IQ4_XS => mat_mat_iq4_xs_q8_k;
    }
    k.attn_chunk = neon_attn_chunk;
    k.packing = Some(&PACKING);
    k
};

const LAYOUT: &str = "arm-smmla-8";

fn q8x32(x: &[f32], out: &mut [u8]) {
    crate::quant::packed::quantize_q8x32(x, out, quant_q8_1)
}

packing! { pack_tile_mmla, q8x32, quant_q8_k;
    Q4_0 => mat_mat_q4_0;
    Q4_1 => mat_mat_q4_1;
    Q5_0 => mat_mat_q5_0;
    Q5_1 => mat_mat_q5_1;
    Q8_0 => mat_mat_q8_0;
    IQ4_NL => mat_mat_iq4_nl;
    Q4_K => mat_mat_q4_k;
    Q5_K => mat_mat_q5_k;
    Q6_K => mat_mat_q6_k;
}
