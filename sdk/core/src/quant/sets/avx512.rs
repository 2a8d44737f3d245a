//! The AVX-512 set: VNNI kernels (`x86::avx512`) on the 16-row tiles of `x86::tile16` when
//! weights are repacked; on ggml's layout (repacking off) the AVX2 kernels, which every
//! AVX-512 CPU runs; its own attention chunk (`x86::avx512_attn`).

use super::avx2::{avx2_rows, q8_k};
use super::*;
use crate::quant::x86::avx512 as k;
use crate::quant::x86::tile16 as tile;

pub(in crate::quant) static AVX512: Kernels = {
    let mut k = avx2_rows(base("avx512"));
    k.attn_chunk = |q, heads, rows, slots, scale, scores, out| {
        if !attn_chunk_ok(q, heads, rows, slots, scores, out) {
            return;
        }
        if q.len() / heads > crate::quant::x86::avx512_attn::MAX_HEAD_DIM {
            r::attn_chunk(q, heads, rows, slots, scale, scores, out)
        } else {
            // SAFETY: CPU features checked before this set is handed out; sizes and head size
            // just above.
            unsafe { crate::quant::x86::avx512_attn::attn_chunk(q, heads, rows, slots, scale, scores, out) }
        }
    };
    k.packing = Some(&PACKING);
    k
};

const LAYOUT: &str = "x86-vnni-16";

/// Q8x32 activation rows by the AVX-512 quantizer. Sound: this set is handed out only where
/// AVX-512 F/BW/VL are.
fn q8x32(x: &[f32], out: &mut [u8]) {
    unsafe { crate::quant::x86::avx512_act::quantize_q8x32(x, out) }
}

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
