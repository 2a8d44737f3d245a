//! The AVX-VNNI set: 256-bit `vpdpbusd` kernels (`x86::vnni256`) on the AVX2 set's 8-row tiles
//! when weights are repacked, the AVX2 kernels otherwise. Two values of one set: the VEX
//! encoding for AVX-VNNI CPUs, the EVEX one for AVX-512 CPUs (which lack AVX-VNNI but run the
//! same operation).

use super::avx2::{avx2_attn_chunk, avx2_rows};
use super::*;

pub(in crate::quant) static AVXVNNI_VEX: Kernels = {
    let mut k = avx2_rows(base("avxvnni"));
    k.attn_chunk = avx2_attn_chunk;
    k.packing = Some(&vex::PACKING);
    k
};

pub(in crate::quant) static AVXVNNI_EVEX: Kernels = {
    let mut k = avx2_rows(base("avxvnni"));
    k.attn_chunk = avx2_attn_chunk;
    k.packing = Some(&evex::PACKING);
    k
};

/// The packed kernels of one encoding, on the 8-row tiles.
macro_rules! vnni_packing {
    ($name:ident) => {
        mod $name {
            use super::super::avx2::{q8_k, q8x32};
            use super::*;
            use crate::quant::x86::tile8 as tile;
            use crate::quant::x86::vnni256::$name as k;

            const LAYOUT: &str = "x86-vnni256-8";

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
        }
    };
}

vnni_packing!(vex);
vnni_packing!(evex);
