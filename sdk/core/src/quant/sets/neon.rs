//! The aarch64 base set: `aarch64::neon` (`smull` + `sadalp`) on ggml's layout, and the NEON
//! attention chunk of every aarch64 set.

use super::*;
use crate::quant::aarch64::neon as simd;
use crate::quant::types::ty;

simd_common!();

/// In a const block building `$k`: the row kernels every aarch64 module has under the
/// reference's names (`simd`, in scope where this expands).
macro_rules! aarch64_rows {
    ($k:ident) => {
        simd_rows! { $k;
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
    };
}
pub(super) use aarch64_rows;

pub(in crate::quant) static NEON: Kernels = {
    let mut k = common(base("neon"));
    aarch64_rows!(k);
    k.attn_chunk = neon_attn_chunk;
    k
};

/// The attention chunk of the aarch64 sets (see [`simd_attn_chunk`]).
pub(super) fn neon_attn_chunk(
    q: &[f32],
    heads: usize,
    rows: KvHeadRows<'_>,
    slots: &[u32],
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
) {
    use crate::quant::aarch64::attn;
    // SAFETY (all three): NEON is part of every aarch64 target; `simd_attn_chunk` runs the
    // kernel only on checked sizes and a head size it handles.
    simd_attn_chunk(
        attn::handles_head_dim,
        |q, heads, rows, slots, scale, scores, out| unsafe {
            attn::attn_chunk(q, heads, rows, slots, scale, scores, out)
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
