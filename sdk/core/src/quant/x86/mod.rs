//! x86-64 kernels, one file per instruction-set level, each with the reference's function
//! names:
//! - [`avx2`]: AVX2 + FMA + F16C, on ggml's block layouts (GEMV per token, 4-token GEMM).
//! - [`avx2_packed`]: the same instructions on weights repacked into 8-row tiles ([`tile8`], the
//!   layout; [`super::packed`], the abstraction).
//! - [`avx2_attn`]: the same instructions' attention chunk (`avx512_attn`'s plan on 256 bits).
//! - `avx512`: AVX-512 F/BW/VL + VNNI on weights repacked into 16-row tiles (`tile16`, the
//!   layout; [`super::packed`], the abstraction); compiled only with Rust 1.89 or newer (see
//!   `build.rs`).
//! - `avx512_act`: the AVX-512 set's activation quantizer (16 blocks' scalars per vector).
//! - `vnni256`: 256-bit `vpdpbusd` kernels on the AVX2 set's 8-row tiles, built for AVX-VNNI
//!   (VEX) and for AVX-512 VNNI (EVEX); compiled only with Rust 1.89 or newer, like `avx512`.
//! - [`tiles`]: what both tile layouts and their kernels share (block field offsets, activation
//!   rows, the tiles × tokens loop).

pub mod avx2;
pub mod avx2_attn;
pub mod avx2_packed;
pub mod tile8;
pub mod tiles;
// The AVX-512 and VNNI modules need Rust 1.89; build.rs enables them only then.
#[cfg(tern_avx512)]
#[clippy::msrv = "1.89"]
pub mod avx512;
#[cfg(tern_avx512)]
#[clippy::msrv = "1.89"]
pub mod avx512_act;
#[cfg(tern_avx512)]
#[clippy::msrv = "1.89"]
pub mod avx512_attn;
#[cfg(tern_avx512)]
pub mod tile16;
#[cfg(tern_avx512)]
#[clippy::msrv = "1.89"]
pub mod vnni256;
