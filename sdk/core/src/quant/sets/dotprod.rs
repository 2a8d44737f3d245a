//! The dotprod set: `aarch64::dotprod` (`sdot`) on ggml's layout, and its `sdot` kernels on
//! the 8-row tiles of 4-byte column groups (`aarch64::tile8`).

use super::neon::{aarch64_rows, neon_attn_chunk};
use super::*;
use crate::quant::aarch64::dotprod as simd;
use crate::quant::aarch64::dotprod as k;
use crate::quant::aarch64::tile8 as tile;
use crate::quant::types::ty;

simd_common!();

pub(in crate::quant) static DOTPROD: Kernels = {
    let mut k = common(base("dotprod"));
    aarch64_rows!(k);
    k.attn_chunk = neon_attn_chunk;
    k.packing = Some(&PACKING);
    k
};

const LAYOUT: &str = "arm-sdot-8";

fn q8x32(x: &[f32], out: &mut [u8]) {
    crate::quant::packed::quantize_q8x32(x, out, quant_q8_1)
}

packing! { pack_tile, q8x32, quant_q8_k;
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
