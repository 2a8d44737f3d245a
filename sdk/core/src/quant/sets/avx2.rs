//! The AVX2 set: `x86::avx2` on ggml's layout (GEMV per token, 4-token GEMM for prefill) and
//! `x86::avx2_packed` on the 8-row tiles of `x86::tile8`.

use super::*;
use crate::quant::types::ty;
use crate::quant::x86::avx2 as simd;
use crate::quant::x86::avx2_packed as k;
use crate::quant::x86::tile8 as tile;

simd_common!();

/// The row kernels of `simd` (`x86::avx2`), which the AVX-512 and AVX-VNNI sets use too on
/// ggml's layout (repacking off): every CPU of theirs runs AVX2.
pub(super) const fn avx2_rows(k: Kernels) -> Kernels {
    let mut k = common(k);
    // SAFETY: every x86 set is handed out only where AVX2, FMA and F16C are.
    k.gelu_mul = |g, u| unsafe { simd::gelu_mul(g, u) };
    simd_rows! { k;
        F32 => vec_dot_f32_f32, mat_vec_f32_f32;
        F16 => vec_dot_f16_f32, mat_vec_f16_f32;
        BF16 => vec_dot_bf16_f32, mat_vec_bf16_f32;
        Q4_0 => vec_dot_q4_0_q8_0, mat_vec_q4_0_q8_0;
        Q4_1 => vec_dot_q4_1_q8_1, mat_vec_q4_1_q8_1;
        Q5_0 => vec_dot_q5_0_q8_0, mat_vec_q5_0_q8_0;
        Q8_0 => vec_dot_q8_0_q8_0, mat_vec_q8_0_q8_0;
        Q4_K => vec_dot_q4_k_q8_k, mat_vec_q4_k_q8_k;
        Q6_K => vec_dot_q6_k_q8_k, mat_vec_q6_k_q8_k;
        Q5_1 => vec_dot_q5_1_q8_1, mat_vec_q5_1_q8_1;
        Q2_K => vec_dot_q2_k_q8_k, mat_vec_q2_k_q8_k;
        Q3_K => vec_dot_q3_k_q8_k, mat_vec_q3_k_q8_k;
        Q5_K => vec_dot_q5_k_q8_k, mat_vec_q5_k_q8_k;
        IQ4_NL => vec_dot_iq4_nl_q8_0, mat_vec_iq4_nl_q8_0;
        IQ4_XS => vec_dot_iq4_xs_q8_k, mat_vec_iq4_xs_q8_k;
    }
    // Dedicated 4-token kernels: each weight block is decoded once for four tokens.
    simd_mat_mat! { k;
        Q4_0 => mat_mat_q4_0_q8_0;
        Q4_1 => mat_mat_q4_1_q8_1;
        Q5_0 => mat_mat_q5_0_q8_0;
        Q8_0 => mat_mat_q8_0_q8_0;
        Q4_K => mat_mat_q4_k_q8_k;
        Q6_K => mat_mat_q6_k_q8_k;
        IQ4_NL => mat_mat_iq4_nl_q8_0;
    }
    k
}

pub(in crate::quant) static AVX2: Kernels = {
    let mut k = avx2_rows(base("avx2"));
    k.attn_chunk = avx2_attn_chunk;
    k.packing = Some(&PACKING);
    k
};

/// The attention chunk of the AVX2 and AVX-VNNI sets (see [`simd_attn_chunk`]).
pub(super) fn avx2_attn_chunk(
    q: &[f32],
    heads: usize,
    rows: KvHeadRows<'_>,
    slots: &[u32],
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
) {
    use crate::quant::x86::avx2_attn;
    // SAFETY (all three): only sets that require AVX2, FMA and F16C point here, and they are
    // handed out after checking the CPU; `simd_attn_chunk` runs the kernel only on checked
    // sizes and a head size it handles.
    simd_attn_chunk(
        avx2_attn::handles_head_dim,
        |q, heads, rows, slots, scale, scores, out| unsafe {
            avx2_attn::attn_chunk(q, heads, rows, slots, scale, scores, out)
        },
        |x, y| unsafe { simd::vec_dot_f16_f32(x, y) },
        |a, x, y| unsafe { simd::axpy_f16_f32(a, x, y) },
        q,
        heads,
        rows,
        slots,
        scale,
        scores,
        out,
    )
}

/// The x86 sets' Q8x32 activation rows, written by the AVX2 quantizer in one pass. Sound for
/// every x86 set: each is handed out only where AVX2 is.
pub(super) fn q8x32(x: &[f32], out: &mut [u8]) {
    unsafe { simd::quantize_q8x32(x, out) }
}

/// The x86 sets' Q8_K quantizer (for Q8xK activation rows).
pub(super) fn q8_k(x: &[f32], out: &mut [u8]) {
    quant_q8_k(x, out)
}

const LAYOUT: &str = "x86-avx2-8";

// The `vpmaddubsw` kernels on 8-row tiles.
packing! { pack_tile, q8x32, q8_k;
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
